"""Days named by their month: `--MM-DD` (the next such day on or after today) and the month-day
forms of the short-reply parser (12号, 下个月5号, 月底, 3月底, the 12th), which are dates only once
today is known. Which month-days exist at all is decided here too (`is_day_of_year`).
"""

from __future__ import annotations

import calendar
from datetime import date
from typing import NamedTuple

from calagent.timeparse.domain.problems import InvalidSymbolError

__all__ = ["MonthDay", "is_day_of_year", "last_day", "month_plus", "next_month_day", "resolve_month_day"]


def is_day_of_year(month: int, day: int, year: int | None) -> bool:
    """Whether the day exists in that year, or, without a year, in some year (Feb 29 does)."""
    try:
        date(year if year is not None else 2000, month, day)  # 2000 is leap: Feb 29 allowed
    except ValueError:
        return False
    return True


def next_month_day(month: int, day: int, today: date) -> date:
    """`--MM-DD`: the next such day on or after today (`--02-29` is the next leap year's)."""
    if not is_day_of_year(month, day, None):
        raise InvalidSymbolError("invalid_symbol", f"--{month:02d}-{day:02d} is not a day of the year")
    # Eight years always contain a leap year (2096 -> 2104 is the longest gap); so if none of them
    # has the day, no year does.
    for year in range(today.year, today.year + 9):
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue
        if candidate >= today:
            return candidate
    raise InvalidSymbolError("invalid_symbol", f"--{month:02d}-{day:02d} is not a day of the year")


class MonthDay(NamedTuple):
    """A day that is a date only once today is known (12号, 下个月5号, 月底, 3月底, the 12th)."""

    day: int | None  # None: the month's last day
    months: int | None = None  # months from this one (下个月 +1); None: see `month`
    month: int | None = None  # a named month (3月底); with `months` also None: the next such day
    year: int | None = None  # a written year (2027年2月底)


def last_day(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def month_plus(today: date, months: int) -> tuple[int, int]:
    index = today.year * 12 + today.month - 1 + months
    return index // 12, index % 12 + 1


def _next_day_of_month(day: int, today: date) -> date | None:
    """The next date on or after today whose day of the month is `day`.

    When this month's `day` has passed, the next month that has it; a month without that day is
    skipped the same way (31号 on 5 September is 31 October, 30号 on 31 January is 30 March), as
    the symbol `--02-29` skips to the next leap year: "the next such day on or after today" is one
    rule, never a nearby day. A day no month has (32号) is None.
    """
    if not 1 <= day <= 31:
        return None
    for months in range(13):
        year, month = month_plus(today, months)
        if day <= calendar.monthrange(year, month)[1] and date(year, month, day) >= today:
            return date(year, month, day)
    return None  # pragma: no cover - day 31 recurs within 12 months


def resolve_month_day(spec: MonthDay, today: date) -> date | None:
    """The date of a month-day form on `today`, or None when there is no such day (32号, 下个月31号
    in a 30-day month)."""
    if spec.day is not None and not 1 <= spec.day <= 31:
        return None
    if spec.months is None and spec.month is None:
        return None if spec.day is None else _next_day_of_month(spec.day, today)
    if spec.months is not None:
        year, month = month_plus(today, spec.months)
    else:
        assert spec.month is not None
        if not 1 <= spec.month <= 12:
            return None
        month = spec.month
        year = spec.year if spec.year is not None else today.year
        # A named month's end without a year: the next one on or after today (3月底 in September
        # is next March's).
        if spec.year is None and last_day(year, month) < today:
            year += 1
    if spec.day is None:
        return last_day(year, month)
    try:
        return date(year, month, spec.day)
    except ValueError:
        return None
