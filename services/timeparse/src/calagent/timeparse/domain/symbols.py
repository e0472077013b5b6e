"""Canonical symbols to absolute time: a pure function of (symbol, now, tz).

The model writes symbols (`D+1`, `W3+1`, `WE`, `2026-09-30`, `--02-29`, `H:national_day`, ...);
this module turns them into dates and instants in the user's IANA zone. Nothing here reads the
clock: `now` and `tz` are always arguments.

Rules (also in the README, and each one a test):

* "Today" is the local date of `now` in `tz`, whatever offset `now` itself carries
  (`2026-09-23T17:00:00Z` is already the 24th in Asia/Shanghai). A naive `now` is read as local
  wall time in `tz`.
* Weeks are ISO weeks, Monday first: `W<d>+<k>` is weekday d (1 = Monday .. 7 = Sunday) of the week
  k weeks from the current one; `W3` is `W3+0`, this week's Wednesday, even when already past.
* `WE+<k>` is ambiguous by design: two candidates (Saturday, Sunday), also when a time is given,
  because a create needs exactly one date.
* `--MM-DD` is the next such day on or after today; `--02-29` is the next leap year's Feb 29.
* Month days (`monthdays.resolve_month_day`, no symbol of their own: the reply parser writes them as
  `YYYY-MM-DD`): a day alone is the next such day on or after today, a month that lacks it skipped;
  against a month counted from this one, that day of that month, also when past, and none when the
  month lacks it; a month's end is its last day, a named month's without a year the next one.
* `H:<name>[:<year>]` comes from the `holidays` package (never a hand-made table); a multi-day
  holiday means its first day; without a year, the next occurrence whose first day is on or after
  today. Observed/substituted days are not holidays of their own.
* DST: a local time that does not exist (spring-forward gap, e.g. 02:30 on 2026-03-08 in
  America/New_York) is shifted forward by the length of the gap (03:30 EDT) - that is what a
  fold=0 round trip through UTC does. A local time that exists twice (fall-back overlap) means the
  earlier instant (fold=0, e.g. 01:30 EDT on 2026-11-01).
* `end_time` must be later than `time` on the same day: an event cannot cross midnight through
  `end_time` (use a range for that). If a DST gap makes the resolved end not later than the start,
  that is `invalid_time` too.
* Ranges: every range symbol names an instant, the first moment of what it names: a date is its
  00:00, `D+1T12:00` is that day at 12:00, a month (`M`, `M+1`, `2026-10`) is its first day at
  00:00, and `WE+k` is that weekend's Saturday 00:00 (as start and as end alike). Ranges are
  half-open [start, end): "this weekend" is `WE+0` .. `W1+1`, "today" is `D` .. `D+1`, "this month"
  is `M` .. `M+1`. A range needs end > start and spans at most 366 days of wall-clock time.
* Errors are results, never exceptions and never guesses: `invalid_symbol`, `invalid_time`,
  `invalid_range`, `unknown_holiday`, `invalid_zone`.

Layout: this module reads the symbols, knows the zone, today and instants, and resolves; holidays
come from `public_holidays`, days named by their month (`--MM-DD`, 12号, 月底) and month arithmetic
from `monthdays`, and the error a helper raises from `problems`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from calagent.contracts.limits import MAX_RANGE_DAYS, range_too_long
from calagent.contracts.time import (
    ErrorCode,
    RangeRequest,
    RangeResult,
    ResolveRequest,
    ResolveResult,
    SymbolError,
)
from calagent.timeparse.domain.monthdays import month_plus, next_month_day
from calagent.timeparse.domain.problems import InvalidSymbolError, SymbolProblem
from calagent.timeparse.domain.public_holidays import HOLIDAY_ALIASES, holiday_date, holiday_names
from calagent.timeparse.domain.recurrence import recurrence_marker

__all__ = [
    "HOLIDAY_ALIASES",
    "DateResolution",
    "SymbolProblem",
    "holiday_names",
    "local_today",
    "resolve",
    "resolve_date",
    "resolve_range",
    "resolve_symbol",
    "to_instant",
    "weekday_label",
    "zone",
]

# The same shape as calagent.contracts.symbols (a property test keeps them in step), with named
# groups so one match both validates and dissects.
_SIGNED = r"[+-](?:0|[1-9][0-9]{0,3})"
_DATE_BODY = (
    rf"D(?P<d>{_SIGNED})?"
    rf"|W(?P<wd>[1-7])(?P<wk>{_SIGNED})?"
    rf"|WE(?P<we>{_SIGNED})?"
    r"|(?P<y>[0-9]{4})-(?P<m>[0-9]{2})-(?P<dd>[0-9]{2})"
    r"|--(?P<am>[0-9]{2})-(?P<ad>[0-9]{2})"
    r"|H:(?P<hn>[a-z][a-z_]{1,40})(?::(?P<hy>[0-9]{4}))?"
)
_DATE_RE = re.compile(rf"(?:{_DATE_BODY})\Z")
_RANGE_RE = re.compile(
    rf"(?:(?:{_DATE_BODY})(?:T(?P<t>[^T]{{1,8}}))?|M(?P<mo>{_SIGNED})?|(?P<my>[0-9]{{4}})-(?P<mm>[0-9]{{2}}))\Z"
)
_TIME_RE = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])\Z")

_ZH_WEEKDAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
_EN_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass(frozen=True, slots=True)
class DateResolution:
    """One date, or several candidates (a weekend)."""

    days: tuple[date, ...]

    @property
    def ambiguous(self) -> bool:
        return len(self.days) > 1


# --------------------------------------------------------------------------- zones and today


@lru_cache(maxsize=512)
def _zone(tz: str) -> ZoneInfo:
    return ZoneInfo(tz)


def zone(tz: str) -> ZoneInfo:
    """The IANA zone; raises ValueError for anything that is not one."""
    if not tz or len(tz) > 64:
        raise ValueError(f"not an IANA time zone: {tz!r}")
    try:
        return _zone(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"not an IANA time zone: {tz!r}") from exc


def _local_now(now: datetime, tzinfo: ZoneInfo) -> datetime:
    if now.tzinfo is None:
        return now.replace(tzinfo=tzinfo)
    return now.astimezone(tzinfo)


def local_today(now: datetime, tz: str) -> date:
    """The user's calendar date at `now` (raises ValueError on an unknown zone)."""
    return _local_now(now, zone(tz)).date()


def weekday_label(d: date | datetime, lang: str) -> str:
    """Short weekday for receipts: `周三` for Chinese, `Wed` otherwise."""
    names = _ZH_WEEKDAYS if lang.lower().startswith("zh") else _EN_WEEKDAYS
    return names[d.weekday()]


def to_instant(day: date, hour: int, minute: int, tzinfo: ZoneInfo) -> datetime:
    """Local wall time -> aware datetime, with the module's DST rule (gap: forward; overlap: earlier)."""
    naive_local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tzinfo)
    # A fold=0 time in a gap carries the pre-transition offset; going through UTC and back lands on
    # the real wall clock after the gap. Times that exist are unchanged by the round trip.
    return naive_local.astimezone(UTC).astimezone(tzinfo)


def local_today_or_none(now: datetime | None, tz: str | None) -> date | None:
    """Today in `tz`, or None when `now` or `tz` is missing or the zone is unknown."""
    if now is None or tz is None:
        return None
    try:
        return local_today(now, tz)
    except ValueError:  # an unknown zone: the forms that need today give {}
        return None


def _offset(text: str | None) -> int:
    return int(text) if text else 0


def _date_from_match(m: re.Match[str], today: date, country: str) -> DateResolution:
    try:
        if m.group("dd") is not None:
            try:
                return DateResolution((date(int(m.group("y")), int(m.group("m")), int(m.group("dd"))),))
            except ValueError:
                raise InvalidSymbolError("invalid_symbol", f"{m.group(0)} is not a calendar date") from None
        if m.group("wd") is not None:
            monday = today - timedelta(days=today.weekday())
            delta = 7 * _offset(m.group("wk")) + int(m.group("wd")) - 1
            return DateResolution((monday + timedelta(days=delta),))
        if m.group(0).startswith("WE"):
            saturday = (
                today - timedelta(days=today.weekday()) + timedelta(days=5 + 7 * _offset(m.group("we")))
            )
            return DateResolution((saturday, saturday + timedelta(days=1)))
        if m.group(0).startswith("D"):
            return DateResolution((today + timedelta(days=_offset(m.group("d"))),))
        if m.group("am") is not None:
            return DateResolution((next_month_day(int(m.group("am")), int(m.group("ad")), today),))
        return DateResolution((holiday_date(m.group("hn"), m.group("hy"), today, country),))
    except OverflowError:
        raise InvalidSymbolError("invalid_symbol", f"{m.group(0)} is outside the calendar") from None


def _parse_time(text: str, field: str) -> tuple[int, int]:
    m = _TIME_RE.match(text)
    if m is None:
        raise InvalidSymbolError("invalid_time", f"{field} {text!r} is not HH:MM (24-hour, 00:00-23:59)")
    return int(m.group(1)), int(m.group(2))


def resolve_date(symbol: str, today: date, country: str = "CN") -> DateResolution | SymbolProblem:
    """A date symbol relative to `today` (no zone needed: dates only)."""
    m = _DATE_RE.match(symbol)
    if m is None:
        return SymbolProblem("invalid_symbol", f"{symbol!r} is not a date symbol")
    try:
        return _date_from_match(m, today, country)
    except InvalidSymbolError as exc:
        return exc.problem


# --------------------------------------------------------------------------- resolve


def _error(code: ErrorCode, message: str) -> ResolveResult:
    return ResolveResult.model_construct(error=SymbolError.model_construct(code=code, message=message))


def resolve_symbol(
    date_symbol: str,
    time: str | None,
    end_time: str | None,
    now: datetime,
    tz: str,
    holiday_country: str = "CN",
) -> ResolveResult:
    """`resolve` without the request model, for callers that already hold the fields."""
    try:
        tzinfo = zone(tz)
    except ValueError as exc:
        return _error("invalid_zone", str(exc))
    try:
        m = _DATE_RE.match(date_symbol)
        if m is None:
            raise InvalidSymbolError("invalid_symbol", f"{date_symbol!r} is not a date symbol")
        hm = _parse_time(time, "time") if time is not None else None
        end_hm = _parse_time(end_time, "end_time") if end_time is not None else None
        if end_hm is not None:
            if hm is None:
                raise InvalidSymbolError("invalid_time", "end_time needs a time")
            if end_hm <= hm:
                raise InvalidSymbolError(
                    "invalid_time", f"end_time {end_time} must be later than time {time}"
                )
        try:
            today = _local_now(now, tzinfo).date()
        except OverflowError:
            raise InvalidSymbolError("invalid_symbol", "now is outside the calendar") from None
        resolution = _date_from_match(m, today, holiday_country)
        if resolution.ambiguous:
            return ResolveResult.model_construct(candidates=resolution.days)
        day = resolution.days[0]
        if hm is None:
            return ResolveResult.model_construct(date=day)
        try:
            start = to_instant(day, hm[0], hm[1], tzinfo)
            end = to_instant(day, end_hm[0], end_hm[1], tzinfo) if end_hm is not None else None
        except OverflowError:
            raise InvalidSymbolError("invalid_symbol", f"{date_symbol!r} is outside the calendar") from None
        if end is None:
            return ResolveResult.model_construct(start=start)
        if end <= start:
            raise InvalidSymbolError(
                "invalid_time", f"end_time {end_time} is not after time {time} on {day} (DST gap)"
            )
        return ResolveResult.model_construct(start=start, end=end)
    except InvalidSymbolError as exc:
        return _error(exc.problem.code, exc.problem.message)


def resolve(req: ResolveRequest) -> ResolveResult:
    """Exactly one of start (+end) / date / candidates / error; never raises on bad input. With
    `words`, also their recurrence marker: the write they ask for is held without a rule."""
    result = resolve_symbol(req.date, req.time, req.end_time, req.now, req.tz, req.holiday_country)
    if req.words is None:
        return result
    return result.model_copy(update={"recurrence_marker": recurrence_marker(req.words)})


def _range_point(symbol: str, today: date, tzinfo: ZoneInfo, country: str) -> datetime:
    m = _RANGE_RE.match(symbol)
    if m is None:
        raise InvalidSymbolError("invalid_symbol", f"{symbol!r} is not a range symbol")
    try:
        if m.group("my") is not None:
            month = int(m.group("mm"))
            if not 1 <= month <= 12:
                raise InvalidSymbolError("invalid_symbol", f"{symbol!r} is not a month")
            return to_instant(date(int(m.group("my")), month, 1), 0, 0, tzinfo)
        if symbol.startswith("M"):
            year, month = month_plus(today, _offset(m.group("mo")))
            return to_instant(date(year, month, 1), 0, 0, tzinfo)
        hm = _parse_time(m.group("t"), "time") if m.group("t") is not None else (0, 0)
        resolution = _date_from_match(m, today, country)
        return to_instant(resolution.days[0], hm[0], hm[1], tzinfo)
    except (OverflowError, ValueError):
        raise InvalidSymbolError("invalid_symbol", f"{symbol!r} is outside the calendar") from None


def resolve_range(req: RangeRequest) -> RangeResult:
    """A half-open [start, end) query window; never raises on bad input."""
    try:
        tzinfo = zone(req.tz)
    except ValueError as exc:
        return RangeResult.model_construct(
            error=SymbolError.model_construct(code="invalid_zone", message=str(exc))
        )
    try:
        try:
            today = _local_now(req.now, tzinfo).date()
        except OverflowError:
            raise InvalidSymbolError("invalid_symbol", "now is outside the calendar") from None
        start = _range_point(req.start, today, tzinfo, req.holiday_country)
        end = _range_point(req.end, today, tzinfo, req.holiday_country)
        if end <= start:
            raise InvalidSymbolError(
                "invalid_range", f"end {req.end} ({end.isoformat()}) is not after start {req.start}"
            )
        if range_too_long(start, end, tzinfo):
            raise InvalidSymbolError(
                "invalid_range", f"{req.start} .. {req.end} spans more than {MAX_RANGE_DAYS} days"
            )
    except InvalidSymbolError as exc:
        problem = exc.problem
        return RangeResult.model_construct(
            error=SymbolError.model_construct(code=problem.code, message=problem.message)
        )
    return RangeResult.model_construct(start=start, end=end)
