"""What the command service keeps: events and command stubs, as plain values."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Protocol

from calagent.commands.domain.payloads import PendingChange
from calagent.contracts.commands import ACTIVE_STUB_STATUSES, HoldReason, StubKind, StubSlots, StubStatus
from calagent.contracts.people import Attendee


def local_uid(event_id: str) -> str:
    """The UID of an event the assistant made."""
    return f"{event_id}@calagent"


class InSeries(Protocol):
    """An event as a value or as a stored row: its id, and its series' when it is an override."""

    @property
    def id(self) -> str: ...

    @property
    def series_id(self) -> str | None: ...


def resource_of(event: InSeries) -> str:
    """The id of the calendar object an event belongs to: an override lives in its series'."""
    return event.series_id or event.id


@dataclass(frozen=True)
class Event:
    """A stored event. A series master carries `rrule` (its start/end are the first occurrence's);
    an override of one occurrence carries `series_id` and `recurrence_id` (the start it replaces).
    An occurrence expanded from a master is an `Event` too, with `occurrence_start` set."""

    id: str
    user_id: str
    title: str
    start: datetime
    end: datetime
    calendar: str
    all_day: bool = False
    completed: bool = False
    tz: str | None = None
    rrule: str | None = None
    exdates: tuple[datetime, ...] = ()
    series_id: str | None = None
    recurrence_id: datetime | None = None
    reminder_minutes: int | None = None
    occurrence_start: datetime | None = None
    # 'rejected' when the connected CalDAV server refused this event's last delivery.
    sync_state: str | None = None
    # The UID the event was born with (ours: `local_uid(id)`; an imported one: the server's). An
    # override carries its series' UID.
    uid: str | None = None
    location: str | None = None
    notes: str | None = None  # DESCRIPTION
    url: str | None = None
    # The iCalendar object this event (or series, with its overrides) is written back into: the
    # last version read from the connected calendar or written to it. Only on the row that owns
    # the object (a single event or a master); None for an event never written anywhere.
    ical: str | None = None
    # The people invited, with their answers, and the address that invites them (contract §16).
    attendees: tuple[Attendee, ...] = ()
    organizer: str | None = None
    # How the event holds its owner's time (contract §20), as its calendar object says: marked free
    # (TRANSP:TRANSPARENT), and not yet certain (STATUS:TENTATIVE). See `freetime.shows_as`.
    transparent: bool = False
    tentative: bool = False
    # It arrived from a connected calendar the user does not own (contract §19): its text is
    # someone else's words.
    foreign_calendar: bool = False
    # Its text reached a connected calendar other than through this system (another app, someone
    # the calendar is shared with, the server's version kept in a conflict): someone else's words
    # (contract §19) in a calendar the user owns too. A change made here keeps it: what the user
    # did not rewrite is still not theirs.
    outside_text: bool = False
    # A block of this task (contract §21): placed and moved by the tasks room only.
    task_id: str | None = None

    @property
    def is_master(self) -> bool:
        return self.rrule is not None and self.occurrence_start is None

    def evolve(self, **changes: object) -> Event:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Stub:
    id: str
    user_id: str
    title: str
    slots: StubSlots
    status: StubStatus
    expires_at: datetime
    created_at: datetime
    updated_at: datetime
    candidates: tuple[date, ...] = ()
    conflict_event_ids: tuple[str, ...] = ()
    hold_reason: HoldReason | None = None
    # A hold asked for by the caller (third-party content) sticks to the stub across clarifications
    # until the user confirms; `hold_reason` only says why the stub is `held` right now.
    requested_hold: HoldReason | None = None
    # The user confirmed a held write: the hold is lifted for good, later checks skip it.
    confirmed: bool = False
    proposed_start: datetime | None = None
    proposed_end: datetime | None = None
    created_by_turn: str | None = None
    kind: StubKind = "create"
    # What a change, plan or invitation stub keeps until it is answered (`domain/payloads.py`).
    payload: PendingChange | None = None
    # needs_attendee: the name asked for and the contacts it matched (none, or several).
    attendee_query: str | None = None
    attendee_candidates: tuple[Attendee, ...] = ()
    # Whom confirming sends invitations or cancellations to.
    recipients: tuple[Attendee, ...] = ()
    # An offer from outside set aside, or arrived while the user's own request waits: since when it
    # waits beside the conversation (contract §19). Answerable by its id; never the active stub.
    waiting_since: datetime | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STUB_STATUSES
