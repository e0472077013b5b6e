"""Free slots inside a range: every counted person's working hours (each in their own zone), minus
everyone's busy time, never in the past.

A person is their zone, their working span per weekday and their busy spans; the people whose
calendars do not count (they share nothing with the caller) are not passed in at all. Pure.

A working day is the instants from `start` to `end` on that local day as `at_local` places them:
a wall time skipped by a DST change lands after the gap, and a repeated one is its first
occurrence; working hours that begin or end inside a DST change's hour are read that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from calagent.commands.domain.model import Event
from calagent.commands.domain.overlap import event_span
from calagent.commands.domain.timeutil import at_local, local_date, local_midnight, parse_hhmm

Span = tuple[datetime, datetime]
# ISO weekday (1 = Monday … 7 = Sunday) → the working span of that local day; absent: a day off.
Week = Mapping[int, tuple[time, time]]
EVERY_DAY = range(1, 8)


def parse_working_hours(value: str) -> tuple[time, time]:
    first, sep, last = value.partition("-")
    if not sep:
        raise ValueError(f"working hours must look like 09:00-18:00, got {value!r}")
    start, end = parse_hhmm(first.strip()), parse_hhmm(last.strip())
    if end <= start:
        raise ValueError(f"working hours must end after they start, got {value!r}")
    return start, end


@dataclass(frozen=True)
class Person:
    """Whose time counts: their zone, their working week, their busy spans (any order)."""

    tz: ZoneInfo
    week: Week
    busy: tuple[Span, ...] = ()


def _round_up(instant: datetime, step: timedelta, tz: ZoneInfo) -> datetime:
    """The next local wall-clock multiple of `step` at or after `instant` (10:07 → 10:30)."""
    midnight = local_midnight(local_date(instant, tz), tz)
    elapsed = instant - midnight
    steps = -(-elapsed // step)  # ceiling division of timedeltas
    return midnight + steps * step


def merge(spans: Iterable[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def busy_spans(events: Iterable[Event], tz: ZoneInfo) -> list[Span]:
    """What a person's events keep busy (an all-day event: its whole local days in `tz`)."""
    return merge(event_span(ev, tz) for ev in events if not ev.completed)


def intersect(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    """Both sorted and disjoint; the instants in both."""
    out: list[Span] = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(spans: Sequence[Span], busy: Sequence[Span]) -> list[Span]:
    """`spans` sorted and disjoint, `busy` merged; the instants of `spans` outside `busy`."""
    out: list[Span] = []
    for start, end in spans:
        cursor = start
        for b0, b1 in busy:
            if b1 <= cursor:
                continue
            if b0 >= end:
                break
            if b0 > cursor:
                out.append((cursor, b0))
            cursor = max(cursor, b1)
            if cursor >= end:
                break
        if cursor < end:
            out.append((cursor, end))
    return out


def working_spans(person: Person, start: datetime, end: datetime) -> list[Span]:
    """The person's working time inside [start, end), day by day in their own zone."""
    spans: list[Span] = []
    day = local_date(start, person.tz) - timedelta(days=1)
    last = local_date(end, person.tz)
    while day <= last:
        hours = person.week.get(day.isoweekday())
        if hours is not None:
            w0 = max(at_local(day, hours[0], person.tz), start)
            w1 = min(at_local(day, hours[1], person.tz), end)
            if w0 < w1:
                spans.append((w0, w1))
        day += timedelta(days=1)
    return merge(spans)


def common_free(people: Sequence[Person], start: datetime, end: datetime) -> list[Span]:
    """The instants in [start, end) inside every person's working hours and nobody's busy time."""
    free: list[Span] = [(start, end)] if start < end else []
    for person in people:
        free = intersect(free, working_spans(person, start, end))
        free = subtract(free, merge(person.busy))
    return free


def common_slots(
    people: Sequence[Person],
    range_start: datetime,
    range_end: datetime,
    *,
    duration: timedelta,
    now: datetime,
    tz: ZoneInfo,
    limit: int,
    step: timedelta = timedelta(minutes=30),
) -> list[Span]:
    """At most `limit` slots of length `duration`, earliest first, each starting on a multiple of
    `step` of the asker's zone `tz`; at most one per free stretch, so the suggestions are real
    alternatives rather than 09:00, 09:30, 10:00 of the same morning."""
    found: list[Span] = []
    for g0, g1 in common_free(people, max(range_start, now), range_end):
        start = _round_up(g0, step, tz)
        if start + duration <= g1:
            found.append((start, start + duration))
            if len(found) >= limit:
                break
    return found


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
    """One person who works `working_hours` every day of the week."""
    person = Person(tz=tz, week=dict.fromkeys(EVERY_DAY, working_hours), busy=tuple(busy_spans(events, tz)))
    return common_slots(
        [person], range_start, range_end, duration=duration, now=now, tz=tz, limit=limit, step=step
    )


def why_none(people: Sequence[Person], range_start: datetime, range_end: datetime, now: datetime) -> str:
    """Why no slot fits: `past` (nothing of the range is ahead), `no_common_hours` (the working
    hours of the people do not meet in the range), `busy` (they meet, but busy time or the length
    asked for leaves no slot)."""
    start = max(range_start, now)
    if start >= range_end:
        return "past"
    hours: list[Span] = [(start, range_end)]
    for person in people:
        hours = intersect(hours, working_spans(person, start, range_end))
    return "no_common_hours" if not hours else "busy"
