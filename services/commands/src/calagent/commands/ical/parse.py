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
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from icalendar import (
    Calendar,
    Component,
    vRecur,
)

from calagent.commands.domain.model import Event
from calagent.commands.domain.people import normal_address
from calagent.commands.domain.series import STAMP
from calagent.commands.ical.attendees import address_of, attendees_of
from calagent.commands.ical.zones import series_zone, utc_instant

DEFAULT_LENGTH = timedelta(hours=1)
ICS_UNTIL = "%Y%m%dT%H%M%S"


class UnreadableObject(ValueError):
    """The server's object is not an event this service can hold (a task, a broken file)."""


def _span(component: Component, tz: ZoneInfo) -> tuple[datetime, datetime, bool]:
    raw_start = component.decoded("DTSTART")
    all_day = not isinstance(raw_start, datetime)
    start = utc_instant(raw_start, tz)
    if "DTEND" in component:
        end = utc_instant(component.decoded("DTEND"), tz)
    elif "DURATION" in component:
        end = start + component.decoded("DURATION")
    else:
        end = start + (timedelta(days=1) if all_day else DEFAULT_LENGTH)
    if end <= start:
        end = start + (timedelta(days=1) if all_day else DEFAULT_LENGTH)
    return start, end, all_day


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
        value = alarm.decoded("TRIGGER")
        if isinstance(value, timedelta) and value <= timedelta(0):
            return alarm
    return None


def _reminder(component: Component) -> int | None:
    alarm = reminder_alarm(component)
    if alarm is None:
        return None
    trigger = alarm.decoded("TRIGGER")
    assert isinstance(trigger, timedelta)
    return int(-trigger.total_seconds() // 60)


def _rule(component: Component, tz: ZoneInfo) -> str | None:
    if "RRULE" not in component:
        return None
    parts = []
    raw = component["RRULE"].to_ical()
    for part in (raw.decode() if isinstance(raw, bytes) else str(raw)).split(";"):
        name, _, value = part.partition("=")
        if name.upper() == "UNTIL" and value.endswith("Z"):
            # The series engine reads UNTIL on the series' wall clock: a UTC UNTIL is converted.
            instant = datetime.strptime(value, STAMP).replace(tzinfo=UTC)
            value = instant.astimezone(tz).strftime("%Y%m%dT%H%M%S")
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
        raise UnreadableObject(f"not iCalendar: {exc}") from exc


def master_of(parsed: Calendar) -> Component:
    masters = [c for c in parsed.walk("VEVENT") if "RECURRENCE-ID" not in c]
    if not masters:
        raise UnreadableObject("no VEVENT without RECURRENCE-ID")
    return masters[0]


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


def object_rows(
    parsed: Calendar, body: str, *, master_id: str, user_id: str, calendar: str, fallback_tz: ZoneInfo
) -> list[Event]:
    master_component = master_of(parsed)
    tz = series_zone(master_component, fallback_tz)
    uid = text_of(master_component, "UID")
    rule = _rule(master_component, tz)
    exdates = list(exdates_of(master_component, tz))
    overrides: list[Event] = []
    for component in parsed.walk("VEVENT"):
        if "RECURRENCE-ID" not in component or rule is None:
            continue
        slot = utc_instant(component.decoded("RECURRENCE-ID"), tz)
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
    return [master, *overrides]


def parse_resource(
    body: str, *, master_id: str, user_id: str, calendar: str, fallback_tz: ZoneInfo
) -> list[Event]:
    """The rows of one object: its master (or single event) under `master_id`, carrying the
    object's text and UID, and overrides with ids derived from it. Cancelled overrides become
    EXDATEs, as a calendar app shows them."""
    return object_rows(
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
