"""Placing tasks in free time (contract §21): the pieces of `tasks.domain.placement` on small calendars
whose right answer can be seen by hand."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from calagent.commands.config import CommandConfig
from calagent.commands.tasks.domain.placement import (
    Block,
    Problem,
    TaskSpec,
    free_windows,
    greedy,
    moved,
    opaque_tasks,
    place_one,
    plan,
    replan,
)
from calagent.runtime.settings import Settings

pytestmark = pytest.mark.unit

UTC_ZONE = ZoneInfo("UTC")
MONDAY = datetime(2026, 6, 8, 0, 0, tzinfo=UTC)
NINE_TO_FIVE = {d: (time(9), time(17)) for d in range(1, 6)}


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return MONDAY + timedelta(days=day, hours=hour, minutes=minute)


def task(
    tid: str,
    minutes: int,
    due: datetime | None = None,
    *,
    chunk_min: int = 30,
    chunk_max: int = 120,
    priority: int = 3,
) -> TaskSpec:
    return TaskSpec(
        id=tid,
        minutes=minutes,
        due=due,
        earliest=None,
        priority=priority,
        chunk_min=chunk_min,
        chunk_max=chunk_max,
        hours="work",
    )


def problem(tasks: list[TaskSpec], busy: list[tuple[datetime, datetime]], days: int = 5) -> Problem:
    start, end = MONDAY, MONDAY + timedelta(days=days)
    free = free_windows(busy, tz=UTC_ZONE, week=NINE_TO_FIVE, start=start, end=end)
    return Problem(tasks=tuple(tasks), free={"work": tuple(free)}, start=start, end=end)


def test_free_windows_are_working_hours_outside_busy_spans() -> None:
    free = free_windows([(at(0, 10), at(0, 11))], tz=UTC_ZONE, week=NINE_TO_FIVE, start=MONDAY, end=at(1, 0))
    assert free == [(at(0, 9), at(0, 10)), (at(0, 11), at(0, 17))]


def test_greedy_places_the_earliest_due_first_in_chunks_within_bounds() -> None:
    tasks = [task("late", 60, at(4, 17)), task("soon", 180, at(0, 17), chunk_max=120)]
    result = greedy(problem(tasks, []))
    soon = [b for b in result.blocks if b.task_id == "soon"]
    assert [(b.start, b.end) for b in soon] == [(at(0, 9), at(0, 11)), (at(0, 11, 15), at(0, 12, 15))]
    late = [b for b in result.blocks if b.task_id == "late"]
    assert late == [Block("late", at(0, 12, 15), at(0, 13, 15))]
    assert result.missing == {}


def test_a_task_that_cannot_fit_before_its_due_is_at_risk_never_placed_after() -> None:
    tasks = [task("report", 300, at(0, 12))]
    result = plan(problem(tasks, [(at(0, 9), at(0, 10))]), budget_s=1.0)
    assert all(b.end <= at(0, 12) for b in result.blocks)
    assert result.missing == {"report": 180}


def test_the_solver_beats_greedy_where_earliest_due_first_wastes_a_window() -> None:
    # Greedy gives "a" (due first) the only 60-minute window, leaving "b" (60 min, one chunk)
    # nowhere; "a" could have used the later 30-minute pieces.
    busy = [
        (at(0, 9), at(0, 10)),
        (at(0, 11), at(0, 12)),
        (at(0, 12, 30), at(0, 13)),
        (at(0, 13, 30), at(0, 17)),
    ]
    tasks = [
        task("a", 60, at(0, 17), chunk_min=30, chunk_max=60),
        task("b", 60, at(0, 17, 0) + timedelta(minutes=1), chunk_min=60, chunk_max=60),
    ]
    p = problem(tasks, busy, days=1)
    assert greedy(p).missing == {"b": 60}
    best = plan(p, budget_s=2.0)
    assert best.missing == {}
    assert best.solver == "cp-sat"


def test_replan_moves_only_the_blocks_a_new_meeting_lands_on() -> None:
    tasks = [task("a", 120, at(2, 17)), task("b", 120, at(2, 17)), task("c", 120, at(2, 17))]
    first = plan(problem(tasks, []), budget_s=1.0)
    hit = first.blocks[0]
    after = problem(tasks, [(hit.start, hit.end)])
    again = replan(after, first.blocks, budget_s=1.0)
    assert again.missing == {}
    assert moved(first.blocks, again.blocks) == 1
    assert moved(first.blocks, greedy(after).blocks) >= 1


def test_a_task_placed_among_others_uses_the_room_their_blocks_leave_and_moves_none() -> None:
    tasks = [task("a", 60, at(0, 17)), task("b", 60, at(4, 17))]
    a_block = Block("a", at(0, 9), at(0, 10))
    found = place_one(problem(tasks, []), [a_block], "b", budget_s=1.0)
    assert found.blocks == (a_block, Block("b", at(0, 10), at(0, 11)))


def test_a_task_placed_among_others_moves_them_when_greedy_over_all_leaves_less_unplaced() -> None:
    # "a" sits 09:00-10:00, where "b" (due 10:00) alone could go: placed around it, "b" would
    # miss its hour; greedy over both places both, and only "a" moves.
    tasks = [task("a", 60, at(0, 17)), task("b", 60, at(0, 10))]
    found = place_one(problem(tasks, []), [Block("a", at(0, 9), at(0, 10))], "b", budget_s=1.0)
    assert found.missing == {}
    assert found.blocks == (Block("b", at(0, 9), at(0, 10)), Block("a", at(0, 10), at(0, 11)))


def test_a_block_under_busy_time_keeps_every_other_block_where_it_is() -> None:
    # A meeting landed on "a"'s block: that block waits for its own re-plan offer, so placing "b"
    # moves nothing, even though greedy over both would do better.
    tasks = [task("a", 60, at(0, 17)), task("b", 60, at(0, 10))]
    a_block = Block("a", at(0, 9), at(0, 10))
    found = place_one(problem(tasks, [(at(0, 9), at(0, 10))]), [a_block], "b", budget_s=1.0)
    assert found.blocks == (a_block,) and found.missing == {"b": 60}


def test_a_task_with_no_other_placement_left_is_opaque() -> None:
    tight = problem([task("tight", 420, at(0, 17)), task("loose", 60, at(4, 17))], [])
    result = plan(tight, budget_s=1.0)
    assert opaque_tasks(tight, result.blocks) == {"tight"}


def test_the_same_inputs_give_the_same_plan() -> None:
    tasks = [task(f"t{i}", 90 + 15 * i, at(i % 5, 17)) for i in range(6)]
    p = problem(tasks, [(at(1, 10), at(1, 12)), (at(3, 13), at(3, 15))])
    assert plan(p, budget_s=1.0) == plan(p, budget_s=1.0)


def test_the_budget_is_the_services_setting() -> None:
    settings = Settings.model_validate({"CALAGENT_PLAN_BUDGET_S": "0.5"})
    assert CommandConfig.from_settings(settings).plan_budget_s == 0.5
    assert CommandConfig.from_settings(Settings()).plan_budget_s == 2.0
