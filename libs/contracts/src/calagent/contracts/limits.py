"""Bounds on what a calendar date and a range of dates may be, shared by every service that accepts one.

`datetime` spans years 1–9999, but a calendar that accepts 0001-01-01 or 9999-12-31 breaks as
soon as it does arithmetic with them: a zone offset or an event's end pushes the value past
either end (`OverflowError`), and PostgreSQL refuses what Python still holds. No calendar entry
needs those years, so anything outside `MIN_YEAR`..`MAX_YEAR` is refused as invalid input, with a
message, where it enters — never retried as if the failure were the system's.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, tzinfo

MIN_YEAR = 1900
MAX_YEAR = 2199
OUT_OF_RANGE_MESSAGE = f"dates must lie between the years {MIN_YEAR} and {MAX_YEAR}"

# A range of dates (the events API, a query of the commands service, a range symbol) spans at most
# a year with its leap day, so one request never asks for an unbounded expansion of series.
MAX_RANGE_DAYS = 366
MAX_RANGE = timedelta(days=MAX_RANGE_DAYS)
RANGE_TOO_LONG_MESSAGE = f"a range spans at most {MAX_RANGE_DAYS} days"


def range_too_long(start: datetime, end: datetime, tz: tzinfo) -> bool:
    """Whether [start, end) spans more than `MAX_RANGE_DAYS` days, counted on the wall clock of the
    user's zone `tz`. Contract §6 does all day arithmetic in the user's zone, so `D`..`D+366` is
    366 days even where a DST change makes it an hour more of elapsed time; every door that takes
    a range (the events API, a query, a range symbol) asks this one question, so none refuses a
    range another accepted."""
    return end.astimezone(tz).replace(tzinfo=None) - start.astimezone(tz).replace(tzinfo=None) > MAX_RANGE


def within_supported_years(value: date | datetime) -> bool:
    return MIN_YEAR <= value.year <= MAX_YEAR
