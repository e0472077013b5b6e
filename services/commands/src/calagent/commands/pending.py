"""The pending command as stored: every write to a stub goes through here.

The rules are `domain/pending.py`'s `PendingCommand`; this part loads the stub a command names (a
stub whose time ran out is ended `expired` on the way, here only), makes way for a new request by
the aggregate's rule, stores the step the aggregate returns and notes when a stub ended (an
invitation waiting its turn may be offered then). Whatever makes a new stub (a create, a change
offer, a plan, an invitation, a sync conflict) opens it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol
from zoneinfo import ZoneInfo

from calagent.commands.domain.model import Stub
from calagent.commands.domain.pending import Ask, PendingCommand
from calagent.commands.outside import offer_refused
from calagent.commands.ports import UnitOfWork
from calagent.commands.txn import error_result, new_id
from calagent.commands.views import stub_out
from calagent.contracts.commands import ActiveStubStatus, CommandResult, HoldReason, StubKind, StubOut


class StubTxn(Protocol):
    """What a step of a stub needs of the transaction it is written in."""

    uow: UnitOfWork
    now: datetime
    tz: ZoneInfo

    @property
    def user_id(self) -> str: ...

    @property
    def turn_id(self) -> str | None: ...


@dataclass
class BackgroundTxn:
    """A transaction no user turn started (a sync worker's): it still writes stubs by the rules."""

    uow: UnitOfWork
    now: datetime
    user_id: str
    tz: ZoneInfo
    turn_id: str | None = None


@dataclass(frozen=True)
class Way:
    """What a new request found: the user's own request it must not end (`kept`: the new one is
    answered as held, nothing written), or the one it ended (`superseded`, for the receipt)."""

    kept: Stub | None = None
    superseded: StubOut | None = None


class Pending:
    def __init__(self, ttl: timedelta) -> None:
        self.ttl = ttl

    def of(self, stub: Stub) -> PendingCommand:
        return PendingCommand(stub, self.ttl)

    async def active(self, txn: StubTxn) -> Stub | None:
        """The user's active stub; one whose time ran out is ended `expired` on the way."""
        active = await txn.uow.stubs.active_stub(txn.user_id)
        if active is not None and self.of(active).expired(txn.now):
            await self.store(txn, self.of(active).expire(txn.now))
            return None
        return active

    async def answered(self, txn: StubTxn, command_id: str | None) -> Stub | CommandResult:
        """The active stub an answer names (its id, else the active one), or what to answer when
        there is none: an error, or `expired` for one whose time ran out (ended so here)."""
        stub = (
            await txn.uow.stubs.get_stub(txn.user_id, command_id)
            if command_id
            else await txn.uow.stubs.active_stub(txn.user_id)
        )
        if stub is None or not stub.active:
            return error_result("no_active_command", "no active schedule command with that id")
        pending = self.of(stub)
        if pending.expired(txn.now):
            expired = await self.store(txn, pending.expire(txn.now))
            return CommandResult(status="expired", stub=stub_out(expired, (), txn.tz))
        return stub

    async def store(self, txn: StubTxn, stub: Stub) -> Stub:
        """Store a step the aggregate returned."""
        await txn.uow.stubs.update_stub(stub)
        if not stub.active:
            txn.uow.effects.stub_ended(txn.user_id)
        return stub

    async def make_way(self, txn: StubTxn, hold: HoldReason | None, active: Stub | None) -> Way:
        """Before a new request (`hold`: the one it was asked with; `active`: the user's active
        stub as `active` read it): that stub ends superseded, unless the aggregate says it does not
        give way (`Way.kept`)."""
        if active is None:
            return Way()
        pending = self.of(active)
        if not pending.gives_way_to(hold):
            return Way(kept=active)
        if pending.steps_aside_for(txn.turn_id):
            await self.store(txn, pending.set_aside(txn.now))
            return Way()  # not given up: nothing to tell as dropped
        ended = await self.store(txn, pending.supersede(txn.now))
        return Way(superseded=stub_out(ended, (), txn.tz))

    async def open(
        self,
        txn: StubTxn,
        status: ActiveStubStatus | Literal["created"],
        ask: Ask,
        kind: StubKind = "create",
    ) -> Stub:
        """A new request's stub, inserted (after `make_way`)."""
        fresh = self._opened(txn, status, ask, kind).stub
        await txn.uow.stubs.insert_stub(fresh)
        return fresh

    def _opened(
        self, txn: StubTxn, status: ActiveStubStatus | Literal["created"], ask: Ask, kind: StubKind
    ) -> PendingCommand:
        return PendingCommand.open(
            stub_id=new_id(),
            user_id=txn.user_id,
            status=status,
            ask=ask,
            now=txn.now,
            ttl=self.ttl,
            turn_id=txn.turn_id,
            kind=kind,
        )

    async def from_outside(self, txn: StubTxn, ask: Ask, kind: StubKind) -> Stub:
        """An offer from outside (an invitation, a sync conflict): the user's held stub when
        nothing else waits for them, else waiting beside the conversation — it never ends a request
        the user has not answered, and is never lost behind one."""
        if await self.active(txn) is None:
            # One that waited behind a request which lapsed since comes first.
            await self.offer_waiting(txn)
        if await txn.uow.stubs.active_stub(txn.user_id) is None:
            return await self.open(txn, "held", ask, kind)
        waiting = self._opened(txn, "held", ask, kind).set_aside(txn.now)
        await txn.uow.stubs.insert_stub(waiting)
        return waiting

    async def offer_waiting(self, txn: StubTxn) -> Stub | None:
        """When the user has no active stub: the oldest offer still waiting becomes it, checked
        again against the calendar as it now is (`offer_refused`; one refused is superseded by
        what made it so). Lapsed ones end `expired` on the way."""
        if await txn.uow.stubs.active_stub(txn.user_id) is not None:
            return None
        for stub in await txn.uow.stubs.waiting_stubs(txn.user_id):
            pending = self.of(stub)
            if pending.expired(txn.now):
                await self.store(txn, pending.expire(txn.now))
                continue
            if await offer_refused(txn.uow, stub) is not None:
                await self.store(txn, pending.supersede(txn.now))
                continue
            return await self.store(txn, pending.come_back(txn.now))
        return None

    async def step(self, txn: StubTxn, stub: Stub | None, status: ActiveStubStatus, ask: Ask) -> Stub:
        """A create's stub asked (again): the stub it continues, or a new one."""
        if stub is None:
            return await self.open(txn, status, ask)
        return await self.store(txn, self.of(stub).ask(status, ask, txn.now))

    async def hold(self, txn: StubTxn, ask: Ask, kind: StubKind) -> tuple[Stub, StubOut | None]:
        """An offer code makes for the user's words (a plan the model proposed), held in place of
        the user's active stub; the one it superseded is returned for the receipt."""
        way = await self.make_way(txn, None, await self.active(txn))
        held = await self.open(txn, "held", ask, kind)
        return held, way.superseded
