"""`calagent bench plan`: how long placing tasks takes, greedy against the CP-SAT solver, for 10, 30
and 100 tasks over one to four weeks of a working calendar with meetings, and what a re-plan after
one new meeting on a block costs: its time and the blocks it moves (minimal move) against
re-running greedy from scratch. The calendars and tasks are drawn from a fixed seed, so two runs
measure the same problems."""

from __future__ import annotations

import random
import time as clock
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from calagent.commands.tasks.domain.placement import (
    Problem,
    TaskSpec,
    free_windows,
    greedy,
    moved,
    plan,
    replan,
    score,
)
from calagent.runtime.settings import Settings

MONDAY = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)
WEEK = {d: (time(9), time(18)) for d in range(1, 6)}
SIZES = ((10, 1), (10, 4), (30, 1), (30, 2), (100, 2), (100, 4))


@dataclass(frozen=True)
class Row:
    tasks: int
    weeks: int
    greedy_ms: float
    solver_ms: float
    greedy_minutes: int
    plan_minutes: int
    kept: str
    replan_ms: float
    replan_minutes: int
    replan_moved: int
    greedy_replan_minutes: int
    greedy_moved: int
    blocks: int


def problem_of(
    rng: random.Random, n_tasks: int, weeks: int, busy: list[tuple[datetime, datetime]]
) -> Problem:
    end = MONDAY + timedelta(weeks=weeks)
    free = free_windows(busy, tz=ZoneInfo("UTC"), week=WEEK, start=MONDAY, end=end)
    tasks = []
    for i in range(n_tasks):
        due_day = rng.randrange(1, weeks * 7 + 1)
        chunk_min = rng.choice([30, 60])
        tasks.append(
            TaskSpec(
                id=f"t{i:03d}",
                minutes=30 * rng.randint(1, 12),
                due=MONDAY + timedelta(days=due_day, hours=-6),
                earliest=None,
                priority=rng.randint(1, 4),
                chunk_min=chunk_min,
                chunk_max=max(chunk_min, rng.choice([60, 120, 180])),
                hours="work",
            )
        )
    return Problem(tasks=tuple(tasks), free={"work": tuple(free)}, start=MONDAY, end=end)


def meetings(rng: random.Random, weeks: int) -> list[tuple[datetime, datetime]]:
    busy = []
    for day in range(weeks * 7):
        for _ in range(rng.randint(0, 4)):
            start = MONDAY + timedelta(days=day, hours=9, minutes=30 * rng.randrange(0, 17))
            busy.append((start, start + timedelta(minutes=30 * rng.randint(1, 4))))
    return busy


def measure(n_tasks: int, weeks: int, budget_s: float, seed: int = 34) -> Row:
    rng = random.Random(f"{seed}-{n_tasks}-{weeks}")
    busy = meetings(rng, weeks)
    problem = problem_of(rng, n_tasks, weeks, busy)
    t0 = clock.perf_counter()
    first = greedy(problem)
    t1 = clock.perf_counter()
    best = plan(problem, budget_s)
    t2 = clock.perf_counter()
    replan_ms, replan_moved, greedy_moved = 0.0, 0, 0
    replan_minutes, greedy_replan_minutes = 0, 0
    if best.blocks:
        hit = best.blocks[rng.randrange(len(best.blocks))]
        after = problem_of(
            random.Random(f"{seed}-{n_tasks}-{weeks}-tasks"), 0, weeks, [*busy, (hit.start, hit.end)]
        )
        after = Problem(tasks=problem.tasks, free=after.free, start=problem.start, end=problem.end)
        t3 = clock.perf_counter()
        again = replan(after, best.blocks, budget_s)
        replan_ms = (clock.perf_counter() - t3) * 1000
        replan_moved = moved(best.blocks, again.blocks)
        scratch = greedy(after)
        greedy_moved = moved(best.blocks, scratch.blocks)
        replan_minutes, greedy_replan_minutes = again.placed_minutes, scratch.placed_minutes
    return Row(
        tasks=n_tasks,
        weeks=weeks,
        greedy_ms=(t1 - t0) * 1000,
        solver_ms=(t2 - t1) * 1000,
        greedy_minutes=first.placed_minutes,
        plan_minutes=best.placed_minutes,
        kept=best.solver if score(best) != score(first) else "greedy",
        replan_ms=replan_ms,
        replan_minutes=replan_minutes,
        replan_moved=replan_moved,
        greedy_replan_minutes=greedy_replan_minutes,
        greedy_moved=greedy_moved,
        blocks=len(best.blocks),
    )


def format_row(row: Row) -> str:
    return (
        f"{row.tasks:4d} tasks {row.weeks}w  greedy {row.greedy_ms:7.1f} ms {row.greedy_minutes:6d} min"
        f"  plan {row.solver_ms:7.1f} ms {row.plan_minutes:6d} min ({row.kept})"
        f"  re-plan {row.replan_ms:7.1f} ms {row.replan_minutes:6d} min moves {row.replan_moved}/{row.blocks}"
        f" (greedy from scratch {row.greedy_replan_minutes} min, {row.greedy_moved} moves)"
    )


def run_plan_bench(args: Any, sizes: tuple[tuple[int, int], ...] = SIZES) -> int:
    budget = getattr(args, "budget", None)
    if budget is None:
        budget = Settings().plan_budget_s
    print(f"calagent bench plan: budget {budget:g} s (CALAGENT_PLAN_BUDGET_S), one worker, fixed seed")
    for n_tasks, weeks in sizes:
        print(format_row(measure(n_tasks, weeks, budget)), flush=True)
    return 0
