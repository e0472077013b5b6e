"""Times and zones in calendar objects: an instant read on the object's wall clock, written back
in the form the object used (a DATE, a TZID, UTC or floating), and the VTIMEZONEs it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from icalendar import (
    Calendar,
    Component,
    vDDDTypes,
)
from icalendar.parser import Parameters
from icalendar.timezone import tzid_from_dt
from icalendar.timezone.windows_to_olson import WINDOWS_TO_OLSON

from calagent.commands.domain.model import Event
from calagent.commands.domain.series import localise

UTC_ZONE = ZoneInfo("UTC")


def _zone_key(value: datetime, fallback: ZoneInfo) -> str:
    """The IANA zone whose wall clock a time is written on: its own, the one CLDR maps a Windows
    name to (Outlook writes `TZID=Pacific Standard Time` with a VTIMEZONE of that name), else the
    zone whose offsets a custom VTIMEZONE's match over the year of `value`."""
    tz = value.tzinfo
    if tz is None:
        return fallback.key
    if isinstance(tz, ZoneInfo):
        return tz.key
    name = getattr(tz, "zone", None) or getattr(tz, "key", None) or tzid_from_dt(value)
    for candidate in (name, WINDOWS_TO_OLSON.get(name or "")):
        if candidate:
            try:
                return ZoneInfo(candidate).key
            except (ZoneInfoNotFoundError, ValueError):
                pass
    return _zone_like(value.year, _offsets(tz, value.year)) or "UTC"


def _offsets(tz: tzinfo, year: int) -> tuple[timedelta | None, ...]:
    """A zone's UTC offsets through a year and the next, twice a month: its DST rules as seen."""
    instants = [
        datetime(y, m, d, 12, tzinfo=UTC) for y in (year, year + 1) for m in range(1, 13) for d in (1, 16)
    ]
    return tuple(instant.astimezone(tz).utcoffset() for instant in instants)


@cache
def _zone_like(year: int, offsets: tuple[timedelta | None, ...]) -> str | None:
    """An IANA zone (Area/City) keeping exactly these offsets at `_offsets`' instants."""
    # The zones Windows names map to first: the ones a client most likely meant.
    mapped = set(WINDOWS_TO_OLSON.values())
    for key in sorted(available_timezones(), key=lambda k: (k not in mapped, k)):
        if (
            "/" in key
            and not key.startswith(("Etc/", "SystemV/"))
            and _offsets(ZoneInfo(key), year) == offsets
        ):
            return key
    return None


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
