"""Calendar objects ↔ stored rows.

One object per event or series: a single event is one VEVENT, a series its master VEVENT (RRULE,
EXDATE) plus one VEVENT per override (RECURRENCE-ID), all with one UID.

Reading (`parse_resource`) turns an object into the rows the queries, free-time search and
conflict checks understand: the values the assistant models (times, title, place, notes, address,
rule, exclusions, the reminder, whether it is marked free or tentative), the UID, and on the row
that owns the object its text.
Writing rows back into the object is `patch.py`'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from icalendar import (
    Calendar,
    Component,
    vRecur,
)

from calagent.commands.domain.model import Event
from calagent.commands.domain.people import normal_address
from calagent.commands.domain.series import STAMP, InvalidRecurrenceError, next_starts, validate_rule
from calagent.commands.ical.attendees import address_of, attendees_of
from calagent.commands.ical.components import UnreadableObject as UnreadableObject
from calagent.commands.ical.components import master_of as master_of
from calagent.commands.ical.zones import series_zone, utc_instant

ICS_UNTIL = "%Y%m%dT%H%M%S"
# How many later occurrences a RANGE=THISANDFUTURE change is carried to (an endless rule has no end).
FUTURE_LIMIT = 400


def _one(component: Component, name: str) -> object:
    """The decoded value of a property that may appear once (RFC 5545 §3.6.1), or None."""
    if name not in component:
        return None
    value = component[name]
    if isinstance(value, list):
        raise UnreadableObject(f"it has {len(value)} {name} properties where one is allowed")
    return component.decoded(name)


def _checked(component: Component) -> Component:
    """The VEVENT as far as its times go: one start that is a date or a time, at most one end or
    length of the right kind. What a client wrote wrong is said here, not met as a TypeError
    half-way through reading it."""
    start = _one(component, "DTSTART")
    if start is None:
        raise UnreadableObject("it has no start (DTSTART)")
    if not isinstance(start, date):
        raise UnreadableObject("its start (DTSTART) is not a date or a time")
    end = _one(component, "DTEND")
    if end is not None and not isinstance(end, date):
        raise UnreadableObject("its end (DTEND) is not a date or a time")
    length = _one(component, "DURATION")
    if length is not None and not isinstance(length, timedelta):
        raise UnreadableObject("its length (DURATION) is not a duration")
    slot = _one(component, "RECURRENCE-ID")
    if slot is not None and not isinstance(slot, date):
        raise UnreadableObject("the occurrence it changes (RECURRENCE-ID) is not a date or a time")
    return component


def implied_length(all_day: bool) -> timedelta:
    """How long a VEVENT with neither DTEND nor DURATION lasts (RFC 5545 §3.6.1): a day from a
    DATE start, nothing from a time — it ends when it starts, shown and keeping no time busy."""
    return timedelta(days=1) if all_day else timedelta(0)


def _span(component: Component, tz: ZoneInfo) -> tuple[datetime, datetime, bool]:
    raw_start = component.decoded("DTSTART")
    all_day = not isinstance(raw_start, datetime)
    start = utc_instant(raw_start, tz)
    if "DTEND" in component:
        end = utc_instant(component.decoded("DTEND"), tz)
    elif "DURATION" in component:
        end = start + component.decoded("DURATION")
    else:
        end = start + implied_length(all_day)
    if end < start and "RRULE" not in component:
        # An end written before the start (seen from Nextcloud's web client): the two swapped,
        # as an RFC reading takes them; a series keeps its DTSTART, the rule's anchor.
        start, end = end, start
    if end < start or (all_day and end == start):
        end = start + implied_length(all_day)
    return start, end, all_day


def _slot(component: Component, master: Component, tz: ZoneInfo) -> datetime:
    """The occurrence a RECURRENCE-ID names. Exchange writes a time (midnight in its zone) for an
    occurrence of an all-day series: the day it names is the slot, as the series counts days."""
    value = component.decoded("RECURRENCE-ID")
    if isinstance(value, datetime) and not isinstance(master.decoded("DTSTART"), datetime):
        value = value.date()
    return utc_instant(value, tz)


def component_span(component: Component, tz: ZoneInfo) -> tuple[datetime, datetime, bool]:
    """A VEVENT's start and end (UTC; a floating time read in `tz`) and whether it is all-day: as
    an event read from an object is placed, for a scheduling message that only proposes a time."""
    return _span(component, tz)


def reminder_alarm(component: Component) -> Component | None:
    """The alarm that is the event's reminder: the first one some minutes before the start."""
    for alarm in component.subcomponents:
        if alarm.name != "VALARM" or "TRIGGER" not in alarm:
            continue
        related = getattr(alarm["TRIGGER"], "params", {}).get("RELATED", "START")
        if str(related).upper() != "START":
            continue
        # The parsed value, not a decode: a TRIGGER no reader takes (Thunderbird wrote a bare
        # time) makes this alarm no reminder, never the event unreadable.
        value = getattr(alarm["TRIGGER"], "dt", None)
        if isinstance(value, timedelta) and value <= timedelta(0):
            return alarm
    return None


def _reminder(component: Component) -> int | None:
    alarm = reminder_alarm(component)
    if alarm is None:
        return None
    trigger = getattr(alarm["TRIGGER"], "dt", None)
    assert isinstance(trigger, timedelta)
    return int(-trigger.total_seconds() // 60)


def _rule(component: Component, tz: ZoneInfo, notes: list[str]) -> str | None:
    if "RRULE" not in component:
        return None
    first = component["RRULE"]
    if isinstance(first, list):
        # RFC 5545 lets a VEVENT carry several (an old form, still exported): one is kept.
        notes.append(f"it has {len(first)} repeat rules (RRULE); only the first is read")
        first = first[0]
    parts = []
    raw = first.to_ical()
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    if not text.strip():
        return None  # an empty "RRULE:" line (a holiday feed writes one): no rule
    for part in text.split(";"):
        name, _, value = part.partition("=")
        if name.upper() == "UNTIL" and value.endswith("Z"):
            # The series engine reads UNTIL on the series' wall clock: a UTC UNTIL is converted.
            instant = datetime.strptime(value, STAMP).replace(tzinfo=UTC)
            value = instant.astimezone(tz).strftime("%Y%m%dT%H%M%S")
        elif (
            name.upper() == "UNTIL"
            and "T" not in value
            and isinstance(component.decoded("DTSTART"), datetime)
        ):
            notes.append(
                "its rule ends on a date (UNTIL) where its start is a time; RFC 5545 wants the same"
                " kind: read as the end of that day"
            )
        parts.append(f"{name.upper()}={value}")
    return ";".join(parts)


def ics_rule(rule_text: str, tz: ZoneInfo, all_day: bool) -> vRecur:
    """The stored rule as RFC 5545 wants it next to a TZID (or DATE) start: UNTIL in UTC (or as
    a DATE). The series engine reads UNTIL on the zone's wall clock (a bare date is its last
    second), so the same instant is written here."""
    parts = []
    for part in rule_text.removeprefix("RRULE:").split(";"):
        name, _, value = part.partition("=")
        if name.upper() == "UNTIL":
            local = value.rstrip("Z")
            if "T" not in local:
                local += "T235959"
            try:
                naive = datetime.strptime(local, ICS_UNTIL)
            except ValueError:
                naive = None
            if naive is not None:
                until = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
                value = naive.strftime("%Y%m%d") if all_day else until.strftime(f"{ICS_UNTIL}Z")
        parts.append(f"{name}={value}")
    rule: vRecur = vRecur.from_ical(";".join(parts))
    return rule


def exdates_of(component: Component, tz: ZoneInfo) -> tuple[datetime, ...]:
    found: list[datetime] = []
    raw = component.get("EXDATE")
    if raw is None:
        return ()
    for entry in raw if isinstance(raw, list) else [raw]:
        for item in entry.dts:
            found.append(utc_instant(item.dt, tz))
    return tuple(sorted(set(found)))


def text_of(component: Component, name: str) -> str | None:
    value = component.get(name)
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None:
        return None
    return str(value) or None


def override_id(master_id: str, recurrence_id: datetime) -> str:
    """The same override of the same slot keeps its id from one sync to the next."""
    seed = f"{master_id}|{recurrence_id.astimezone(UTC).isoformat()}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def load_object(body: str) -> Calendar:
    try:
        return Calendar.from_ical(body)
    except ValueError as exc:
        raise UnreadableObject(f"it does not parse as iCalendar ({str(exc)[:160]})") from exc


def _modeled(component: Component, tz: ZoneInfo) -> dict[str, object]:
    start, end, all_day = _span(component, tz)
    return {
        "title": str(component.get("SUMMARY", ""))[:200] or "(untitled)",
        "start": start,
        "end": end,
        "all_day": all_day,
        "reminder_minutes": _reminder(component),
        "location": text_of(component, "LOCATION"),
        "notes": text_of(component, "DESCRIPTION"),
        "url": text_of(component, "URL"),
        "attendees": attendees_of(component),
        "organizer": address_of(component.get("ORGANIZER")),
        # RFC 5545 §3.8.2.7: OPAQUE unless it says TRANSPARENT; §3.8.1.11: STATUS of a VEVENT.
        "transparent": str(component.get("TRANSP", "")).strip().upper() == "TRANSPARENT",
        "tentative": str(component.get("STATUS", "")).strip().upper() == "TENTATIVE",
    }


@dataclass(frozen=True)
class ObjectReading:
    """The rows of one object and what of it could not be read (in our words, for the user)."""

    rows: list[Event]
    notes: tuple[str, ...] = ()


def object_rows(
    parsed: Calendar, body: str, *, master_id: str, user_id: str, calendar: str, fallback_tz: ZoneInfo
) -> list[Event]:
    return read_object(
        parsed, body, master_id=master_id, user_id=user_id, calendar=calendar, fallback_tz=fallback_tz
    ).rows


def read_object(
    parsed: Calendar, body: str, *, master_id: str, user_id: str, calendar: str, fallback_tz: ZoneInfo
) -> ObjectReading:
    if not any("RECURRENCE-ID" not in c for c in parsed.walk("VEVENT")) and parsed.walk("VEVENT"):
        return _without_master(
            parsed, body, master_id=master_id, user_id=user_id, calendar=calendar, tz=fallback_tz
        )
    master_component = _checked(master_of(parsed))
    tz = series_zone(master_component, fallback_tz)
    uid = text_of(master_component, "UID")
    notes: list[str] = []
    rule = _rule(master_component, tz, notes)
    exdates = list(exdates_of(master_component, tz))
    overrides: list[Event] = []
    slots: set[datetime] = set()
    ranges: set[datetime] = set()  # the slots of RANGE=THISANDFUTURE changes
    for component in parsed.walk("VEVENT"):
        if "RECURRENCE-ID" not in component or (rule is None and "RDATE" not in master_component):
            continue
        slot = _slot(_checked(component), master_component, tz)
        if slot in slots:
            raise UnreadableObject(f"it changes the occurrence of {slot:%Y-%m-%d %H:%M} UTC twice")
        slots.add(slot)
        if str(component["RECURRENCE-ID"].params.get("RANGE", "")).upper() == "THISANDFUTURE":
            ranges.add(slot)
        if str(component.get("STATUS", "")).upper() == "CANCELLED":
            exdates.append(slot)
            continue
        overrides.append(
            Event(
                id=override_id(master_id, slot),
                user_id=user_id,
                calendar=calendar,
                tz=tz.key,
                series_id=master_id,
                recurrence_id=slot,
                uid=uid,
                **_modeled(component, tz),  # type: ignore[arg-type]
            )
        )
    master = Event(
        id=master_id,
        user_id=user_id,
        calendar=calendar,
        tz=tz.key,
        rrule=rule,
        exdates=tuple(sorted(set(exdates))),
        uid=uid,
        ical=body,
        **_modeled(master_component, tz),  # type: ignore[arg-type]
    )
    if rule is not None:
        try:
            validate_rule(rule, master.start, tz)
        except InvalidRecurrenceError:
            # Kept as written (a change leaves it so); the reads show the first occurrence.
            notes.append(
                "its repeat rule (RRULE) cannot be followed here; only its first occurrence is shown"
            )
    taken = {master.start, *master.exdates, *slots}
    derived = [
        *later_changed(master, overrides, ranges, taken, notes),
        *rdates_of(master_component, master, taken),
    ]
    return ObjectReading([master, *overrides, *derived], tuple(notes))


def _without_master(
    parsed: Calendar, body: str, *, master_id: str, user_id: str, calendar: str, tz: ZoneInfo
) -> ObjectReading:
    """Occurrences of a series whose master the object does not hold (Google sends exactly this
    to someone invited to one occurrence): each is the event it is. The first owns the object."""
    found: list[Event] = []
    for component in parsed.walk("VEVENT"):
        slot = utc_instant(_checked(component).decoded("RECURRENCE-ID"), tz)
        row = Event(
            id=master_id if not found else override_id(master_id, slot),
            user_id=user_id,
            calendar=calendar,
            tz=series_zone(component, tz).key,
            uid=text_of(component, "UID"),
            **_modeled(component, series_zone(component, tz)),  # type: ignore[arg-type]
        )
        found.append(
            row.evolve(ical=body) if not found else row.evolve(series_id=master_id, recurrence_id=slot)
        )
    if len({r.id for r in found}) < len(found):
        raise UnreadableObject("it changes one occurrence twice")
    return ObjectReading(found)


def _occurrence(of: Event, slot: datetime, start: datetime, end: datetime) -> Event:
    """A row for one occurrence an object names besides its rule's own (an RDATE, a later one a
    RANGE=THISANDFUTURE change reaches): an override of `slot` that no component of the object
    holds, so writing the object back leaves it as it was (patch.py) unless it is changed."""
    master_id = of.series_id or of.id
    return of.evolve(
        id=override_id(master_id, slot),
        series_id=master_id,
        recurrence_id=slot,
        start=start,
        end=end,
        rrule=None,
        exdates=(),
        ical=None,
    )


def rdates_of(component: Component, master: Event, taken: set[datetime]) -> list[Event]:
    """The occurrences RDATE adds (RFC 5545 §3.8.5.2): a DATE-TIME or a DATE lasting what the
    first occurrence lasts, a PERIOD its own span; none twice, none an EXDATE removes."""
    raw = component.get("RDATE")
    tz = ZoneInfo(master.tz or "UTC")
    found: list[Event] = []
    for entry in raw if isinstance(raw, list) else [raw] if raw is not None else []:
        for item in entry.dts:
            value = item.dt
            if isinstance(value, tuple):
                start = utc_instant(value[0], tz)
                end = start + value[1] if isinstance(value[1], timedelta) else utc_instant(value[1], tz)
            else:
                start = utc_instant(value, tz)
                end = start + (master.end - master.start)
            if start in taken or end < start:
                continue
            taken.add(start)
            found.append(_occurrence(master, start, start, end))
    return found


def later_changed(
    master: Event, overrides: Sequence[Event], ranges: set[datetime], taken: set[datetime], notes: list[str]
) -> list[Event]:
    """The occurrences after a `RECURRENCE-ID;RANGE=THISANDFUTURE` change, each moved by what
    moved it and with its length and values (RFC 5545 §3.8.4.4), up to the next such change, for
    the next `FUTURE_LIMIT` starts of the rule."""
    ranged = sorted((o for o in overrides if o.recurrence_id in ranges), key=lambda o: o.start)
    if master.rrule is None or not ranged:
        return []
    tz = ZoneInfo(master.tz or "UTC")
    found: list[Event] = []
    for n, change in enumerate(ranged):
        assert change.recurrence_id is not None
        until = ranged[n + 1].recurrence_id if n + 1 < len(ranged) else None
        try:
            later = next_starts(master.rrule, master.start, tz, change.recurrence_id, FUTURE_LIMIT + 1)
        except InvalidRecurrenceError:
            return found
        if len(later) > FUTURE_LIMIT and until is None:
            notes.append(f"its change of this and later occurrences reaches the next {FUTURE_LIMIT} only")
        shift, length = change.start - change.recurrence_id, change.end - change.start
        for local in later[:FUTURE_LIMIT]:
            slot = local.astimezone(UTC)
            if until is not None and slot >= until:
                break
            if slot in taken:
                continue
            taken.add(slot)
            found.append(_occurrence(change, slot, slot + shift, slot + shift + length))
    return found


def parse_resource(
    body: str, *, master_id: str, user_id: str, calendar: str, fallback_tz: ZoneInfo
) -> list[Event]:
    """The rows of one object: its master (or single event) under `master_id`, carrying the
    object's text and UID, and overrides with ids derived from it. Cancelled overrides become
    EXDATEs, as a calendar app shows them."""
    return read_resource(
        body, master_id=master_id, user_id=user_id, calendar=calendar, fallback_tz=fallback_tz
    ).rows


def read_resource(
    body: str, *, master_id: str, user_id: str, calendar: str, fallback_tz: ZoneInfo
) -> ObjectReading:
    """`parse_resource`, with what of the object could not be read."""
    return read_object(
        load_object(body),
        body,
        master_id=master_id,
        user_id=user_id,
        calendar=calendar,
        fallback_tz=fallback_tz,
    )


def fingerprint(rows: Sequence[Event]) -> tuple[tuple[object, ...], ...]:
    """What a calendar app shows of a resource, to tell whether two versions say the same."""
    return tuple(
        sorted(
            (
                e.recurrence_id.astimezone(UTC).isoformat() if e.recurrence_id else "",
                e.title,
                e.start.astimezone(UTC).isoformat(),
                e.end.astimezone(UTC).isoformat(),
                e.all_day,
                e.rrule or "",
                tuple(d.astimezone(UTC).isoformat() for d in e.exdates),
                e.reminder_minutes,
                e.location or "",
                e.notes or "",
                e.url or "",
                tuple((normal_address(a.email), a.status) for a in e.attendees),
                normal_address(e.organizer or ""),
            )
            for e in rows
        )
    )
