"""Times and zones in calendar objects: an instant read on the object's wall clock, written back
in the form the object used (a DATE, a TZID, UTC or floating), and the VTIMEZONEs it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from icalendar import (
    Calendar,
    Component,
    vDDDTypes,
)
from icalendar.parser import Parameters

from calagent.commands.domain.model import Event
from calagent.commands.domain.series import localise

UTC_ZONE = ZoneInfo("UTC")


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


def utc_instant(value: date | datetime, tz: ZoneInfo) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:  # floating time: the user's wall clock
            return localise(value, tz).astimezone(UTC)
        return value.astimezone(UTC)
    return localise(datetime.combine(value, time()), tz).astimezone(UTC)


def series_zone(component: Component, fallback: ZoneInfo) -> ZoneInfo:
    raw_start = component.decoded("DTSTART")
    return ZoneInfo(_zone_key(raw_start, fallback) if isinstance(raw_start, datetime) else fallback.key)


def zone_named(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name) if name else UTC_ZONE
    except (ZoneInfoNotFoundError, ValueError):
        return UTC_ZONE


def written_like(instant: datetime, like: object, tz: ZoneInfo, all_day: bool) -> vDDDTypes:
    """`instant` written the way `like` (the property it replaces, or the start's) was: a DATE,
    a time in the same TZID, UTC, or floating wall clock; `tz` for a form `like` cannot give."""
    old = getattr(like, "dt", None)
    params = Parameters(getattr(like, "params", {}) or {})
    value: date | datetime
    if all_day:
        value = instant.astimezone(tz).date()
        params.pop("TZID", None)
        params["VALUE"] = "DATE"
    else:
        params.pop("VALUE", None)
        if isinstance(old, datetime) and old.tzinfo is not None and "TZID" in params:
            value = instant.astimezone(old.tzinfo)
        elif isinstance(old, datetime) and old.tzinfo is not None:
            value = instant.astimezone(UTC)
        elif isinstance(old, datetime):
            value = instant.astimezone(tz).replace(tzinfo=None)
        else:
            value = instant.astimezone(tz)
            if tz.key != "UTC":
                params["TZID"] = tz.key
    prop = vDDDTypes(value)
    prop.params = params
    return prop


def add_new_zones(parsed: Calendar, missing_before: set[str], rows: Sequence[Event]) -> None:
    """The VTIMEZONEs of the zones `parsed` names and did not name before it was patched."""
    if parsed.get_missing_tzids() - missing_before:
        # A time now written in a zone the object did not use yet (an all-day event given a time).
        parsed.add_missing_timezones(
            first_date=date(min(r.start for r in rows).year - 1, 1, 1),
            last_date=date(max(r.end for r in rows).year + 20, 1, 1),
        )


def sender_zone(component: Component) -> str | None:
    """The IANA zone a scheduling message's DTSTART is written in (its TZID), when it is one: the
    zone its sender's calendar keeps (a Windows zone name, or none, says nothing)."""
    prop = component.get("DTSTART")
    tzid = getattr(prop, "params", {}).get("TZID") if prop is not None else None
    if not tzid:
        return None
    try:
        return ZoneInfo(str(tzid)).key
    except (ZoneInfoNotFoundError, ValueError):
        return None
