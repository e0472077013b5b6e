"""Free slots inside a range: working hours per local day, minus busy events, never in the past."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from calagent.commands.domain.model import Event
from calagent.commands.domain.overlap import event_span
from calagent.commands.domain.timeutil import at_local, local_date, local_midnight, parse_hhmm

Span = tuple[datetime, datetime]


def parse_working_hours(value: str) -> tuple[time, time]:
    first, sep, last = value.partition("-")
    if not sep:
        raise ValueError(f"working hours must look like 09:00-18:00, got {value!r}")
    start, end = parse_hhmm(first.strip()), parse_hhmm(last.strip())
    if end <= start:
        raise ValueError(f"working hours must end after they start, got {value!r}")
    return start, end


def _round_up(instant: datetime, step: timedelta, tz: ZoneInfo) -> datetime:
    """The next local wall-clock multiple of `step` at or after `instant` (10:07 → 10:30)."""
    midnight = local_midnight(local_date(instant, tz), tz)
    elapsed = instant - midnight
    steps = -(-elapsed // step)  # ceiling division of timedeltas
    return midnight + steps * step


def busy_spans(events: Iterable[Event], tz: ZoneInfo) -> list[Span]:
    spans = sorted(event_span(ev, tz) for ev in events if not ev.completed)
    merged: list[Span] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _gaps(window: Span, busy: list[Span]) -> list[Span]:
    cursor, stop = window
    gaps: list[Span] = []
    for b0, b1 in busy:
        if b1 <= cursor:
            continue
        if b0 >= stop:
            break
        if b0 > cursor:
            gaps.append((cursor, b0))
        cursor = max(cursor, b1)
        if cursor >= stop:
            break
    if cursor < stop:
        gaps.append((cursor, stop))
    return gaps


def free_slots(
    range_start: datetime,
    range_end: datetime,
    events: Iterable[Event],
    *,
    duration: timedelta,
    working_hours: tuple[time, time],
    now: datetime,
    tz: ZoneInfo,
    limit: int,
    step: timedelta = timedelta(minutes=30),
) -> list[Span]:
    """At most `limit` slots of length `duration`, earliest first, at most one per free gap so the
    suggestions are real alternatives rather than 09:00, 09:30, 10:00 of the same morning."""
    busy = busy_spans(events, tz)
    found: list[Span] = []
    day = local_date(range_start, tz)
    last_day = local_date(range_end, tz)
    while day <= last_day and len(found) < limit:
        window_start = max(at_local(day, working_hours[0], tz), range_start, now)
        window_end = min(at_local(day, working_hours[1], tz), range_end)
        if window_start < window_end:
            for g0, g1 in _gaps((window_start, window_end), busy):
                start = _round_up(g0, step, tz)
                if start + duration <= g1:
                    found.append((start, start + duration))
                    if len(found) >= limit:
                        break
        day += timedelta(days=1)
    return found
