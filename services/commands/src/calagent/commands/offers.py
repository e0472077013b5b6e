"""A held change is bound to the offer the user saw (contract §15).

At prepare, the offer records the version of its target (a digest of the event's rows: the event,
or the series' master and its overrides) and the request that made it. At confirmation the target
is read again: if it changed since (a sync brought the user's own edit, another command moved it),
nothing is written; the request is prepared again against the event as it is now, and that new
before → after is the offer the user answers next. An offer with no version (a sync conflict's) is
still checked for what its time meets now, under the same user's lock as every write, so two
confirmations never book one time unseen. An offer is consumed only by the transaction that
writes its change, so a write that fails leaves it held.
"""

from __future__ import annotations

from calagent.commands.changes import Changes, own_series
from calagent.commands.domain.changelog import version_of
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.payloads import ChangeRequest, HeldChange
from calagent.commands.placing import Placing
from calagent.commands.txn import Txn, error_result
from calagent.commands.views import stub_out
from calagent.contracts.commands import CommandResult, PrepareChange


class Offers:
    def __init__(self, changes: Changes, placing: Placing) -> None:
        self.changes = changes
        self.placing = placing

    async def version(self, txn: Txn, change: HeldChange) -> str | None:
        """The version of the change's target as it is now (None: it is gone)."""
        rows = await txn.uow.changes.current_rows(txn.user_id, change.target_ids, series=True)
        return version_of(rows.values()) if rows else None

    async def bind(self, txn: Txn, command: PrepareChange, result: CommandResult) -> CommandResult:
        """Record on a prepared change the version of its target and the request that made it."""
        if result.stub is None or result.stub.kind != "change":
            return result
        stub = await txn.uow.stubs.get_stub(txn.user_id, result.stub.id)
        if stub is None or not isinstance(stub.payload, HeldChange):
            return result
        change = stub.payload
        bound = change.model_copy(
            update={
                "version": await self.version(txn, change),
                "request": ChangeRequest(
                    action=command.action,
                    event_id=command.event_id,
                    update=command.update,
                    scope=command.scope,
                    hold=command.hold,
                ),
            }
        )
        await txn.uow.stubs.update_stub(self.changes.pending.of(stub).bound(bound))
        return result

    async def pick(self, txn: Txn, stub: Stub, event_id: str) -> CommandResult:
        """The user singled out one of the events the change asks about (contract §20): the request
        that made it, prepared again for that event on the same stub, and bound to it."""
        change = stub.payload
        if not isinstance(change, HeldChange) or not self.changes.pending.of(stub).picks(event_id):
            return error_result("invalid_arguments", "not one of the events this change asks about")
        request = change.request
        again = PrepareChange(
            envelope=txn.envelope,
            idempotency_key=txn.key,
            action=request.action if request else change.action,
            event_id=event_id,
            update=request.update if request else None,
            scope=request.scope if request else change.scope,
            hold=request.hold if request else None,
        )
        return await self.bind(txn, again, await self.changes.pick(txn, stub, again))

    async def check(self, txn: Txn, stub: Stub) -> CommandResult | None:
        """None when the offer still says what confirming it does (the caller then runs it);
        else the offer made again from the calendar as it is now, with nothing written: the target
        changed since, or a new event now stands where it would go."""
        change = stub.payload
        if not isinstance(change, HeldChange):
            return None
        if not change.bound:
            return await self._meets_now(txn, stub, change)
        txn.log_as(scope=change.scope)
        if await self.stands(txn, stub, change):
            return None
        request = change.request
        again = PrepareChange(
            envelope=txn.envelope,
            idempotency_key=txn.key,
            action=request.action if request else change.action,
            event_id=request.event_id if request else change.row_id,
            update=request.update if request else None,
            scope=request.scope if request else change.scope,
            hold=request.hold if request else None,
        )
        # The stale offer gives way to the fresh one (superseded by it, not told as a new request).
        fresh = await self.bind(txn, again, await self.changes.prepare(txn, again))
        if fresh.status == "error":
            return fresh
        return fresh.model_copy(update={"superseded": None, "reoffered": True})

    async def stands(self, txn: Txn, stub: Stub, change: HeldChange) -> bool:
        """Whether the offer still says what confirming it does: its target is the version it
        was offered from and nothing new stands where it would go (§15). A target gone since
        stands too: confirming it answers as it always has (not found)."""
        now = await self.version(txn, change)
        if now is None:
            return True
        return self.changes.pending.of(stub).offer_stands(
            now, change.version, await self._conflicts_now(txn, change)
        )

    async def _meets_now(self, txn: Txn, stub: Stub, change: HeldChange) -> CommandResult | None:
        """An offer with no version to compare (a sync conflict's, or one held before offers were
        bound) is still a yes to its time as it was shown: when something now stands there that it
        did not show, nothing is written and it is shown again with it."""
        conflicts = await self._conflicts_now(txn, change)
        pending = self.changes.pending.of(stub)
        if pending.shows(conflicts):
            return None
        again = await self.changes.pending.store(txn, pending.shown_again(conflicts, txn.now))
        return CommandResult(status="held", stub=stub_out(again, conflicts, txn.tz), reoffered=True)

    async def _conflicts_now(self, txn: Txn, change: HeldChange) -> tuple[Event, ...]:
        """What a move would meet now (one added since, by sync or another command, included): the
        user said yes to the slot as the offer showed it, not to a double booking."""
        after = change.after
        if change.action != "update" or after is None:
            return ()
        return await self.placing.conflicts(
            txn,
            after.start,
            after.end,
            after.all_day,
            ignore_ids=frozenset(change.target_ids),
            own_series=own_series(change.master_id, change.scope),
        )
