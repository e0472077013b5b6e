"""Plans for random calendars and task sets (contract §21), checked by a reference written without
`tasks.domain.placement` or `domain.freetime`: a minute-by-minute reading of the user's working hours on
their own wall clock and of their busy spans.

Every block lies inside working hours, outside every busy span and every other block, after the
horizon's start and the task's earliest, ending by the task's due; its length is within the task's
chunk bounds (the lower bound being the task's whole length when shorter); two blocks of one task
never touch; a task's blocks add up to at most its minutes and what is missing is reported. The
plan places at least as many minutes as the greedy plan, and the same inputs give the same plan.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calagent.commands.tasks.domain.placement import Plan, Problem, TaskSpec, free_windows, greedy, plan
from calagent.devtools.testing.examples import examples

pytestmark = pytest.mark.unit

EXAMPLES = 30
PROFILE = settings(
    max_examples=examples(EXAMPLES), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
BUDGET_S = 0.5
MINUTE = timedelta(minutes=1)
ZONES = ("UTC", "Asia/Shanghai", "America/New_York", "Asia/Kolkata")
BASE = datetime(2026, 3, 6, 0, 0, tzinfo=UTC)  # across New York's DST change


@dataclass(frozen=True)
class Case:
    tz: ZoneInfo
    week: dict[int, tuple[time, time]]
    busy: tuple[tuple[datetime, datetime], ...]
    tasks: tuple[TaskSpec, ...]
    start: datetime
    end: datetime

    def problem(self) -> Problem:
        free = free_windows(self.busy, tz=self.tz, week=self.week, start=self.start, end=self.end)
        return Problem(tasks=self.tasks, free={"work": tuple(free)}, start=self.start, end=self.end)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    tz = ZoneInfo(draw(st.sampled_from(ZONES)))
    days = draw(st.integers(1, 5))
    start = (
        BASE + draw(st.integers(0, 24 * 4)) * timedelta(minutes=15) + draw(st.sampled_from([0, 7])) * MINUTE
    )
    end = start + timedelta(days=days)
    week: dict[int, tuple[time, time]] = {}
    for day in range(1, 8):
        if draw(st.booleans()) or day <= 2:
            first = draw(st.integers(6 * 4, 12 * 4))
            last = draw(st.integers(first + 4, 22 * 4))
            week[day] = (time(first // 4, first % 4 * 15), time(last // 4, last % 4 * 15))
    busy = []
    for _ in range(draw(st.integers(0, 8))):
        at = start + draw(st.integers(0, days * 24 * 60 - 1)) * MINUTE
        busy.append((at, at + draw(st.integers(10, 240)) * MINUTE))
    tasks = []
    for i in range(draw(st.integers(1, 6))):
        minutes = 15 * draw(st.integers(1, 24))
        chunk_min = draw(st.sampled_from([15, 30, 60]))
        chunk_max = max(chunk_min, draw(st.sampled_from([30, 60, 90, 120, 240])))
        due = draw(st.none() | st.integers(2 * 60, days * 24 * 60).map(lambda m: start + m * MINUTE))
        earliest = draw(st.none() | st.integers(0, days * 12 * 60).map(lambda m: start + m * MINUTE))
        tasks.append(
            TaskSpec(
                id=f"t{i}",
                minutes=minutes,
                due=due,
                earliest=earliest,
                priority=draw(st.integers(1, 4)),
                chunk_min=chunk_min,
                chunk_max=chunk_max,
                hours="work",
            )
        )
    return Case(tz=tz, week=week, busy=tuple(busy), tasks=tuple(tasks), start=start, end=end)


def at_work(case: Case, minute: datetime) -> bool:
    local = minute.astimezone(case.tz)
    hours = case.week.get(local.isoweekday())
    return hours is not None and hours[0] <= local.time() < hours[1]


def check_feasible(case: Case, result: Plan) -> None:
    by_id = {t.id: t for t in case.tasks}
    used: set[datetime] = set()
    placed: dict[str, int] = {}
    for block in result.blocks:
        task = by_id[block.task_id]
        length = (block.end - block.start) // MINUTE
        assert min(task.chunk_min, task.minutes) <= length <= task.chunk_max, block
        assert block.start >= case.start and block.end <= case.end, block
        assert task.due is None or block.end <= task.due, block
        assert task.earliest is None or block.start >= task.earliest, block
        minute = block.start
        while minute < block.end:
            assert at_work(case, minute), (block, minute)
            assert not any(b0 <= minute < b1 for b0, b1 in case.busy), (block, minute)
            assert minute not in used, (block, minute)
            used.add(minute)
            minute += MINUTE
        placed[task.id] = placed.get(task.id, 0) + length
    for task in case.tasks:
        own = sorted((b.start, b.end) for b in result.blocks if b.task_id == task.id)
        assert all(e < s for (_, e), (s, _) in itertools.pairwise(own)), own
        assert placed.get(task.id, 0) <= task.minutes
        assert result.missing.get(task.id, 0) == task.minutes - placed.get(task.id, 0)


@PROFILE
@given(cases())
def test_every_plan_is_feasible_no_worse_than_greedy_and_the_same_on_a_rerun(case: Case) -> None:
    problem = case.problem()
    first = greedy(problem)
    best = plan(problem, BUDGET_S)
    check_feasible(case, first)
    check_feasible(case, best)
    assert best.placed_minutes >= first.placed_minutes
    assert plan(problem, BUDGET_S) == best
