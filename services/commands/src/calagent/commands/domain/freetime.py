"""Suggesting times (contract §16, §20): every counted person's working hours (each in their own
zone), minus everyone's busy time and the buffer each keeps around it, never in the past; each
slot with how sure it is (the mean of `AVAILABILITY_SCORE` over the people), best first.

A person is their zone, their working span per weekday, the spans their events keep busy or
tentative, and their buffer. What an event makes of its owner's time is `shows_as`: an event
marked free (TRANSP:TRANSPARENT) or done leaves it free — an all-day one too, which is otherwise
busy for its whole local days; a tentative one (STATUS:TENTATIVE, or an invitation the owner
answered tentatively) may be suggested over, at a lower confidence. The people whose calendars
do not count (they share nothing with the caller) are not passed in at all: they are `unknown`.

A slot starts on a multiple of `step` of the asker's wall clock and lies inside a stretch of time
every person can meet in (at work, not busy); each stretch offers at most one slot, its surest
(the earliest of the surest), so the suggestions are real alternatives rather than 09:00, 09:30,
10:00 of the same morning. The slots are ordered by confidence, then time. Pure: the same
calendars, settings and clock give the same list.

A working day is the instants from `start` to `end` on that local day as `at_local` places them:
a wall time skipped by a DST change lands after the gap, and a repeated one is its first
occurrence; working hours that begin or end inside a DST change's hour are read that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from calagent.commands.domain.model import Event
from calagent.commands.domain.overlap import event_span, keeps_time
from calagent.commands.domain.people import normal_address
from calagent.commands.domain.timeutil import at_local, local_date, local_midnight, parse_hhmm
from calagent.contracts.suggestions import AVAILABILITY_SCORE, Availability, EmptyReason, SlotReason

Span = tuple[datetime, datetime]
# ISO weekday (1 = Monday … 7 = Sunday) → the working span of that local day; absent: a day off.
Week = Mapping[int, tuple[time, time]]
EVERY_DAY = range(1, 8)
NO_BUFFER = timedelta(0)
STEP = timedelta(minutes=30)
# What an event makes of its owner's time.
ShowsAs = Literal["busy", "tentative", "free"]


def parse_working_hours(value: str) -> tuple[time, time]:
    first, sep, last = value.partition("-")
    if not sep:
        raise ValueError(f"working hours must look like 09:00-18:00, got {value!r}")
    start, end = parse_hhmm(first.strip()), parse_hhmm(last.strip())
    if end <= start:
        raise ValueError(f"working hours must end after they start, got {value!r}")
    return start, end


def shows_as(event: Event, own_addresses: frozenset[str] = frozenset()) -> ShowsAs:
    """Free when the event is marked free (TRANSP:TRANSPARENT) or done; tentative when it is
    (STATUS:TENTATIVE) or its owner, one of `own_addresses` (normalised), answered it so; else
    busy (RFC 5545's default TRANSP is OPAQUE, for all-day events too)."""
    if not keeps_time(event):
        return "free"
    if event.tentative or any(
        a.status == "TENTATIVE" and normal_address(a.email) in own_addresses for a in event.attendees
    ):
        return "tentative"
    return "busy"


@dataclass(frozen=True)
class Person:
    """Whose time counts: their zone, their working week, their busy and tentative spans (any
    order), and the free time they keep before and after each of those."""

    tz: ZoneInfo
    week: Week
    busy: tuple[Span, ...] = ()
    tentative: tuple[Span, ...] = ()
    buffer: timedelta = NO_BUFFER

    def held(self, spans: Iterable[Span]) -> list[Span]:
        return merge((start - self.buffer, end + self.buffer) for start, end in spans)


def person_of(
    events: Iterable[Event],
    *,
    tz: ZoneInfo,
    week: Week,
    buffer: timedelta = NO_BUFFER,
    own_addresses: frozenset[str] = frozenset(),
) -> Person:
    """A person from their events (an all-day one: its whole local days in `tz`)."""
    busy: list[Span] = []
    tentative: list[Span] = []
    for event in events:
        shown = shows_as(event, own_addresses)
        if shown == "busy":
            busy.append(event_span(event, tz))
        elif shown == "tentative":
            tentative.append(event_span(event, tz))
    return Person(tz=tz, week=week, busy=tuple(busy), tentative=tuple(tentative), buffer=buffer)


@dataclass(frozen=True)
class Suggestion:
    start: datetime
    end: datetime
    # One per person: the people passed in, in order, then each unknown one.
    availability: tuple[Availability, ...]
    confidence: float
    reason: SlotReason


@dataclass(frozen=True)
class Suggestions:
    slots: list[Suggestion]
    empty_reason: EmptyReason | None
    # With no slot: the attendees (their places in the people passed in, the caller being 0) whose
    # own busy time, in everyone's working hours, already leaves none.
    busy: tuple[int, ...] = ()


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


def _meets(spans: Sequence[Span], start: datetime, end: datetime) -> bool:
    return any(s0 < end and s1 > start for s0, s1 in spans)


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
    """The instants in [start, end) inside every person's working hours and outside everyone's
    busy time and its buffer: where a slot may lie (tentative time included)."""
    free: list[Span] = [(start, end)] if start < end else []
    for person in people:
        free = intersect(free, working_spans(person, start, end))
        free = subtract(free, person.held(person.busy))
    return free


def _starts(stretch: Span, duration: timedelta, step: timedelta, tz: ZoneInfo) -> Iterator[datetime]:
    """Every start on a multiple of `step` of `tz`'s wall clock whose slot fits in `stretch`."""
    start = _round_up(stretch[0], step, tz)
    while start + duration <= stretch[1]:
        yield start
        start = _round_up(start + step, step, tz)


def _fits(
    people: Sequence[Person],
    start: datetime,
    end: datetime,
    duration: timedelta,
    step: timedelta,
    tz: ZoneInfo,
) -> bool:
    return any(
        next(_starts(stretch, duration, step, tz), None) is not None
        for stretch in common_free(people, start, end)
    )


def _over(tentative: Sequence[Span], start: datetime, end: datetime) -> Availability:
    """How a person who can meet in [start, end) looks over it, given their tentative spans."""
    return "tentative" if _meets(tentative, start, end) else "free"


def slot_reason(availability: Sequence[Availability]) -> SlotReason:
    if "tentative" in availability:
        return "tentative"
    return "unknown" if "unknown" in availability else "all_free"


def suggest(
    people: Sequence[Person],
    range_start: datetime,
    range_end: datetime,
    *,
    duration: timedelta,
    now: datetime,
    tz: ZoneInfo,
    limit: int,
    unknown: int = 0,
    step: timedelta = STEP,
) -> Suggestions:
    """At most `limit` slots of length `duration` in [range_start, range_end) and not before `now`,
    for `people` (the caller first) and `unknown` more whose time nobody knows; or why none."""
    start = max(range_start, now)
    tentative = [person.held(person.tentative) for person in people]
    unknowns = tuple[Availability, ...](["unknown"] * unknown)
    ceiling = AVAILABILITY_SCORE["free"] * len(people) + AVAILABILITY_SCORE["unknown"] * unknown
    offers: list[tuple[int, Suggestion]] = []
    for stretch in common_free(people, start, range_end):
        best: tuple[int, Suggestion] | None = None
        doubtful = any(_meets(spans, *stretch) for spans in tentative)
        for slot_start in _starts(stretch, duration, step, tz):
            slot_end = slot_start + duration
            availability = (*(_over(spans, slot_start, slot_end) for spans in tentative), *unknowns)
            total = sum(AVAILABILITY_SCORE[a] for a in availability)
            if best is None or total > best[0]:
                best = (
                    total,
                    Suggestion(
                        start=slot_start,
                        end=slot_end,
                        availability=availability,
                        confidence=round(total / len(availability), 2),
                        reason=slot_reason(availability),
                    ),
                )
            if not doubtful or total == ceiling:
                break  # no later start of this stretch is surer
        if best is not None:
            offers.append(best)
    offers.sort(key=lambda offer: (-offer[0], offer[1].start))
    slots = [suggestion for _, suggestion in offers[:limit]]
    if slots:
        return Suggestions(slots=slots, empty_reason=None)
    reason, busy = why_none(people, start, range_end, duration=duration, step=step, tz=tz)
    return Suggestions(slots=[], empty_reason=reason, busy=busy)


def why_none(
    people: Sequence[Person],
    start: datetime,
    end: datetime,
    *,
    duration: timedelta,
    step: timedelta = STEP,
    tz: ZoneInfo,
) -> tuple[EmptyReason, tuple[int, ...]]:
    """Why [start, end) holds no slot for `people` (the caller first): the first constraint, in the
    order `EmptyReason` lists them, that already leaves none; and the attendees busy on their own.

    An attendee whose busy time alone leaves no slot is named before the caller's own busy time:
    freeing the caller's time would not help, so saying the caller has no free hour misleads."""
    if not _fits((), start, end, duration, step, tz):
        return "window_too_short", ()
    hours_only = [replace(person, busy=()) for person in people]
    if not _fits(hours_only, start, end, duration, step, tz):
        return "outside_hours", ()
    busy = tuple(
        i
        for i in range(1, len(people))
        if not _fits([*hours_only[:i], people[i], *hours_only[i + 1 :]], start, end, duration, step, tz)
    )
    if busy:
        return "attendees_unavailable", busy
    if not _fits([*people[:1], *hours_only[1:]], start, end, duration, step, tz):
        return "organizer_unavailable", ()
    return "attendees_unavailable", ()
