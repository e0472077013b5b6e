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

`greedy` places tasks earliest due first, then by priority, each in its earliest windows. `solve`
improves on it with OR-Tools CP-SAT (optional intervals, no-overlap with the time each kind may not
use, starts bounded by `earliest` and ends by `due`, chunks allowed absent), seeded with the
greedy plan; `plan` keeps the better of the two by `score` (more minutes placed, then blocks
ending earlier), and does not call the solver when greedy already places every minute. `replan` keeps as many of the current blocks as it can (fewest moved) while
placing as many minutes as a fresh plan would. CP-SAT runs with one worker, a fixed seed and a
deterministic time limit scaled to the model (`deterministic_limit`), so a rerun gives the same
answer within the budget; the wall-clock limit (the budget) is only a guard.

Blocks that should show busy are `opaque_tasks`': a task that could not be placed whole outside
every current block (its own too) before its due has no other placement left.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from ortools.sat.python import cp_model

from calagent.commands.domain.freetime import Person, Span, Week, common_free, merge, subtract

STEP_MINUTES = 15
STEP = timedelta(minutes=STEP_MINUTES)
EPOCH = datetime(2000, 1, 3, tzinfo=UTC)  # a Monday midnight: steps are counted on its grid
Hours = Literal["work", "personal"]
Solver = Literal["greedy", "cp-sat"]
# CP-SAT stops after a deterministic amount of work (the same on every run, so the same plan). Its
# deterministic clock runs slower than the wall clock the more intervals the model has: measured
# on this kind of machine (2 shared cores), one deterministic second of search costs about
# `WALL_S_PER_DETERMINISTIC_S_PER_INTERVAL` wall seconds per interval (7 s at 55 intervals, 50 s at
# 530). The deterministic limit is scaled so the search takes `WALL_SHARE` of the budget, leaving
# the rest for building the model and for a busier machine; the wall clock stops it at the budget
# only as a guard (a machine far slower), the one case where a rerun may differ.
WALL_S_PER_DETERMINISTIC_S_PER_INTERVAL = 0.12
WALL_SHARE = 0.5
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
class _Task:
    """A task on the step grid: its size, its chunk bounds and the steps it may use."""

    spec: TaskSpec
    size: int
    cmin: int
    cmax: int
    lo: int
    hi: int


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
        tasks.append(_Task(spec=spec, size=size, cmin=cmin, cmax=cmax, lo=lo, hi=hi))
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
            take = min(need, task.cmax, room)
            if 0 < need - take < task.cmin:
                take = need - task.cmin  # leave a remainder that can still be a chunk
            if take < task.cmin or room <= 0:
                break
            chunks.append((cursor, cursor + take))
            need -= take
            cursor += take + 1
        if need == 0:
            break
    return chunks


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


def deterministic_limit(budget_s: float, intervals: int) -> float:
    """The deterministic time CP-SAT may search for: `WALL_SHARE` of the budget in wall time on
    this kind of machine, for a model of `intervals` intervals."""
    return budget_s * WALL_SHARE / (WALL_S_PER_DETERMINISTIC_S_PER_INTERVAL * max(intervals, 1))


def _solve(
    grid: _Grid,
    budget_s: float,
    *,
    hint: Mapping[str, Sequence[tuple[int, int]]],
    keep: Mapping[str, Sequence[tuple[int, int]]] | None = None,
) -> dict[str, list[tuple[int, int]]] | None:
    """CP-SAT: each task has optional chunks; with `keep` (re-planning), each current block is an
    optional fixed interval, and the objective is minutes placed first, then fewest blocks not
    kept; otherwise minutes placed first, then the sum of chunk ends.

    The model counts steps from the horizon's start (`grid.origin`), not from `EPOCH`: small
    domains and objective coefficients make its presolve and relaxation several times faster."""
    o = grid.origin
    span = grid.horizon - o
    model = cp_model.CpModel()
    forbidden: dict[str, list[cp_model.IntervalVar]] = {}
    for kind in {t.spec.hours for t in grid.tasks}:
        windows = grid.free.get(kind, ())
        gaps: list[tuple[int, int]] = []
        cursor = o
        for a, b in windows:
            if a > cursor:
                gaps.append((cursor, a))
            cursor = max(cursor, b)
        if cursor < grid.horizon:
            gaps.append((cursor, grid.horizon))
        forbidden[kind] = [model.new_fixed_size_interval_var(a - o, b - a, f"no_{kind}_{a}") for a, b in gaps]

    everyone: list[cp_model.IntervalVar] = []
    by_kind: dict[str, list[cp_model.IntervalVar]] = {k: list(v) for k, v in forbidden.items()}
    placed_terms: list[cp_model.LinearExprT] = []
    end_terms: list[cp_model.IntVar] = []
    kept_bools: list[cp_model.IntVar] = []
    variables: dict[str, list[tuple[cp_model.IntVar, cp_model.IntVar, cp_model.IntVar]]] = {}
    kept_vars: dict[str, list[tuple[cp_model.IntVar, tuple[int, int]]]] = {}
    n_kept = sum(len(v) for v in (keep or {}).values())
    for t in grid.tasks:
        tid = t.spec.id
        lo, hi = max(t.lo - o, 0), max(t.hi - o, 0)
        padded: list[cp_model.IntervalVar] = []  # [start, end + 1): a step between a task's own chunks
        task_sizes: list[cp_model.LinearExprT] = []
        kept_vars[tid] = []
        for a, b in (keep or {}).get(tid, ()):
            k = model.new_bool_var(f"keep_{tid}_{a}")
            if not (a >= t.lo and b <= t.hi):
                model.add(k == 0)
                kept_vars[tid].append((k, (a, b)))
                continue
            iv = model.new_optional_fixed_size_interval_var(a - o, b - a, k, f"kept_{tid}_{a}")
            padded.append(model.new_optional_fixed_size_interval_var(a - o, b - a + 1, k, f"kpad_{tid}_{a}"))
            everyone.append(iv)
            by_kind[t.spec.hours].append(iv)
            task_sizes.append((b - a) * k)
            kept_bools.append(k)
            kept_vars[tid].append((k, (a, b)))
        count = 0 if hi - lo < t.cmin else min(math.ceil(t.size / t.cmin), 16)
        variables[tid] = []
        previous: tuple[cp_model.IntVar, cp_model.IntVar] | None = None
        for c in range(count):
            p = model.new_bool_var(f"p_{tid}_{c}")
            start = model.new_int_var(0, hi, f"s_{tid}_{c}")
            size = model.new_int_var(0, t.cmax, f"z_{tid}_{c}")
            end = model.new_int_var(0, hi, f"e_{tid}_{c}")
            iv = model.new_optional_interval_var(start, size, end, p, f"i_{tid}_{c}")
            pad_end = model.new_int_var(0, hi + 1, f"pe_{tid}_{c}")
            model.add(pad_end == end + 1)
            padded.append(model.new_optional_interval_var(start, size + 1, pad_end, p, f"pad_{tid}_{c}"))
            model.add(start >= lo).only_enforce_if(p)
            model.add(size >= t.cmin).only_enforce_if(p)
            model.add(start == 0).only_enforce_if(~p)
            model.add(size == 0).only_enforce_if(~p)
            if previous is not None:
                prev_p, prev_end = previous
                model.add_implication(p, prev_p)
                model.add(start >= prev_end + 1).only_enforce_if(p)
            previous = (p, end)
            everyone.append(iv)
            by_kind[t.spec.hours].append(iv)
            task_sizes.append(size)
            end_terms.append(end)
            variables[tid].append((p, start, size))
        model.add_no_overlap(padded)
        model.add(sum(task_sizes) <= t.size)
        placed_terms.extend(task_sizes)
    if len(by_kind) > 1:
        model.add_no_overlap(everyone)  # with one kind, its own no-overlap already says this
    for intervals in by_kind.values():
        model.add_no_overlap(intervals)

    placed = cp_model.LinearExpr.sum(placed_terms)
    if keep is not None:
        model.maximize((n_kept + 1) * placed + cp_model.LinearExpr.sum(kept_bools))
    else:
        weight = len(end_terms) * (span + 1) + 1
        model.maximize(weight * placed - cp_model.LinearExpr.sum(end_terms))

    for tid, triples in variables.items():
        kept_here = {tuple(x) for x in (keep or {}).get(tid, ())}
        fresh = [c for c in hint.get(tid, ()) if tuple(c) not in kept_here]
        for k, span_ in kept_vars.get(tid, ()):
            model.add_hint(k, span_ in {tuple(c) for c in hint.get(tid, ())})
        for i, (p, start, size) in enumerate(triples):
            if i < len(fresh):
                model.add_hint(p, True)
                model.add_hint(start, fresh[i][0] - o)
                model.add_hint(size, fresh[i][1] - fresh[i][0])
            else:
                model.add_hint(p, False)
                model.add_hint(start, 0)
                model.add_hint(size, 0)

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = deterministic_limit(budget_s, len(everyone))
    solver.parameters.max_time_in_seconds = budget_s
    # Probing in presolve costs seconds of wall time on a model this size for almost no
    # deterministic time (so no limit would see it), and the precedence reasoning of no-overlap
    # slows every branch; neither helps these models.
    solver.parameters.cp_model_probing_level = 0
    solver.parameters.use_precedences_in_disjunctive_constraint = False
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    out: dict[str, list[tuple[int, int]]] = {}
    for tid, triples in variables.items():
        chunks = [
            (solver.value(start) + o, solver.value(start) + solver.value(size) + o)
            for p, start, size in triples
            if solver.boolean_value(p)
        ]
        chunks.extend(span_ for k, span_ in kept_vars.get(tid, ()) if solver.boolean_value(k))
        out[tid] = sorted(chunks)
    return out


def _chunks_of(plan_: Plan) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for b in plan_.blocks:
        out.setdefault(b.task_id, []).append((_index_up(b.start), _index_down(b.end)))
    return out


def solve(problem: Problem, budget_s: float, hint: Plan | None = None) -> Plan | None:
    """CP-SAT's plan within `budget_s`, seeded with `hint` (default: the greedy plan)."""
    grid = _grid(problem)
    if not grid.tasks:
        return Plan(blocks=(), missing={}, solver="cp-sat")
    seed = hint if hint is not None else greedy(problem)
    found = _solve(grid, budget_s, hint=_chunks_of(seed))
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
    free_steps = {k: [tuple(w) for w in v] for k, v in grid.free.items()}
    hint: dict[str, list[tuple[int, int]]] = {}
    taken: list[tuple[int, int]] = []
    for t in grid.tasks:  # keep what still fits, then fill the rest greedily
        still = [
            (a, b)
            for a, b in keep.get(t.spec.id, ())
            if a >= t.lo
            and b <= t.hi
            and any(wa <= a and b <= wb for wa, wb in free_steps.get(t.spec.hours, ()))
            and not any(a < tb and ta < b for ta, tb in taken)
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
    found = _solve(grid, budget_s, hint=hint, keep=keep)
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
