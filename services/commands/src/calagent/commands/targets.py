"""What an event id names — a single event, or one occurrence of a series (`Target`) — and how a
change held for it writes its rows, scope by scope (`this`, `following`, `all`): the series
mechanics under `changes.Changes`, which prepares and confirms, and `counters`, which offers an
attendee's move."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from calagent.commands.domain.changes import (
    carry,
    exdates_before,
    master_values,
    own_values,
    row_values,
    series_move,
)
from calagent.commands.domain.model import Event
from calagent.commands.domain.payloads import ChangeAfter, HeldChange
from calagent.commands.domain.series import expand, live_count, split_occurrence_id, until_before, zone_of
from calagent.commands.txn import Txn, new_id
from calagent.contracts.tools import Scope


@dataclass(frozen=True)
class Target:
    """What an event id names: a single event, or one occurrence of a series."""

    row: Event  # the stored row: the single event, the override, or the series master
    master: Event | None  # the series master, for an occurrence
    occurrence: Event  # the occurrence (or single event) as the user sees it
    occurrence_start: datetime | None  # the slot the rule gives it (UTC), for an occurrence


async def find(txn: Txn, event_id: str) -> Target | None:
    split = split_occurrence_id(event_id)
    row = await txn.uow.events.get_event(txn.user_id, split[0] if split else event_id)
    if row is None:
        return None
    if split is not None:
        if row.rrule is None:
            return None
        return await occurrence(txn, row, split[1])
    if row.series_id is not None and row.recurrence_id is not None:
        master = await txn.uow.events.get_event(txn.user_id, row.series_id)
        if master is None:
            return Target(row, None, row, None)
        return Target(row, master, row.evolve(series_id=master.id), row.recurrence_id.astimezone(UTC))
    if row.rrule is not None:
        # The series' own id: its first occurrence stands for it.
        return await occurrence(txn, row, row.start.astimezone(UTC))
    return Target(row, None, row, None)


async def occurrence(txn: Txn, master: Event, slot: datetime) -> Target | None:
    for override in await txn.uow.events.series_overrides(txn.user_id, master.id):
        if override.recurrence_id is not None and override.recurrence_id.astimezone(UTC) == slot:
            return Target(override, master, override, slot)
    duration = master.end - master.start
    found = [
        e
        for e in expand([master], slot, slot + duration)
        if e.occurrence_start is not None and e.occurrence_start.astimezone(UTC) == slot
    ]
    if not found:
        return None
    return Target(master, master, found[0], slot)


async def read_back(txn: Txn, row_id: str, slot: datetime | None) -> Event | None:
    row = await txn.uow.events.get_event(txn.user_id, row_id)
    if row is None:
        return None
    if slot is None or row.rrule is None:
        return row
    target = await occurrence(txn, row, slot)
    return target.occurrence if target is not None else None


async def stored_target(txn: Txn, change: HeldChange) -> Target | None:
    if change.master_id and change.occurrence_start:
        master = await txn.uow.events.get_event(txn.user_id, change.master_id)
        if master is None or master.rrule is None:
            return None
        return await occurrence(txn, master, change.occurrence_start)
    row = await txn.uow.events.get_event(txn.user_id, change.row_id)
    return Target(row, None, row, None) if row is not None else None


async def delete_target(txn: Txn, target: Target, scope: Scope) -> int | None:
    """Remove what the scope names; the count is of occurrences that really go (an excluded
    one is gone already), None for a series without an end."""
    uow = txn.uow
    master, slot = target.master, target.occurrence_start
    if master is None or slot is None:
        return await uow.events.delete_events(txn.user_id, [target.row.id])
    overrides = await uow.events.series_overrides(txn.user_id, master.id)
    first = master.start.astimezone(UTC)
    if scope == "all" or (scope == "following" and slot <= first):
        gone = live_count(master, first)
        await uow.events.delete_events(txn.user_id, [master.id, *(o.id for o in overrides)])
        return gone
    if scope == "this":
        if target.row.id != master.id:
            await uow.events.delete_events(txn.user_id, [target.row.id])
        await uow.events.update_event(master.evolve(exdates=(*master.exdates, slot)))
        return 1
    assert master.rrule is not None
    gone = live_count(master, slot)
    later = [o.id for o in overrides if o.recurrence_id is not None and o.recurrence_id >= slot]
    await uow.events.delete_events(txn.user_id, later)
    await uow.events.update_event(
        master.evolve(
            rrule=until_before(master.rrule, slot, zone_of(master)),
            exdates=exdates_before(master.exdates, slot),
        )
    )
    return gone


async def update_target(
    txn: Txn, target: Target, scope: Scope, after: ChangeAfter | None
) -> tuple[str, datetime | None]:
    """Write the change; returns where the occurrence the user pointed at now lives (its row,
    and its slot when that row is a series)."""
    uow = txn.uow
    assert after is not None, "a held update keeps the event after it (HeldChange)"
    start, end = after.start, after.end
    values = own_values(after)
    master, slot = target.master, target.occurrence_start
    if master is None or slot is None or (scope == "this" and target.row.id != master.id):
        await uow.events.update_event(target.row.evolve(**row_values(target.row, after)))
        return target.row.id, None
    if scope == "this":
        override = master.evolve(
            id=new_id(),
            start=start,
            end=end,
            rrule=None,
            exdates=(),
            series_id=master.id,
            recurrence_id=slot,
            sync_state=None,
            **values,
        )
        await uow.events.insert_event(override, turn_id=txn.envelope.turn_id, key=None)
        return override.id, None
    assert master.rrule is not None
    moved, origin = series_move(master, slot, scope, after)
    overrides = await uow.events.series_overrides(txn.user_id, master.id)
    changed = master_values(master, after)
    duration = changed.pop("duration")
    assert isinstance(duration, timedelta)
    new_start = moved.slot(origin)
    series = master.evolve(start=new_start, end=new_start + duration, rrule=moved.rule, **changed)
    if origin == master.start.astimezone(UTC):
        series = series.evolve(exdates=tuple(moved.slot(d) for d in master.exdates))
        await uow.events.update_event(series)
    else:
        # `following`: the series ends before this occurrence and a new one starts at it.
        series = series.evolve(
            id=new_id(),
            sync_state=None,
            exdates=tuple(moved.slot(d) for d in master.exdates if d >= origin),
        )
        await uow.events.update_event(
            master.evolve(
                rrule=until_before(master.rrule, origin, moved.tz),
                exdates=exdates_before(master.exdates, origin),
            )
        )
        await uow.events.insert_event(series, turn_id=txn.envelope.turn_id, key=None)
    for override in overrides:
        rid = override.recurrence_id
        if rid is None or rid < origin:
            continue
        if override.id == target.row.id:
            # The occurrence the user pointed at takes the change as they were shown it.
            carried = override.evolve(start=start, end=end, **values)
        else:
            carried = carry(override, master, series, moved)
        await uow.events.update_event(carried.evolve(series_id=series.id, recurrence_id=moved.slot(rid)))
    return series.id, moved.slot(slot)
