"""The change log's rules (contract §15), as pure functions of stored rows.

A change is what one command (or one resource of a sync) did to the user's events: for every row
it touched, the whole row before and after (`to_jsonb` of the stored row, so the UID, the object,
the people — everything an undo must give back). Whether a row is still as a change left it, what
kind of change it was and which row stands for it are decided here; the store only reads and
writes them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from calagent.commands.domain.model import Event, local_uid
from calagent.contracts.commands import ChangeKind, ChangeSource
from calagent.contracts.people import Attendee

Snapshot = Mapping[str, Any]  # one stored row as `to_jsonb` gives it

# How a row was kept, not what the event is: a difference in these alone is no change the user
# made or can take back (the trigger of migration 0007c prunes with the same list). An undo keeps
# the object (`ical`) the row has now, so the outbox patches the restored values into the version
# the server holds.
BOOKKEEPING: frozenset[str] = frozenset(
    {"ical", "updated_at", "created_at", "sync_state", "created_by_turn", "created_by_key"}
)
_INSTANTS = ("start_at", "end_at", "recurrence_id")


@dataclass(frozen=True)
class ChangeContext:
    """What the rows a command writes are logged as: one change per command."""

    id: str
    source: ChangeSource
    turn_id: str | None
    at: datetime
    scope: str | None = None
    undoes: str | None = None

    def as_json(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "source": self.source,
                "turn_id": self.turn_id,
                "at": self.at.isoformat(),
                "scope": self.scope,
                "undoes": self.undoes,
            },
            sort_keys=True,
        )


@dataclass(frozen=True)
class RowChange:
    event_id: str
    before: Snapshot | None
    after: Snapshot | None


@dataclass(frozen=True)
class LoggedChange:
    id: str
    at: datetime
    source: ChangeSource
    turn_id: str | None
    scope: str | None
    undoes: str | None
    undone_by: str | None
    rows: tuple[RowChange, ...]

    @property
    def kind(self) -> ChangeKind:
        if all(r.before is None for r in self.rows):
            return "created"
        if all(r.after is None for r in self.rows):
            return "deleted"
        return "updated"

    @property
    def primary(self) -> RowChange:
        """The row that stands for the change: the event or series master it was about (not an
        override of one of its occurrences), else the first row."""
        for row in self.rows:
            snap = row.before or row.after
            if snap is not None and snap.get("series_id") is None:
                return row
        return self.rows[0]


def _instant(value: Any) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(str(value)).astimezone(UTC)


def state_of(snapshot: Snapshot | None) -> dict[str, Any] | None:
    """What a row says about the event, comparable across sessions (an instant written in any
    zone offset is the same instant)."""
    if snapshot is None:
        return None
    state = {k: v for k, v in snapshot.items() if k not in BOOKKEEPING}
    for key in _INSTANTS:
        state[key] = _instant(state.get(key))
    state["exdates"] = sorted(_instant(d) for d in state.get("exdates") or ())
    return state


def same_state(a: Snapshot | None, b: Snapshot | None) -> bool:
    return state_of(a) == state_of(b)


def changed_since(change: LoggedChange, current: Mapping[str, Snapshot]) -> list[str]:
    """The rows of `change` that are no longer as it left them (`current`: the rows stored now, by
    id; a missing id is a row that does not exist)."""
    return [r.event_id for r in change.rows if not same_state(r.after, current.get(r.event_id))]


def version_of(rows: Iterable[Snapshot]) -> str:
    """A digest of what the rows say: two reads give the same digest exactly when no row of them
    changed in anything the user can see or take back."""
    states = sorted(
        (json.dumps(state_of(r), sort_keys=True, default=str) for r in rows),
    )
    return hashlib.sha256("\n".join(states).encode()).hexdigest()


def event_of(snapshot: Snapshot) -> Event:
    """A logged row as an event, for showing it (before and after)."""
    start = _instant(snapshot["start_at"])
    end = _instant(snapshot["end_at"])
    assert start is not None and end is not None
    return Event(
        id=snapshot["id"],
        user_id=snapshot["user_id"],
        title=snapshot["title"],
        start=start,
        end=end,
        calendar=snapshot["calendar"],
        all_day=bool(snapshot.get("all_day")),
        completed=bool(snapshot.get("completed")),
        tz=snapshot.get("tz"),
        rrule=snapshot.get("rrule"),
        exdates=tuple(d for d in (_instant(x) for x in snapshot.get("exdates") or ()) if d is not None),
        series_id=snapshot.get("series_id"),
        recurrence_id=_instant(snapshot.get("recurrence_id")),
        reminder_minutes=snapshot.get("reminder_minutes"),
        sync_state=snapshot.get("sync_state"),
        uid=snapshot.get("uid") or local_uid(snapshot["id"]),
        location=snapshot.get("location"),
        notes=snapshot.get("notes"),
        url=snapshot.get("url"),
        ical=snapshot.get("ical"),
        attendees=tuple(Attendee.model_validate(a) for a in snapshot.get("attendees") or ()),
        organizer=snapshot.get("organizer"),
        transparent=bool(snapshot.get("transparent")),
        tentative=bool(snapshot.get("tentative")),
        foreign_calendar=bool(snapshot.get("foreign_calendar")),
        outside_text=bool(snapshot.get("outside_text")),
        task_id=snapshot.get("task_id"),
    )


def restore_plan(change: LoggedChange) -> Sequence[tuple[str, Snapshot | None]]:
    """What undoing `change` writes: every row it touched back to its `before` (None: removed)."""
    return [(r.event_id, r.before) for r in change.rows]


def tasks_of_blocks(change: LoggedChange) -> set[str]:
    """The tasks whose blocks (rows with a `task_id`) the change touched."""
    return {
        str(snap["task_id"])
        for r in change.rows
        for snap in (r.before, r.after)
        if snap is not None and snap.get("task_id")
    }


def tasks_brought_back(change: LoggedChange) -> set[str]:
    """The tasks whose blocks undoing `change` would bring back (rows it removed)."""
    return {str(r.before["task_id"]) for r in change.rows if r.before is not None and r.before.get("task_id")}


def task_made_by(change: LoggedChange, created: Mapping[str, datetime]) -> str | None:
    """The task `change` added (contract §21: "add task X" made X and placed it): every row it
    wrote is a new block of one task, made in the same command (`created`: when each task still
    there was made). A re-placement or a task made earlier is none: its undo moves blocks only."""
    if change.kind != "created":
        return None
    owners = {r.after.get("task_id") if r.after is not None else None for r in change.rows}
    if len(owners) != 1:
        return None
    [owner] = owners
    if owner is None or created.get(str(owner)) != change.at:
        return None
    return str(owner)
