"""Wall-clock arithmetic in the user's zone (DST-safe: always through `zoneinfo`).

Instants leave this module in UTC: Python subtracts and compares two datetimes that share a tzinfo
by wall clock, which is wrong across a DST change; UTC arithmetic never is.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class InvalidZoneError(ValueError):
    pass


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidZoneError(f"unknown time zone {name!r}") from exc


def parse_hhmm(value: str) -> time:
    hours, _, minutes = value.partition(":")
    if not (hours.isdigit() and minutes.isdigit() and len(minutes) == 2 and len(hours) in (1, 2)):
        raise ValueError(f"not a HH:MM time: {value!r}")
    return time(int(hours), int(minutes))


def at_local(day: date, clock_time: time, tz: ZoneInfo) -> datetime:
    """The instant (in UTC) of `day clock_time` in `tz`; a wall time skipped by DST lands after
    the gap."""
    return datetime.combine(day, clock_time, tzinfo=tz).astimezone(UTC)


def local_midnight(day: date, tz: ZoneInfo) -> datetime:
    return at_local(day, time(0), tz)


def local_day_span(day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """[00:00, next 00:00) of `day` in `tz` (23 or 25 hours long on DST days)."""
    return local_midnight(day, tz), local_midnight(day + timedelta(days=1), tz)


def local_days(start: datetime, end: datetime, tz: ZoneInfo) -> int:
    """How many local days an all-day span covers, counted by date (at least one): a DST day of
    23 or 25 hours is one day, however many hours it has."""
    return max(1, (end.astimezone(tz).date() - start.astimezone(tz).date()).days)


def whole_days(first_day: date, days: int, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """[00:00 of `first_day`, 00:00 after its `days`-th day) in `tz`, as UTC instants."""
    return local_midnight(first_day, tz), local_midnight(first_day + timedelta(days=days), tz)


def local_date(instant: datetime, tz: ZoneInfo) -> date:
    return instant.astimezone(tz).date()


def end_from_clock(start: datetime, end_time: str, tz: ZoneInfo) -> datetime:
    """The end at `end_time` on the start's local day, or the next day when that is not after the
    start (23:00–01:00 is an event crossing midnight, not a negative one)."""
    start_local = start.astimezone(tz)
    end = at_local(start_local.date(), parse_hhmm(end_time), tz)
    if end <= start:
        end = at_local(start_local.date() + timedelta(days=1), parse_hhmm(end_time), tz)
    return end
