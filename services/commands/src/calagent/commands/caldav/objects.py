"""Calendar object resources ↔ stored rows.

One resource per local event or series: a single event is one VEVENT, a series its master VEVENT
(RRULE, EXDATE) plus one VEVENT per override (RECURRENCE-ID), all with one UID. Written with the
feed's own renderer (`views.render_ics`), so the server holds exactly what the feed shows; read
back into the rows the queries, free-time search and conflict checks already understand.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from icalendar import Calendar, Component

from calagent.commands.domain.model import Event
from calagent.commands.domain.series import STAMP, localise
from calagent.commands.views import render_ics

DEFAULT_LENGTH = timedelta(hours=1)
UTC_ZONE = ZoneInfo("UTC")


class UnreadableObject(ValueError):
    """The server's object is not an event this service can hold (a task, a broken file)."""


def local_uid(event_id: str) -> str:
    return f"{event_id}@calagent"


def render_resource(rows: Sequence[Event], uid: str, stamp: datetime) -> str | None:
    """The object body for the rows of one resource, every component carrying `uid`; None when
    nothing is left to send (the master is gone)."""
    if not rows:
        return None
    text = render_ics(rows, UTC_ZONE, stamp)
    calendar = Calendar.from_ical(text)
    components = list(calendar.walk("VEVENT"))
    if not components:
        return None
    for component in components:
        component["UID"] = uid
    return bytes(calendar.to_ical()).decode("utf-8")


def _zone_key(value: datetime, fallback: ZoneInfo) -> str:
    tz = value.tzinfo
    if isinstance(tz, ZoneInfo):
        return tz.key
    name = getattr(tz, "zone", None) or getattr(tz, "key", None)
    if isinstance(name, str):
        try:
            return ZoneInfo(name).key
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return fallback.key if value.tzinfo is None else "UTC"


def _instant(value: date | datetime, tz: ZoneInfo) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:  # floating time: the user's wall clock
            return localise(value, tz).astimezone(UTC)
        return value.astimezone(UTC)
    return localise(datetime.combine(value, time()), tz).astimezone(UTC)


def _span(component: Component, tz: ZoneInfo) -> tuple[datetime, datetime, bool]:
    raw_start = component.decoded("DTSTART")
    all_day = not isinstance(raw_start, datetime)
    start = _instant(raw_start, tz)
    if "DTEND" in component:
        end = _instant(component.decoded("DTEND"), tz)
    elif "DURATION" in component:
        end = start + component.decoded("DURATION")
    else:
        end = start + (timedelta(days=1) if all_day else DEFAULT_LENGTH)
    if end <= start:
        end = start + (timedelta(days=1) if all_day else DEFAULT_LENGTH)
    return start, end, all_day


def _reminder(component: Component) -> int | None:
    for alarm in component.walk("VALARM"):
        try:
            trigger = alarm.decoded("TRIGGER")
        except KeyError:
            continue
        if isinstance(trigger, timedelta) and trigger <= timedelta(0):
            return int(-trigger.total_seconds() // 60)
    return None


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


def _exdates(component: Component, tz: ZoneInfo) -> tuple[datetime, ...]:
    found: list[datetime] = []
    raw = component.get("EXDATE")
    if raw is None:
        return ()
    for entry in raw if isinstance(raw, list) else [raw]:
        for item in entry.dts:
            found.append(_instant(item.dt, tz))
    return tuple(sorted(set(found)))


def override_id(master_id: str, recurrence_id: datetime) -> str:
    """The same override of the same slot keeps its id from one sync to the next."""
    seed = f"{master_id}|{recurrence_id.astimezone(UTC).isoformat()}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def parse_resource(
    body: str, *, master_id: str, user_id: str, calendar: str, fallback_tz: ZoneInfo
) -> list[Event]:
    """The rows of one object: its master (or single event) under `master_id`, overrides with ids
    derived from it. Cancelled overrides become EXDATEs, as a calendar app shows them."""
    try:
        parsed = Calendar.from_ical(body)
    except ValueError as exc:
        raise UnreadableObject(f"not iCalendar: {exc}") from exc
    components = list(parsed.walk("VEVENT"))
    masters = [c for c in components if "RECURRENCE-ID" not in c]
    if not masters:
        raise UnreadableObject("no VEVENT without RECURRENCE-ID")
    master_component = masters[0]
    raw_start = master_component.decoded("DTSTART")
    tz_key = _zone_key(raw_start, fallback_tz) if isinstance(raw_start, datetime) else fallback_tz.key
    tz = ZoneInfo(tz_key)
    start, end, all_day = _span(master_component, tz)
    rule = _rule(master_component, tz)
    exdates = list(_exdates(master_component, tz))
    overrides: list[Event] = []
    for component in components:
        if "RECURRENCE-ID" not in component or rule is None:
            continue
        slot = _instant(component.decoded("RECURRENCE-ID"), tz)
        if str(component.get("STATUS", "")).upper() == "CANCELLED":
            exdates.append(slot)
            continue
        o_start, o_end, o_all_day = _span(component, tz)
        overrides.append(
            Event(
                id=override_id(master_id, slot),
                user_id=user_id,
                title=str(component.get("SUMMARY", ""))[:200] or "(untitled)",
                start=o_start,
                end=o_end,
                calendar=calendar,
                all_day=o_all_day,
                tz=tz.key,
                series_id=master_id,
                recurrence_id=slot,
                reminder_minutes=_reminder(component),
            )
        )
    master = Event(
        id=master_id,
        user_id=user_id,
        title=str(master_component.get("SUMMARY", ""))[:200] or "(untitled)",
        start=start,
        end=end,
        calendar=calendar,
        all_day=all_day,
        tz=tz.key,
        rrule=rule,
        exdates=tuple(sorted(set(exdates))),
        reminder_minutes=_reminder(master_component),
    )
    return [master, *overrides]


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
            )
            for e in rows
        )
    )
