"""How stored values are shown on the wire: events and stubs in the user's zone, and the
RFC 5545 feed. One conversion per shape, used by commands and queries alike."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from icalendar import Calendar
from icalendar import Event as IcsEvent

from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.series import InvalidRecurrenceError, next_starts
from calagent.contracts.commands import ChangeOut, EventOut, PlanOut, StubOut

PLAN_PREVIEW = 3  # occurrences a repeating create shows before it is confirmed


def event_out(event: Event, tz: ZoneInfo) -> EventOut:
    start = event.start.astimezone(tz)
    return EventOut(
        id=event.id,
        title=event.title,
        start=start,
        end=event.end.astimezone(tz),
        all_day=event.all_day,
        calendar=event.calendar,
        completed=event.completed,
        weekday=start.isoweekday(),
        tz=tz.key,
        series_id=event.series_id,
        occurrence_start=event.occurrence_start.astimezone(tz) if event.occurrence_start else None,
        recurrence=event.rrule,
        reminder_minutes=event.reminder_minutes,
    )


def _next_occurrences(stub: Stub, tz: ZoneInfo) -> tuple[datetime, ...]:
    if not stub.slots.recurrence or stub.proposed_start is None:
        return ()
    try:
        found = next_starts(stub.slots.recurrence, stub.proposed_start, tz, stub.proposed_start, PLAN_PREVIEW)
    except InvalidRecurrenceError:
        return ()
    return tuple(found)


def stub_out(stub: Stub, conflicts: Sequence[Event], tz: ZoneInfo) -> StubOut:
    # A change stub keeps its before/after view, a plan stub its plan, in `change`.
    payload = stub.change or {}
    change = (
        ChangeOut.model_validate(payload["view"]) if stub.kind == "change" and "view" in payload else None
    )
    plan = PlanOut.model_validate(payload["plan"]) if stub.kind == "plan" and "plan" in payload else None
    return StubOut(
        id=stub.id,
        status=stub.status,
        title=stub.title,
        slots=stub.slots,
        candidates=stub.candidates,
        conflicts_with=tuple(event_out(ev, tz) for ev in conflicts),
        hold_reason=stub.hold_reason if stub.status == "held" else None,
        proposed_start=stub.proposed_start.astimezone(tz) if stub.proposed_start else None,
        proposed_end=stub.proposed_end.astimezone(tz) if stub.proposed_end else None,
        expires_at=stub.expires_at.astimezone(tz),
        kind=stub.kind,
        change=change,
        plan=plan,
        next_occurrences=_next_occurrences(stub, tz),
    )


def render_ics(events: Sequence[Event], tz: ZoneInfo, stamp: datetime) -> str:
    cal = Calendar()
    cal.add("prodid", "-//calagent//commands//EN")
    cal.add("version", "2.0")
    for ev in events:
        item = IcsEvent()
        item.add("uid", f"{ev.id}@calagent")
        item.add("dtstamp", stamp.astimezone(UTC))
        if ev.all_day:
            item.add("dtstart", ev.start.astimezone(tz).date())
            item.add("dtend", ev.end.astimezone(tz).date())
        else:
            item.add("dtstart", ev.start)
            item.add("dtend", ev.end)
        item.add("summary", ev.title)
        item.add("categories", [ev.calendar])
        cal.add_component(item)
    return bytes(cal.to_ical()).decode("utf-8")
