"""Stored rows as iCalendar text: the RFC 5545 feed (`render_ics`, export and private feeds) and
the object of one resource (`render_resource`: a CalDAV PUT's body, an invitation's event). One
renderer for both, so a calendar app that subscribes to the feed and one that syncs over CalDAV
see the same event under the same UID."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from icalendar import Alarm, Calendar
from icalendar import Event as IcsEvent

from calagent.commands.domain.model import Event, local_uid, resource_of
from calagent.commands.domain.series import InvalidRecurrenceError, next_starts, rule_for, starts
from calagent.commands.ical.attendees import attendee_property, organizer_property
from calagent.commands.ical.parse import UnreadableObject, ics_rule
from calagent.commands.ical.patch import patch_object

# ---- the RFC 5545 feed ------------------------------------------------------------------------------
#
# The feed carries what is stored, not occurrences: a series master is one VEVENT with its RRULE
# and EXDATEs on its own zone's wall clock (TZID + VTIMEZONE), an override is a VEVENT with the
# master's UID and a RECURRENCE-ID. A calendar app expanding it sees what `expand` gives the
# queries: the same rule engine semantics are kept where RFC 5545 and dateutil could part (DTSTART
# not on the rule, UNTIL read on the wall clock, an override of a slot the rule no longer has).

VTIMEZONE_YEARS_AHEAD = 20  # transitions listed past the latest date of a series without an end


def _zone_of(event: Event, fallback: ZoneInfo) -> ZoneInfo:
    if event.tz:
        try:
            return ZoneInfo(event.tz)
        except (ZoneInfoNotFoundError, ValueError):
            return fallback
    return fallback


def _when(moment: datetime, tz: ZoneInfo, all_day: bool) -> datetime | date:
    local = moment.astimezone(tz)
    return local.date() if all_day else local


def _days(event: Event) -> int:
    """Whole days of an all-day event: its bounds are local midnights, so a DST change in between
    makes the span an hour longer or shorter than N × 24 h."""
    return max(1, round((event.end - event.start) / timedelta(days=1)))


NO_PARENTS: Mapping[str, str] = {}


def _vevent(
    event: Event, uid: str, tz: ZoneInfo, stamp: datetime, parents: Mapping[str, str] = NO_PARENTS
) -> IcsEvent:
    item = IcsEvent()
    item.add("uid", uid)
    item.add("dtstamp", stamp.astimezone(UTC))
    if event.all_day:
        first_day = event.start.astimezone(tz).date()
        item.add("dtstart", first_day)
        item.add("dtend", first_day + timedelta(days=_days(event)))
    else:
        item.add("dtstart", event.start.astimezone(tz))
        item.add("dtend", event.end.astimezone(tz))
    item.add("summary", event.title)
    if event.location:
        item.add("location", event.location)
    if event.notes:
        item.add("description", event.notes)
    if event.url:
        item.add("url", event.url)
    item.add("categories", [event.calendar])
    if event.transparent:
        item.add("transp", "TRANSPARENT")
    elif event.tentative:
        # A tentative hold (a time proposed to someone) keeps its owner's time all the same.
        item.add("transp", "OPAQUE")
    if event.tentative:
        item.add("status", "TENTATIVE")
    if event.organizer:
        item["ORGANIZER"] = organizer_property(event.organizer)
    if event.attendees:
        people = [attendee_property(a) for a in event.attendees]
        item["ATTENDEE"] = people if len(people) > 1 else people[0]
    if event.task_id is not None:
        # A block of a task (contract §21) names the task's VTODO as its parent (RFC 5545
        # §3.8.4.5); the VTODO lists no blocks, so placing them again never rewrites the task.
        parent = parents.get(event.task_id) or local_uid(event.task_id)
        item.add("related-to", parent, parameters={"RELTYPE": "PARENT"})
    if event.reminder_minutes is not None:
        alarm = Alarm()
        alarm.add("action", "DISPLAY")
        alarm.add("trigger", timedelta(minutes=-event.reminder_minutes))
        alarm.add("description", event.title)
        item.add_component(alarm)
    return item


def _master(
    event: Event, tz: ZoneInfo, stamp: datetime, parents: Mapping[str, str] = NO_PARENTS
) -> IcsEvent | None:
    """A series master; None when its rule gives no occurrence (the queries show none either)."""
    assert event.rrule is not None
    try:
        # DTSTART must be an occurrence of the rule (RFC 5545 leaves it undefined otherwise; the
        # series engine does not count a start off the rule): the rule's first start it is.
        first = next_starts(event.rrule, event.start, tz, event.start, 1)
        rule = ics_rule(event.rrule, tz, event.all_day)
    except (InvalidRecurrenceError, ValueError):
        return None
    if not first:
        return None
    start = first[0]
    item = _vevent(
        event.evolve(start=start, end=start + (event.end - event.start)), _uid(event), tz, stamp, parents
    )
    item.add("rrule", rule)
    if event.exdates:
        item.add("exdate", [_when(d, tz, event.all_day) for d in sorted(event.exdates)])
    return item


def _replaces_a_slot(override: Event, master: Event) -> bool:
    """The override's RECURRENCE-ID is a start the master's rule still gives (not excluded)."""
    assert override.recurrence_id is not None
    slot = override.recurrence_id.astimezone(UTC)
    try:
        found = starts(master, slot, slot, inclusive_before=timedelta(0))
    except InvalidRecurrenceError:
        return False
    return any(s.astimezone(UTC) == slot for s in found)


def _uid(event: Event) -> str:
    return event.uid or local_uid(event.id)


def _kept_objects(events: Sequence[Event], stamp: datetime) -> dict[str, Calendar]:
    """The objects of the resources among `events` that have one (came from or went to a connected
    calendar), each patched with its rows: resource id → object."""
    by_resource: dict[str, list[Event]] = {}
    for event in events:
        by_resource.setdefault(resource_of(event), []).append(event)
    kept: dict[str, Calendar] = {}
    for resource, rows in by_resource.items():
        owner = next((r for r in rows if r.id == resource), None)
        if owner is None or not owner.ical:
            continue
        try:
            kept[resource] = patch_object(owner.ical, rows, _uid(owner), stamp).calendar
        except (UnreadableObject, ValueError, KeyError):
            continue  # written fresh from its rows, like an event that never had an object
    return kept


def _add_fresh(
    cal: Calendar, events: Sequence[Event], tz: ZoneInfo, stamp: datetime, parents: Mapping[str, str]
) -> None:
    masters = {e.id: e for e in events if e.rrule is not None}
    for ev in events:
        item: IcsEvent | None
        if ev.rrule is not None:
            # A series runs on its own zone's wall clock; a row without one is expanded in UTC.
            item = _master(ev, _zone_of(ev, ZoneInfo("UTC")), stamp, parents)
        elif (
            ev.series_id is not None
            and ev.recurrence_id is not None
            and (master := masters.get(ev.series_id)) is not None
            and _replaces_a_slot(ev, master)
        ):
            item = _vevent(ev, _uid(master), _zone_of(ev, tz), stamp, parents)
            master_tz = _zone_of(master, ZoneInfo("UTC"))
            item.add("recurrence-id", _when(ev.recurrence_id, master_tz, master.all_day))
        else:
            # A single event, or an override whose slot is gone: it stands on its own.
            item = _vevent(
                ev, _uid(ev) if ev.series_id is None else local_uid(ev.id), _zone_of(ev, tz), stamp, parents
            )
        if item is not None:
            cal.add_component(item)


def _add_kept(cal: Calendar, kept: dict[str, Calendar]) -> None:
    zones = {str(c.get("TZID")) for c in cal.walk("VTIMEZONE")}
    for obj in kept.values():
        for component in obj.subcomponents:
            if component.name == "VTIMEZONE":
                if str(component.get("TZID")) in zones:
                    continue
                zones.add(str(component.get("TZID")))
            if component.name in ("VEVENT", "VTIMEZONE"):
                cal.add_component(component)


def render_ics(
    events: Sequence[Event], tz: ZoneInfo, stamp: datetime, parents: Mapping[str, str] = NO_PARENTS
) -> str:
    """The RFC 5545 feed of stored rows (masters, overrides, singles; not expanded). `tz` is the
    reader's zone, used for rows that do not know the zone they were made in. An event that has an
    object of its own (from or to a connected calendar) is that object, patched with its rows:
    the feed and the CalDAV server carry the same event under the same UID. `parents`: the UIDs
    of the tasks blocks belong to, by task id (a task made here: `<id>@calagent`)."""
    cal = Calendar()
    cal.add("prodid", "-//calagent//commands//EN")
    cal.add("version", "2.0")
    cal.add("calscale", "GREGORIAN")
    kept = _kept_objects(events, stamp)
    _add_fresh(cal, [e for e in events if resource_of(e) not in kept], tz, stamp, parents)
    _add_kept(cal, kept)
    if events:
        cal.add_missing_timezones(*_timezone_span(events, stamp))
    return bytes(cal.to_ical()).decode("utf-8")


def _timezone_span(events: Sequence[Event], stamp: datetime) -> tuple[date, date]:
    """The days a feed's VTIMEZONEs must cover (they list each transition): from the year before
    the first event to the year after the last occurrence of any series; a series without an end
    runs on, so the span goes `VTIMEZONE_YEARS_AHEAD` past the latest date known."""
    first = min(e.start for e in events).astimezone(UTC).year - 1
    last = max(max(e.end for e in events), stamp).astimezone(UTC).year
    open_ended = False
    for ev in events:
        if ev.rrule is None:
            continue
        text = ev.rrule.upper()
        if "UNTIL=" not in text and "COUNT=" not in text:
            open_ended = True
            continue
        try:
            final = rule_for(ev.rrule, ev.start, _zone_of(ev, ZoneInfo("UTC"))).before(datetime.max, inc=True)
        except InvalidRecurrenceError:
            open_ended = True
            continue
        if final is not None:
            last = max(last, final.year)
    return date(first, 1, 1), date(last + (VTIMEZONE_YEARS_AHEAD if open_ended else 1) + 1, 1, 1)


def render_resource(
    rows: Sequence[Event], uid: str, stamp: datetime, parents: Mapping[str, str] = NO_PARENTS
) -> str | None:
    """The object body for the rows of one resource, every component carrying `uid`; None when
    nothing is left to send (the master is gone). An object the resource already has is patched
    (patch.patch_object); one the assistant makes is written from its rows."""
    owner = next((r for r in rows if r.series_id is None), None)
    if owner is None:
        return None
    if owner.ical:
        try:
            return patch_object(owner.ical, rows, uid, stamp).text
        except (UnreadableObject, ValueError, KeyError):
            rows = [r.evolve(ical=None) for r in rows]
    calendar = Calendar.from_ical(render_ics(rows, ZoneInfo("UTC"), stamp, parents))
    components = list(calendar.walk("VEVENT"))
    if not components:
        return None
    for component in components:
        component["UID"] = uid
    return bytes(calendar.to_ical()).decode("utf-8")
