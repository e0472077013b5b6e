"""A held change is bound to the offer the user saw (contract §15).

At prepare, the offer records the version of its target (a digest of the event's rows: the event,
or the series' master and its overrides) and the request that made it. At confirmation the target
is read again: if it changed since (a sync brought the user's own edit, another command moved it),
nothing is written; the request is prepared again against the event as it is now, and that new
before → after is the offer the user answers next. An offer is consumed only by the transaction
that writes its change, so a write that fails leaves it held.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from calagent.commands.changes import Changes
from calagent.commands.domain.changelog import version_of
from calagent.commands.domain.model import Stub
from calagent.commands.placing import Placing
from calagent.commands.txn import Txn
from calagent.contracts.commands import CommandResult, PrepareChange
from calagent.contracts.tools import UpdateSchedule


def _target_ids(change: dict[str, Any]) -> list[str]:
    return [i for i in (change.get("row_id"), change.get("master_id")) if i]


class Offers:
    def __init__(self, changes: Changes, placing: Placing) -> None:
        self.changes = changes
        self.placing = placing

    async def _version(self, txn: Txn, change: dict[str, Any]) -> str | None:
        rows = await txn.uow.current_rows(txn.user_id, _target_ids(change), series=True)
        return version_of(rows.values()) if rows else None

    async def bind(self, txn: Txn, command: PrepareChange, result: CommandResult) -> CommandResult:
        """Record on a prepared change the version of its target and the request that made it."""
        if result.stub is None or result.stub.kind != "change":
            return result
        stub = await txn.uow.get_stub(txn.user_id, result.stub.id)
        if stub is None or stub.change is None:
            return result
        change = dict(stub.change)
        change["version"] = await self._version(txn, change)
        change["request"] = command.model_dump(
            mode="json", include={"action", "event_id", "update", "scope", "hold"}
        )
        await txn.uow.update_stub(stub.evolve(change=change))
        return result

    async def check(self, txn: Txn, stub: Stub) -> CommandResult | None:
        """None when the offer still says what confirming it does (the caller then runs it);
        else the offer made again from the calendar as it is now, with nothing written: the target
        changed since, or a new event now stands where it would go."""
        change = stub.change or {}
        if stub.kind != "change" or "version" not in change:
            return None
        txn.log_as(scope=change.get("scope"))
        now = await self._version(txn, change)
        if now is None:
            return None  # gone: confirming answers it as it always has (not found)
        if now == change["version"] and not await self._new_conflicts(txn, stub, change):
            return None
        request = change.get("request") or {}
        update = request.get("update")
        again = PrepareChange(
            envelope=txn.envelope,
            idempotency_key=txn.key,
            action=request.get("action", change["action"]),
            event_id=request.get("event_id", change["row_id"]),
            update=UpdateSchedule.model_validate(update) if update else None,
            scope=request.get("scope", change["scope"]),
            hold=request.get("hold"),
        )
        # The stale offer gives way to the fresh one (superseded by it, not told as a new request).
        fresh = await self.bind(txn, again, await self.changes.prepare(txn, again))
        if fresh.status == "error":
            return fresh
        return fresh.model_copy(update={"superseded": None, "reoffered": True})

    async def _new_conflicts(self, txn: Txn, stub: Stub, change: dict[str, Any]) -> bool:
        """Whether a move now lands on an event the offer did not show (one added since, by sync
        or another command): the user said yes to a free slot, not to a double booking."""
        after = change.get("after")
        if change.get("action") != "update" or not after:
            return False
        found = await self.changes.conflicts(
            txn,
            datetime.fromisoformat(after["start"]),
            datetime.fromisoformat(after["end"]),
            bool(after["all_day"]),
            own_ids=frozenset(_target_ids(change)),
            master_id=change.get("master_id"),
            scope=change["scope"],
        )
        shown = set(stub.conflict_event_ids)
        # The offer records the single events it showed, so a single one not among them is new.
        return any(c.series_id is None and c.id not in shown for c in found)
