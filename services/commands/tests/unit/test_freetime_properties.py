"""The multi-person free time of `domain.freetime` against a reference written without it: a
minute-by-minute scan of the range that asks, for every minute, whether each person is at work (by
the wall clock of their own zone) and not busy.

Calendars, working weeks, zones and ranges are random; the ranges are drawn around the DST changes
of America/New_York (March 8 and November 1, 2026) and London's (October 25), and people sit in
zones on either side of them. Working hours begin and end outside 01:00–03:00 local, the hours a
DST change skips or repeats, where "09:00" names no instant or two (`freetime`'s docstring says how
it reads those; a wall-clock scan reads them differently by construction).
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calagent.commands.domain.freetime import Person, Span, common_slots, why_none

pytestmark = pytest.mark.unit

PROFILE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MINUTE = timedelta(minutes=1)
STEP = timedelta(minutes=30)
ZONES = ("America/New_York", "Europe/London", "Asia/Shanghai", "Asia/Kolkata", "UTC")
# Just before each DST change (UTC), and a quiet week for contrast.
BASES = (
    datetime(2026, 3, 7, 0, 0, tzinfo=UTC),
    datetime(2026, 10, 24, 0, 0, tzinfo=UTC),
    datetime(2026, 10, 31, 0, 0, tzinfo=UTC),
    datetime(2026, 6, 10, 0, 0, tzinfo=UTC),
)
# Quarter hours from 03:00 to 23:45, and the first hour of the day.
CLOCKS = [time(h, m) for h in (0, *range(3, 24)) for m in (0, 15, 30, 45)]


@st.composite
def hours(draw: st.DrawFn) -> tuple[time, time] | None:
    if draw(st.booleans()) and draw(st.booleans()):
        return None  # a day off, one day in four
    if draw(st.booleans()):
        # Anything from 00:00 to 23:45 (outside the DST hours).
        start = draw(st.sampled_from(CLOCKS[:-1]))
        end = draw(st.sampled_from([c for c in CLOCKS if c > start]))
    else:
        # An office day, long enough for people zones apart to meet now and then.
        start = draw(st.sampled_from([c for c in CLOCKS if time(6) <= c <= time(12)]))
        end = draw(st.sampled_from([c for c in CLOCKS if time(15) <= c]))
    return start, end


@st.composite
def person(draw: st.DrawFn, base: datetime, zone: str) -> Person:
    week = {day: span for day in range(1, 8) if (span := draw(hours())) is not None}
    busy: list[Span] = []
    for _ in range(draw(st.integers(0, 6))):
        start = base + draw(st.integers(-24 * 60, 4 * 24 * 60)) * MINUTE
        busy.append((start, start + draw(st.integers(5, 10 * 60)) * MINUTE))
    # Half the people share the first person's zone, the rest are anywhere.
    own = zone if draw(st.booleans()) else draw(st.sampled_from(ZONES))
    return Person(tz=ZoneInfo(own), week=week, busy=tuple(busy))


@st.composite
def problems(draw: st.DrawFn) -> dict[str, object]:
    base = draw(st.sampled_from(BASES)) + draw(st.integers(0, 2 * 24 * 60)) * MINUTE
    start = base
    end = start + draw(st.integers(12 * 60, 3 * 24 * 60)) * MINUTE
    zone = draw(st.sampled_from(ZONES))
    return {
        "people": draw(st.lists(person(base, zone), min_size=1, max_size=3)),
        "start": start,
        "end": end,
        # Mostly before the range (the usual question), sometimes inside it, now and then after it.
        "now": start + draw(st.integers(-24 * 60, 6 * 60) | st.integers(3 * 24 * 60, 4 * 24 * 60)) * MINUTE,
        "duration": draw(st.sampled_from([15, 30, 45, 60, 90, 120, 240])) * MINUTE,
        "tz": ZoneInfo(draw(st.sampled_from(ZONES))),
        "limit": draw(st.integers(1, 5)),
    }


def at_work(who: Person, minute: datetime) -> bool:
    local = minute.astimezone(who.tz)
    span = who.week.get(local.isoweekday())
    return span is not None and span[0] <= local.time().replace(fold=0) < span[1]


def busy(who: Person, minute: datetime) -> bool:
    return any(b0 <= minute < b1 for b0, b1 in who.busy)


def reference(
    people: list[Person],
    start: datetime,
    end: datetime,
    now: datetime,
    duration: timedelta,
    tz: ZoneInfo,
    limit: int,
) -> list[Span]:
    """Scan every minute; each stretch of minutes free for everyone offers its first start on a
    half hour of `tz`'s wall clock, if the duration fits before the stretch ends."""
    runs: list[list[datetime]] = []
    minute = max(start, now)
    previous_free = False
    while minute < end:
        free = all(at_work(p, minute) and not busy(p, minute) for p in people)
        if free:
            if previous_free:
                runs[-1][1] = minute + MINUTE
            else:
                runs.append([minute, minute + MINUTE])
        previous_free = free
        minute += MINUTE
    slots: list[Span] = []
    for run_start, run_end in runs:
        candidate = run_start
        while candidate.astimezone(tz).minute % 30 != 0:
            candidate += MINUTE
        if candidate + duration <= run_end:
            slots.append((candidate, candidate + duration))
    return slots[:limit]


@PROFILE
@given(problems())
def test_common_slots_are_what_a_minute_by_minute_scan_finds(problem: dict[str, object]) -> None:
    people = problem["people"]
    start, end, now = problem["start"], problem["end"], problem["now"]
    duration, tz, limit = problem["duration"], problem["tz"], problem["limit"]
    assert isinstance(people, list) and isinstance(start, datetime) and isinstance(end, datetime)
    assert isinstance(now, datetime) and isinstance(duration, timedelta) and isinstance(tz, ZoneInfo)
    assert isinstance(limit, int)
    found = common_slots(people, start, end, duration=duration, now=now, tz=tz, limit=limit)
    assert found == reference(people, start, end, now, duration, tz, limit)
    if not found:
        reason = why_none(people, start, end, now)
        ahead = max(start, now) < end
        anyone_at_work = ahead and any(
            all(at_work(p, m) for p in people)
            for m in (max(start, now) + i * MINUTE for i in range(int((end - max(start, now)) / MINUTE)))
        )
        assert reason == ("past" if not ahead else "busy" if anyone_at_work else "no_common_hours")


def test_the_scan_sees_new_york_change_its_clock_in_the_night_of_march_8() -> None:
    """A fixed case across the spring change: 09:00 in New York is 14:00 UTC on Saturday and 13:00
    UTC on Monday; someone in Shanghai working 21:00–23:00 meets it on both days."""
    new_york = Person(tz=ZoneInfo("America/New_York"), week=dict.fromkeys(range(1, 8), (time(9), time(10))))
    shanghai = Person(tz=ZoneInfo("Asia/Shanghai"), week=dict.fromkeys(range(1, 8), (time(21), time(23))))
    start = datetime(2026, 3, 7, 0, 0, tzinfo=UTC)
    end = datetime(2026, 3, 10, 0, 0, tzinfo=UTC)
    found = common_slots(
        [new_york, shanghai],
        start,
        end,
        duration=timedelta(minutes=60),
        now=start,
        tz=ZoneInfo("UTC"),
        limit=5,
    )
    assert [s.isoformat() for s, _ in found] == [
        "2026-03-07T14:00:00+00:00",  # Saturday 09:00 EST = Saturday 22:00 in Shanghai
        "2026-03-08T13:00:00+00:00",  # Sunday 09:00 EDT = Sunday 21:00 in Shanghai
        "2026-03-09T13:00:00+00:00",
    ]
    assert found == reference(
        [new_york, shanghai], start, end, start, timedelta(minutes=60), ZoneInfo("UTC"), 5
    )
