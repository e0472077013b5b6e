"""The pending command as stored: every write to a stub goes through here.

The rules are `domain/pending.py`'s `PendingCommand`; this part reads the active stub, stores the
step the rules return and notes when a stub ended (an invitation waiting its turn may be offered
then). Whatever makes a new stub (a create, a change offer, a plan, an invitation, a sync
conflict) opens it here, so the user's active one is always superseded first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from types import MappingProxyType
from typing import Protocol
from zoneinfo import ZoneInfo

from calagent.commands.domain.model import Stub
from calagent.commands.domain.pending import PendingCommand
from calagent.commands.domain.people import Unresolved
from calagent.commands.domain.stubs import Decision, Proposal
from calagent.commands.ports import UnitOfWork
from calagent.commands.txn import new_id
from calagent.commands.views import stub_out
from calagent.contracts.commands import (
    ACTIVE_STUB_STATUSES,
    CommandResult,
    HoldReason,
    StubKind,
    StubOut,
    StubSlots,
    StubStatus,
)
from calagent.contracts.people import Attendee


class StubTxn(Protocol):
    """What a step of a stub needs of the transaction it is written in."""

    uow: UnitOfWork
    now: datetime
    tz: ZoneInfo
    ended_stub: bool

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
    ended_stub: bool = False


class Pending:
    def __init__(self, ttl: timedelta) -> None:
        self.ttl = ttl

    def of(self, stub: Stub) -> PendingCommand:
        return PendingCommand(stub, self.ttl)

    async def active(self, txn: StubTxn) -> Stub | None:
        """The user's active stub; one whose time ran out is ended `expired` on the way."""
        active = await txn.uow.active_stub(txn.user_id)
        if active is not None and self.of(active).expired(txn.now):
            await self.move(txn, active, "expired")
            return None
        return active

    async def move(
        self,
        txn: StubTxn,
        stub: Stub,
        status: StubStatus,
        fields: Mapping[str, object] = MappingProxyType({}),
    ) -> Stub:
        moved = self.of(stub).move(status, txn.now, fields)
        await txn.uow.update_stub(moved)
        if status not in ACTIVE_STUB_STATUSES:
            txn.ended_stub = True
        return moved

    async def supersede(self, txn: StubTxn, active: Stub | None) -> StubOut | None:
        """A new request: the pending one is given up and says so; it never lends its title or
        slots to the new one."""
        if active is None:
            return None
        ended = await self.move(txn, active, "superseded")
        return stub_out(ended, (), txn.tz)

    async def expire(self, txn: StubTxn, stub: Stub) -> CommandResult:
        expired = await self.move(txn, stub, "expired")
        return CommandResult(status="expired", stub=stub_out(expired, (), txn.tz))

    async def save(
        self,
        txn: StubTxn,
        stub: Stub | None,
        *,
        title: str,
        slots: StubSlots,
        status: StubStatus,
        fields: Mapping[str, object],
        kind: StubKind = "create",
    ) -> Stub:
        """Insert a new stub or move an existing one to `status` with the given fields."""
        if stub is not None:
            return await self.move(txn, stub, status, {**fields, "title": title, "slots": slots})
        fresh = PendingCommand.open(
            stub_id=new_id(),
            user_id=txn.user_id,
            title=title,
            slots=slots,
            status=status,
            now=txn.now,
            ttl=self.ttl,
            turn_id=txn.turn_id,
            kind=kind,
            fields=fields,
        ).stub
        await txn.uow.insert_stub(fresh)
        return fresh

    async def evaluated(
        self,
        txn: StubTxn,
        stub: Stub | None,
        *,
        title: str,
        slots: StubSlots,
        status: StubStatus,
        hold: HoldReason | None,
        confirmed: bool,
        candidates: tuple[date, ...] = (),
        decision: Decision | None = None,
        proposal: Proposal | None = None,
        unresolved: Unresolved | None = None,
        recipients: tuple[Attendee, ...] = (),
    ) -> Stub:
        """A create's stub after an evaluation that did not create: what it lacks or why it waits."""
        return await self.save(
            txn,
            stub,
            title=title,
            slots=slots,
            status=status,
            fields={
                "candidates": candidates,
                "conflict_event_ids": tuple(ev.id for ev in decision.conflicts) if decision else (),
                "hold_reason": decision.hold_reason if decision else None,
                # Only third-party content sticks to a stub across clarifications; the other holds
                # are judged again on every evaluation (a past start, a rule, an unclear one).
                "requested_hold": hold if hold == "third_party_content" else None,
                "confirmed": confirmed,
                "proposed_start": proposal.start if proposal else None,
                "proposed_end": proposal.end if proposal else None,
                "attendee_query": unresolved.query if unresolved else None,
                "attendee_candidates": unresolved.candidates if unresolved else (),
                "recipients": recipients,
            },
        )

    async def hold(
        self, txn: StubTxn, *, title: str, reason: HoldReason, kind: StubKind, fields: Mapping[str, object]
    ) -> tuple[Stub, Stub | None]:
        """A new held stub in place of the user's active one (superseded); both returned."""
        active = await txn.uow.active_stub(txn.user_id)
        ended = await self.move(txn, active, "superseded") if active is not None else None
        held = PendingCommand.hold(
            stub_id=new_id(),
            user_id=txn.user_id,
            title=title,
            reason=reason,
            now=txn.now,
            ttl=self.ttl,
            turn_id=txn.turn_id,
            kind=kind,
            fields=fields,
        ).stub
        await txn.uow.insert_stub(held)
        return held, ended
