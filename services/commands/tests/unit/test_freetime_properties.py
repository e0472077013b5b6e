"""The suggestions of `domain.freetime` against a reference written without it: a minute-by-minute
scan of the range that asks, for every minute and every person, whether they are at work (by the
wall clock of their own zone), busy, tentative or free, and builds the answer from that grid.

Calendars, working weeks, buffers, zones and ranges are random. The ranges are drawn around the
DST changes of America/New_York (March 8 and November 1, 2026) and of Europe/Berlin and London
(March 29 and October 25), and people sit in zones on either side of them. Events are timed or
all-day (made in any zone, read as whole days of their owner's), marked busy or free
(TRANSP:TRANSPARENT), tentative or not, done or not. Working hours begin and end outside
01:00–03:00 local, the hours a DST change skips or repeats, where "09:00" names no instant or two
(`freetime`'s docstring says how it reads those; a wall-clock scan reads them differently by
construction).

The reference's rules, as the contract states them (§16, §20): a minute is usable when every person
counted is at work and not busy, a busy minute being one within a person's buffer of one of their
busy events; a slot is `duration` of usable minutes starting on a half hour of the asker's clock;
each run of usable minutes offers its surest slot (earliest among equals), where a person is
tentative over a slot when one of its minutes is within their buffer of a tentative event, and
the confidence is the mean of free 100, tentative 50, unknown 49; offers are ordered by
confidence, then time. With none, the first of: no half-hour start fits the window; no slot fits
everyone's working hours; none fits them and the caller's busy time; else the attendees'.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calagent.commands.domain.freetime import Person, person_of, suggest
from calagent.commands.domain.model import Event
from calagent.devtools.testing.examples import examples

pytestmark = pytest.mark.unit

EXAMPLES = 150
PROFILE = settings(
    max_examples=examples(EXAMPLES), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
MINUTE = timedelta(minutes=1)
ZONES = ("America/New_York", "Europe/Berlin", "Europe/London", "Asia/Shanghai", "Asia/Kolkata", "UTC")
# Just before each DST change (UTC), and a quiet week for contrast.
BASES = (
    datetime(2026, 3, 7, 0, 0, tzinfo=UTC),
    datetime(2026, 3, 28, 0, 0, tzinfo=UTC),
    datetime(2026, 10, 24, 0, 0, tzinfo=UTC),
    datetime(2026, 10, 31, 0, 0, tzinfo=UTC),
    datetime(2026, 6, 10, 0, 0, tzinfo=UTC),
)
# Quarter hours from 03:00 to 23:45, and the first hour of the day.
CLOCKS = [time(h, m) for h in (0, *range(3, 24)) for m in (0, 15, 30, 45)]
SCORE = {"free": 100, "tentative": 50, "unknown": 49}


@dataclass(frozen=True)
class Someone:
    zone: ZoneInfo
    week: dict[int, tuple[time, time]]
    events: tuple[Event, ...]
    buffer: int  # minutes


@dataclass(frozen=True)
class Problem:
    people: tuple[Someone, ...]  # the caller first
    unknown: int
    start: datetime
    end: datetime
    now: datetime
    duration: int  # minutes
    tz: ZoneInfo
    limit: int


@st.composite
def hours(draw: st.DrawFn) -> tuple[time, time] | None:
    kind = draw(st.sampled_from(["off", "office", "office", "office", "long", "long", "any", "any"]))
    if kind == "off":
        return None
    if kind == "any":
        # Anything from 00:00 to 23:45 (outside the DST hours).
        start = draw(st.sampled_from(CLOCKS[:-1]))
        return start, draw(st.sampled_from([c for c in CLOCKS if c > start]))
    if kind == "long":
        # Most of the day: people zones apart meet in it.
        return draw(st.sampled_from([time(0), time(3), time(5)])), draw(st.sampled_from(CLOCKS[-8:]))
    start = draw(st.sampled_from([c for c in CLOCKS if time(6) <= c <= time(12)]))
    return start, draw(st.sampled_from([c for c in CLOCKS if time(15) <= c]))


@st.composite
def events(draw: st.DrawFn, base: datetime) -> Event:
    if draw(st.integers(0, 3)) == 0:
        # All-day, as stored: midnight to midnight of the zone it was made in.
        made_in = ZoneInfo(draw(st.sampled_from(ZONES)))
        first = base.date() + timedelta(days=draw(st.integers(-1, 3)))
        days = draw(st.integers(1, 2))
        start = datetime.combine(first, time(0), tzinfo=made_in).astimezone(UTC)
        end = datetime.combine(first + timedelta(days=days), time(0), tzinfo=made_in).astimezone(UTC)
        all_day = True
    else:
        start = base + draw(st.integers(-24 * 60, 4 * 24 * 60)) * MINUTE
        # Mostly meetings, now and then a day away (a trip, a shift).
        end = start + draw(st.integers(5, 4 * 60) | st.integers(4 * 60, 30 * 60)) * MINUTE
        all_day = False
    return Event(
        id="e",
        user_id="u",
        title="x",
        start=start,
        end=end,
        calendar="c",
        all_day=all_day,
        transparent=draw(st.integers(0, 2)) == 0,
        tentative=draw(st.booleans()),
        completed=draw(st.integers(0, 7)) == 0,
    )


@st.composite
def someone(draw: st.DrawFn, base: datetime, zone: str) -> Someone:
    week = {day: span for day in range(1, 8) if (span := draw(hours())) is not None}
    # Two people in three share the first zone drawn, the rest are anywhere.
    own = zone if draw(st.integers(0, 2)) else draw(st.sampled_from(ZONES))
    return Someone(
        zone=ZoneInfo(own),
        week=week,
        events=tuple(draw(st.lists(events(base), max_size=8))),
        buffer=draw(st.sampled_from([0, 0, 5, 15, 30, 60])),
    )


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    base = draw(st.sampled_from(BASES)) + draw(st.integers(0, 2 * 24 * 60)) * MINUTE
    start = base
    end = start + draw(st.integers(2 * 60, 12 * 60) | st.integers(12 * 60, 3 * 24 * 60)) * MINUTE
    zone = draw(st.sampled_from(ZONES))
    return Problem(
        people=tuple(draw(st.lists(someone(base, zone), min_size=1, max_size=3))),
        unknown=draw(st.integers(0, 2)),
        start=start,
        end=end,
        # Mostly before the range (the usual question), sometimes inside it, now and then after it.
        now=start
        + draw(
            st.sampled_from(["before"] * 6 + ["inside"] * 3 + ["after"]).flatmap(
                lambda when: {
                    "before": st.integers(-24 * 60, 0),
                    "inside": st.integers(0, 6 * 60),
                    "after": st.integers(3 * 24 * 60, 4 * 24 * 60),
                }[when]
            )
        )
        * MINUTE,
        duration=draw(st.sampled_from([15, 30, 45, 60, 90, 120, 240])),
        tz=ZoneInfo(draw(st.sampled_from(ZONES))),
        limit=draw(st.integers(1, 5)),
    )


# ---- the reference ---------------------------------------------------------------------------------


class Grid:
    """One person's minutes from `first` on: at work, busy and tentative (buffers included)."""

    def __init__(self, who: Someone, first: datetime, count: int) -> None:
        self.week = who.week
        pad = who.buffer
        # The raw grid reaches `buffer` minutes beyond each side, so the buffer of an event just
        # outside the range still reaches into it.
        instants = [first + (i - pad) * MINUTE for i in range(count + 2 * pad)]
        local = [m.astimezone(who.zone) for m in instants]
        busy = [False] * len(instants)
        tentative = [False] * len(instants)
        for event in who.events:
            if event.completed or event.transparent:
                continue
            marks = tentative if event.tentative else busy
            if event.all_day:
                first_day = event.start.astimezone(who.zone).date()
                last_day = (event.end - timedelta(microseconds=1)).astimezone(who.zone).date()
                for i, moment in enumerate(local):
                    if first_day <= moment.date() <= last_day:
                        marks[i] = True
            else:
                for i, moment in enumerate(instants):
                    if event.start <= moment < event.end:
                        marks[i] = True
        self.at_work = [self._working(moment) for moment in local[pad : pad + count]]
        self.busy = self._widened(busy, pad, count)
        self.tentative = self._widened(tentative, pad, count)

    def _working(self, moment: datetime) -> bool:
        span = self.week.get(moment.isoweekday())
        return span is not None and span[0] <= moment.time().replace(fold=0) < span[1]

    @staticmethod
    def _widened(marks: list[bool], pad: int, count: int) -> list[bool]:
        """Minute i is held when any minute within `pad` of it, either side, is."""
        return [any(marks[i : i + 2 * pad + 1]) for i in range(count)]


def runs(usable: list[bool]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for i, ok in enumerate(usable):
        if ok and found and found[-1][1] == i:
            found[-1] = (found[-1][0], i + 1)
        elif ok:
            found.append((i, i + 1))
    return found


def first_slot(usable: list[bool], first: datetime, duration: int, tz: ZoneInfo) -> int | None:
    for run_start, run_end in runs(usable):
        for i in range(run_start, run_end - duration + 1):
            if (first + i * MINUTE).astimezone(tz).minute % 30 == 0:
                return i
    return None


# The slots, the reason for none, and the attendees (by place) busy on their own.
Answer = tuple[list[tuple[datetime, datetime, tuple[str, ...], float]], str | None, tuple[int, ...]]


def reference(problem: Problem) -> Answer:
    first = max(problem.start, problem.now)
    count = max(0, int((problem.end - first) / MINUTE))
    grids = [Grid(who, first, count) for who in problem.people]
    usable = [all(g.at_work[i] and not g.busy[i] for g in grids) for i in range(count)]
    offers: list[tuple[int, int, tuple[str, ...]]] = []
    for run_start, run_end in runs(usable):
        best: tuple[int, int, tuple[str, ...]] | None = None
        for i in range(run_start, run_end - problem.duration + 1):
            if (first + i * MINUTE).astimezone(problem.tz).minute % 30 != 0:
                continue
            shown = (
                tuple("tentative" if any(g.tentative[i : i + problem.duration]) else "free" for g in grids)
                + ("unknown",) * problem.unknown
            )
            total = sum(SCORE[a] for a in shown)
            if best is None or total > best[0]:
                best = (total, i, shown)
        if best is not None:
            offers.append(best)
    offers.sort(key=lambda offer: (-offer[0], offer[1]))
    slots = [
        (
            first + i * MINUTE,
            first + (i + problem.duration) * MINUTE,
            shown,
            round(total / len(shown), 2),
        )
        for total, i, shown in offers[: problem.limit]
    ]
    if slots:
        return slots, None, ()
    if first_slot([True] * count, first, problem.duration, problem.tz) is None:
        return [], "window_too_short", ()
    at_work = [all(g.at_work[i] for g in grids) for i in range(count)]
    if first_slot(at_work, first, problem.duration, problem.tz) is None:
        return [], "outside_hours", ()
    busy = tuple(
        k
        for k in range(1, len(grids))
        if first_slot(
            [at_work[i] and not grids[k].busy[i] for i in range(count)], first, problem.duration, problem.tz
        )
        is None
    )
    if busy:
        return [], "attendees_unavailable", busy
    mine = [at_work[i] and not grids[0].busy[i] for i in range(count)]
    if first_slot(mine, first, problem.duration, problem.tz) is None:
        return [], "organizer_unavailable", ()
    return [], "attendees_unavailable", ()


# ---- the property --------------------------------------------------------------------------------


def ours(problem: Problem) -> Answer:
    people: list[Person] = [
        person_of(who.events, tz=who.zone, week=who.week, buffer=who.buffer * MINUTE)
        for who in problem.people
    ]
    found = suggest(
        people,
        problem.start,
        problem.end,
        duration=problem.duration * MINUTE,
        now=problem.now,
        tz=problem.tz,
        limit=problem.limit,
        unknown=problem.unknown,
    )
    return (
        [(s.start, s.end, s.availability, s.confidence) for s in found.slots],
        found.empty_reason,
        found.busy,
    )


@PROFILE
@given(problems())
def test_suggestions_are_what_a_minute_by_minute_scan_finds(problem: Problem) -> None:
    assert ours(problem) == reference(problem)


def test_the_scan_sees_new_york_change_its_clock_in_the_night_of_march_8() -> None:
    """A fixed case across the spring change: 09:00 in New York is 14:00 UTC on Saturday and 13:00
    UTC on Monday; someone in Shanghai working 21:00–23:00 meets it on both days."""
    every_day = range(1, 8)
    new_york = Someone(ZoneInfo("America/New_York"), dict.fromkeys(every_day, (time(9), time(10))), (), 0)
    shanghai = Someone(ZoneInfo("Asia/Shanghai"), dict.fromkeys(every_day, (time(21), time(23))), (), 0)
    start = datetime(2026, 3, 7, 0, 0, tzinfo=UTC)
    problem = Problem(
        people=(new_york, shanghai),
        unknown=0,
        start=start,
        end=datetime(2026, 3, 10, 0, 0, tzinfo=UTC),
        now=start,
        duration=60,
        tz=ZoneInfo("UTC"),
        limit=5,
    )
    slots, *_ = ours(problem)
    assert [s.isoformat() for s, *_ in slots] == [
        "2026-03-07T14:00:00+00:00",  # Saturday 09:00 EST = Saturday 22:00 in Shanghai
        "2026-03-08T13:00:00+00:00",  # Sunday 09:00 EDT = Sunday 21:00 in Shanghai
        "2026-03-09T13:00:00+00:00",
    ]
    assert ours(problem) == reference(problem)


def test_an_all_day_event_in_berlin_covers_the_25_hours_of_october_25() -> None:
    """Berlin leaves summer time in the night of October 25: that day is 25 hours long, and an
    all-day event on it keeps every one of them, buffer around it too, busy; marked free, none."""
    berlin = ZoneInfo("Europe/Berlin")
    day = date(2026, 10, 25)
    holiday = Event(
        id="h",
        user_id="u",
        title="x",
        start=datetime.combine(day, time(0), tzinfo=berlin).astimezone(UTC),
        end=datetime.combine(day + timedelta(days=1), time(0), tzinfo=berlin).astimezone(UTC),
        calendar="c",
        all_day=True,
    )
    around = Someone(berlin, dict.fromkeys(range(1, 8), (time(0), time(23, 45))), (holiday,), 30)
    problem = Problem(
        people=(around,),
        unknown=0,
        start=datetime(2026, 10, 24, 12, 0, tzinfo=UTC),
        end=datetime(2026, 10, 26, 12, 0, tzinfo=UTC),
        now=datetime(2026, 10, 24, 0, 0, tzinfo=UTC),
        duration=60,
        tz=berlin,
        limit=3,
    )
    slots, *_ = ours(problem)
    # Saturday from 14:00 (12:00 UTC) to 23:30, then Monday from 00:30: the buffer's half hour
    # on either side of the 25 hours of Sunday.
    assert [(s.astimezone(berlin).isoformat(), e.astimezone(berlin).isoformat()) for s, e, *_ in slots] == [
        ("2026-10-24T14:00:00+02:00", "2026-10-24T15:00:00+02:00"),
        ("2026-10-26T00:30:00+01:00", "2026-10-26T01:30:00+01:00"),
    ]
    assert ours(problem) == reference(problem)
    free = Someone(berlin, around.week, (holiday.evolve(transparent=True),), 30)
    free_problem = Problem(**{**problem.__dict__, "people": (free,)})
    assert [s.astimezone(berlin).isoformat() for s, *_ in ours(free_problem)[0]] == [
        "2026-10-24T14:00:00+02:00",
        "2026-10-25T00:00:00+02:00",
        "2026-10-26T00:00:00+01:00",
    ]
    assert ours(free_problem) == reference(free_problem)
