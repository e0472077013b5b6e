"""Placing tasks in free time (contract §21). Pure: the same problem and budget give the same plan.

A task is placed as blocks (chunks) of at least `chunk_min` and at most `chunk_max` minutes, inside
the free windows of its kind of hours (working hours minus busy time, read by `freetime` — the one
home of what busy and free mean), not before `earliest` nor the start of the horizon, ending by
its `due`. Two blocks of one task never touch (at least one step lies between them, so a
`chunk_max` means what it says); blocks of different tasks never overlap. A task whose minutes do
not all fit is placed as far as it fits and reported `missing` those minutes (at risk): nothing is
ever placed after its due.

Time is counted in steps of `STEP_MINUTES` from the horizon's start rounded up to a step (every
zone's offset is a whole number of quarter hours, so a step boundary in UTC is one on the wall
clock); task and chunk minutes are rounded up to whole steps.

`greedy` places tasks earliest due first, then by priority, each in its earliest windows in chunks
as long as its bounds and the room allow. `solve` improves on it with CP-SAT (`cpsat`), seeded with
the greedy plan; `plan` keeps the better of the two by `score` (more minutes placed, then blocks
ending earlier), and does not call the solver when greedy already places every minute. `replan`
keeps as many of the current blocks as it can (fewest moved) while placing as many minutes as it
can. `place_one` places one task among the others' blocks and moves them only when that alone
would leave more unplaced than greedy over all the tasks: the kept plan is never worse than greedy.

Blocks that should show busy are `opaque_tasks`': a task that could not be placed whole outside
every current block (its own too) before its due has no other placement left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from calagent.commands.domain.freetime import Person, Span, Week, common_free, merge, subtract
from calagent.commands.tasks.domain.cpsat import StepProblem, StepTask, improve

STEP_MINUTES = 15
STEP = timedelta(minutes=STEP_MINUTES)
EPOCH = datetime(2000, 1, 3, tzinfo=UTC)  # a Monday midnight: steps are counted on its grid
Hours = Literal["work", "personal"]
Solver = Literal["greedy", "cp-sat"]
# The hours a personal task may use when the user has set none: evenings, and weekend days.
DEFAULT_PERSONAL_WEEK: Week = {
    **{d: (time(19), time(22)) for d in range(1, 6)},
    **{d: (time(10), time(20)) for d in (6, 7)},
}


@dataclass(frozen=True)
class TaskSpec:
    id: str
    minutes: int  # what is still to place
    due: datetime | None
    earliest: datetime | None
    priority: int  # 1 (high) … 4
    chunk_min: int
    chunk_max: int
    hours: Hours


@dataclass(frozen=True, order=True)
class Block:
    task_id: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Problem:
    tasks: tuple[TaskSpec, ...]
    # Per kind of hours, the free windows (sorted, disjoint) a block of that kind may lie in.
    free: Mapping[str, tuple[Span, ...]]
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Plan:
    blocks: tuple[Block, ...]
    # Task id → minutes that found no place before its due (only tasks with some missing).
    missing: Mapping[str, int] = field(default_factory=dict)
    solver: Solver = "greedy"

    @property
    def placed_minutes(self) -> int:
        return sum(_minutes(b.end - b.start) for b in self.blocks)


def free_windows(
    busy: Iterable[Span], *, tz: ZoneInfo, week: Week, start: datetime, end: datetime
) -> list[Span]:
    """The time in [start, end) inside `week`'s hours (in `tz`) and outside every busy span."""
    return common_free([Person(tz=tz, week=week, busy=tuple(busy))], start, end)


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)


def _steps_up(minutes: int) -> int:
    return -(-minutes // STEP_MINUTES)


def _index_up(instant: datetime) -> int:
    return -(-(instant - EPOCH) // STEP)


def _index_down(instant: datetime) -> int:
    return (instant - EPOCH) // STEP


def _at(index: int) -> datetime:
    return EPOCH + index * STEP


@dataclass(frozen=True)
class _Task(StepTask):
    """A task on the step grid (what the solver reads), and the task as it was asked for."""

    spec: TaskSpec


@dataclass(frozen=True)
class _Grid:
    origin: int
    horizon: int
    tasks: tuple[_Task, ...]
    free: Mapping[str, tuple[tuple[int, int], ...]]


def _order_key(t: _Task) -> tuple[int, int, str]:
    return (t.hi, t.spec.priority, t.spec.id)


def _grid(problem: Problem) -> _Grid:
    origin = _index_up(problem.start)
    horizon = _index_down(problem.end)
    free: dict[str, tuple[tuple[int, int], ...]] = {}
    for kind, spans in problem.free.items():
        steps = [(_index_up(a), _index_down(b)) for a, b in spans]
        free[kind] = tuple(
            (max(a, origin), min(b, horizon)) for a, b in steps if min(b, horizon) > max(a, origin)
        )
    tasks = []
    for spec in problem.tasks:
        size = _steps_up(max(spec.minutes, 0))
        cmin = max(1, min(_steps_up(spec.chunk_min), size))
        cmax = max(cmin, _steps_up(spec.chunk_max))
        lo = origin if spec.earliest is None else max(origin, _index_up(spec.earliest))
        hi = horizon if spec.due is None else min(horizon, _index_down(spec.due))
        tasks.append(_Task(spec.id, spec.hours, size, cmin, cmax, lo, hi, spec=spec))
    tasks.sort(key=_order_key)
    return _Grid(origin=origin, horizon=horizon, tasks=tuple(tasks), free=free)


def _as_spans(steps: Iterable[tuple[int, int]]) -> list[Span]:
    return [(_at(a), _at(b)) for a, b in steps]


def _as_steps(spans: Iterable[Span]) -> list[tuple[int, int]]:
    return [(_index_up(a), _index_down(b)) for a, b in spans]


def _fill(
    task: _Task,
    windows: Sequence[tuple[int, int]],
    taken: Sequence[tuple[int, int]],
    need: int,
    own: Sequence[tuple[int, int]] = (),
) -> list[tuple[int, int]]:
    """The earliest chunks of `task` (at most `need` steps) in `windows` outside `taken`, keeping
    a step between its own chunks (`own`: chunks it already has)."""
    usable = _as_steps(
        subtract(
            merge(_as_spans((max(a, task.lo), min(b, task.hi)) for a, b in windows)),
            merge(_as_spans(taken)),
        )
    )
    chunks: list[tuple[int, int]] = []
    mine = sorted(own)
    for a, b in usable:
        cursor = a
        while need > 0:
            # One step away from any of the task's own chunks.
            for s, e in mine + chunks:
                if s - 1 <= cursor <= e:
                    cursor = e + 1
            room = b - cursor
            nxt = min((s - 1 for s, _ in mine if s - 1 >= cursor), default=b)
            room = min(room, nxt - cursor)
            # As long a chunk as the room and its bounds allow: a remainder shorter than a chunk
            # is left unplaced (CP-SAT may split better). Shortening a chunk to leave room for the
            # remainder was tried: it gave up whole windows, and placed one task whole in the time
            # a later one needed.
            take = min(need, task.cmax, room)
            if take < task.cmin or room <= 0:
                break
            chunks.append((cursor, cursor + take))
            need -= take
            cursor += take + 1
        if need == 0:
            break
    return chunks


def _fits(task: _Task, span: tuple[int, int], grid: _Grid) -> bool:
    """May `task` hold the steps `span` (inside its bounds and one free window of its kind)?"""
    a, b = span
    windows = grid.free.get(task.spec.hours, ())
    return a >= task.lo and b <= task.hi and any(wa <= a and b <= wb for wa, wb in windows)


def _for_solver(grid: _Grid) -> StepProblem:
    return StepProblem(origin=grid.origin, horizon=grid.horizon, tasks=grid.tasks, free=grid.free)


def _result(grid: _Grid, chunks: Mapping[str, Sequence[tuple[int, int]]], solver: Solver) -> Plan:
    blocks: list[Block] = []
    missing: dict[str, int] = {}
    for t in grid.tasks:
        own = sorted(chunks.get(t.spec.id, ()))
        blocks.extend(Block(t.spec.id, _at(a), _at(b)) for a, b in own)
        placed = sum(b - a for a, b in own) * STEP_MINUTES
        short = max(0, t.spec.minutes - placed)
        if short:
            missing[t.spec.id] = short
    blocks.sort(key=lambda b: (b.start, b.task_id))
    return Plan(blocks=tuple(blocks), missing=missing, solver=solver)


def greedy(problem: Problem) -> Plan:
    """Earliest due first (then priority, then id), each task in its earliest free chunks."""
    grid = _grid(problem)
    taken: list[tuple[int, int]] = []
    chunks: dict[str, list[tuple[int, int]]] = {}
    for t in grid.tasks:
        got = _fill(t, grid.free.get(t.spec.hours, ()), taken, t.size)
        chunks[t.spec.id] = got
        taken.extend(got)
    return _result(grid, chunks, "greedy")


def score(plan_: Plan) -> tuple[int, float]:
    """Better is more minutes placed, then blocks that end earlier."""
    ends = sum((b.end - EPOCH) / STEP for b in plan_.blocks)
    return (plan_.placed_minutes, -ends)


def _steps_of(block: Block) -> tuple[int, int]:
    return (_index_up(block.start), _index_down(block.end))


def _chunks_of(plan_: Plan) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for b in plan_.blocks:
        out.setdefault(b.task_id, []).append(_steps_of(b))
    return out


def solve(problem: Problem, budget_s: float, hint: Plan | None = None) -> Plan | None:
    """CP-SAT's plan within `budget_s`, seeded with `hint` (default: the greedy plan)."""
    grid = _grid(problem)
    if not grid.tasks:
        return Plan(blocks=(), missing={}, solver="cp-sat")
    seed = hint if hint is not None else greedy(problem)
    found = improve(_for_solver(grid), budget_s, hint=_chunks_of(seed))
    return None if found is None else _result(grid, found, "cp-sat")


def plan(problem: Problem, budget_s: float) -> Plan:
    """The better of the greedy plan and CP-SAT's (greedy on a tie)."""
    first = greedy(problem)
    if not first.missing or budget_s <= 0:
        return first  # nothing left to place: no plan places more
    improved = solve(problem, budget_s, hint=first) if budget_s > 0 else None
    return improved if improved is not None and score(improved) > score(first) else first


def moved(before: Iterable[Block], after: Iterable[Block]) -> int:
    """How many of the blocks `before` are not in `after` exactly (same task, start and end)."""
    kept = set(after)
    return sum(1 for b in before if b not in kept)


def replan(problem: Problem, current: Sequence[Block], budget_s: float) -> Plan:
    """A plan for `problem` that keeps as many `current` blocks as it can while placing as many
    minutes as it can (minimal move). Blocks no longer feasible (over new busy time, past a due)
    cannot be kept. Falls back to the better of greedy and a fresh plan only if CP-SAT finds
    nothing within the budget."""
    grid = _grid(problem)
    keep = _chunks_of(Plan(blocks=tuple(current)))
    hint: dict[str, list[tuple[int, int]]] = {}
    taken: list[tuple[int, int]] = []
    for t in grid.tasks:  # keep what still fits, then fill the rest greedily
        still = [
            (a, b)
            for a, b in keep.get(t.spec.id, ())
            if _fits(t, (a, b), grid) and not any(a < tb and ta < b for ta, tb in taken)
        ]
        taken.extend(still)
        hint[t.spec.id] = list(still)
    for t in grid.tasks:
        have = sum(b - a for a, b in hint[t.spec.id])
        more = _fill(t, grid.free.get(t.spec.hours, ()), taken, t.size - have, own=hint[t.spec.id])
        taken.extend(more)
        hint[t.spec.id].extend(more)
    fallback = _result(grid, hint, "greedy")
    if budget_s <= 0:
        return fallback
    found = improve(_for_solver(grid), budget_s, hint=hint, keep=keep)
    if found is None:
        return fallback
    solved = _result(grid, found, "cp-sat")
    return solved if solved.placed_minutes >= fallback.placed_minutes else fallback


def opaque_tasks(problem: Problem, blocks: Sequence[Block]) -> set[str]:
    """The tasks whose blocks must show busy: those that could not be placed whole anywhere else
    before their due (outside every current block, their own included)."""
    grid = _grid(problem)
    taken = [(_index_up(b.start), _index_down(b.end)) for b in blocks]
    opaque: set[str] = set()
    for t in grid.tasks:
        if not any(b.task_id == t.spec.id for b in blocks):
            continue
        elsewhere = _fill(t, grid.free.get(t.spec.hours, ()), taken, t.size)
        if sum(b - a for a, b in elsewhere) < t.size:
            opaque.add(t.spec.id)
    return opaque


def unplaced(plan_: Plan) -> int:
    return sum(plan_.missing.values())


def place_one(problem: Problem, current: Sequence[Block], task_id: str, budget_s: float) -> Plan:
    """The plan of every task of `problem` once `task_id` is placed among the `current` blocks of
    the others: the task in the room they leave, nothing else moving — unless that leaves more
    unplaced than greedy would over all the tasks together. Tasks placed one at a time, each the
    best for itself, can take the room a later one needed (one placed whole where greedy leaves it
    a quarter short pushes the next into the time a third needed); then the fewest-moves re-plan of
    them all is kept, never worse than greedy. While a block sits where it may no longer be (busy
    time landed on it), nothing else moves: that block waits for its own re-plan offer."""
    grid = _grid(problem)
    others = [b for b in current if b.task_id != task_id]
    room = {
        kind: tuple(subtract(list(spans), merge((b.start, b.end) for b in others)))
        for kind, spans in problem.free.items()
    }
    alone = Problem(
        tasks=tuple(t for t in problem.tasks if t.id == task_id),
        free=room,
        start=problem.start,
        end=problem.end,
    )
    placed = plan(alone, budget_s)
    kept = _result(grid, _chunks_of(Plan(blocks=(*others, *placed.blocks))), placed.solver)
    fresh = greedy(problem)
    by_id = {t.spec.id: t for t in grid.tasks}
    steady = all(b.task_id in by_id and _fits(by_id[b.task_id], _steps_of(b), grid) for b in others)
    if unplaced(kept) <= unplaced(fresh) or not steady:
        return kept
    moved_ = replan(problem, others, budget_s)
    return moved_ if unplaced(moved_) <= unplaced(fresh) else fresh
