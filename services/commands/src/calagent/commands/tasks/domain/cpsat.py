"""The constraint model that improves a task plan (contract §21): OR-Tools CP-SAT over time counted
in steps (`placement` builds the step problem and reads the answer back).

Each task has optional chunks (at most `MAX_CHUNKS`, each absent or `cmin`…`cmax` steps, in time
order, a step apart) inside [lo, hi), never over the time its kind of hours may not use nor over
another task's chunk. Re-planning adds each current block as an optional fixed interval (`keep`).
The objective is minutes placed first, then fewest current blocks not kept (re-planning) or the
sum of chunk ends (a fresh plan). The search is seeded with a plan (`hint`).

The model counts steps from the horizon's start (`StepProblem.origin`), not from the grid's epoch:
small domains and objective coefficients make its presolve and relaxation several times faster.
CP-SAT runs with one worker, a fixed seed and a deterministic time limit scaled to the model
(`deterministic_limit`), so a rerun gives the same answer within the budget; the wall-clock limit
(the budget) is only a guard."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

# CP-SAT stops after a deterministic amount of work (the same on every run, so the same plan). Its
# deterministic clock runs slower than the wall clock, the more so the more intervals the model
# has: measured on this kind of machine (2 cores shared with others, presolve included), one
# deterministic second costs at worst about `WALL_S_PER_DETERMINISTIC_S` plus
# `WALL_S_PER_DETERMINISTIC_S_PER_INTERVAL` per interval of wall time (12 s at 56 intervals, 72 s at
# 1,100). The deterministic limit is scaled so the search takes `WALL_SHARE` of the budget at that
# worst, leaving the rest for building the model and a busier machine; the wall clock stops it at
# the budget only as a guard (a machine far slower), the one case where a rerun may differ.
WALL_S_PER_DETERMINISTIC_S = 10.0
WALL_S_PER_DETERMINISTIC_S_PER_INTERVAL = 0.07
WALL_SHARE = 0.3
MAX_CHUNKS = 16

Steps = tuple[int, int]
Chunks = Mapping[str, Sequence[Steps]]


@dataclass(frozen=True)
class StepTask:
    """A task on the step grid: its size, its chunk bounds and the steps [lo, hi) it may use."""

    id: str
    hours: str
    size: int
    cmin: int
    cmax: int
    lo: int
    hi: int


@dataclass(frozen=True)
class StepProblem:
    origin: int
    horizon: int
    tasks: tuple[StepTask, ...]
    free: Mapping[str, tuple[Steps, ...]]


def deterministic_limit(budget_s: float, intervals: int) -> float:
    """The deterministic time CP-SAT may search for: `WALL_SHARE` of the budget in wall time on
    this kind of machine, for a model of `intervals` intervals."""
    wall_per_unit = WALL_S_PER_DETERMINISTIC_S + WALL_S_PER_DETERMINISTIC_S_PER_INTERVAL * intervals
    return budget_s * WALL_SHARE / wall_per_unit


@dataclass
class _Chunk:
    present: cp_model.IntVar
    start: cp_model.IntVar
    size: cp_model.IntVar
    end: cp_model.IntVar


@dataclass
class _Model:
    """The model as it is built: every task's intervals, and the terms of the objective."""

    problem: StepProblem
    cp: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    everyone: list[cp_model.IntervalVar] = field(default_factory=list)
    by_kind: dict[str, list[cp_model.IntervalVar]] = field(default_factory=dict)
    intervals: int = 0
    placed: list[cp_model.LinearExprT] = field(default_factory=list)
    ends: list[cp_model.IntVar] = field(default_factory=list)
    kept: dict[str, list[tuple[cp_model.IntVar, Steps]]] = field(default_factory=dict)
    chunks: dict[str, list[_Chunk]] = field(default_factory=dict)

    def at(self, step: int) -> int:
        return step - self.problem.origin

    def add(self, task: StepTask, interval: cp_model.IntervalVar) -> None:
        self.everyone.append(interval)
        self.by_kind.setdefault(task.hours, []).append(interval)


def _forbid_closed_time(m: _Model) -> None:
    """Per kind of hours, fixed intervals over the time outside its free windows."""
    p = m.problem
    for kind in sorted({t.hours for t in p.tasks}):
        cursor = p.origin
        gaps: list[Steps] = []
        for a, b in p.free.get(kind, ()):
            if a > cursor:
                gaps.append((cursor, a))
            cursor = max(cursor, b)
        if cursor < p.horizon:
            gaps.append((cursor, p.horizon))
        closed = m.by_kind.setdefault(kind, [])
        closed.extend(m.cp.new_fixed_size_interval_var(m.at(a), b - a, f"no_{kind}_{a}") for a, b in gaps)
        m.intervals += len(gaps)


def _keep_current(
    m: _Model, task: StepTask, spans: Sequence[Steps], padded: list[cp_model.IntervalVar]
) -> None:
    """Each current block of `task` as an optional fixed interval; one past its bounds cannot stay."""
    m.kept[task.id] = []
    for a, b in spans:
        keep = m.cp.new_bool_var(f"keep_{task.id}_{a}")
        m.kept[task.id].append((keep, (a, b)))
        if not (a >= task.lo and b <= task.hi):
            m.cp.add(keep == 0)
            continue
        m.add(task, m.cp.new_optional_fixed_size_interval_var(m.at(a), b - a, keep, f"kept_{task.id}_{a}"))
        padded.append(
            m.cp.new_optional_fixed_size_interval_var(m.at(a), b - a + 1, keep, f"kpad_{task.id}_{a}")
        )
        m.placed.append((b - a) * keep)


def _add_chunks(m: _Model, task: StepTask, padded: list[cp_model.IntervalVar]) -> None:
    """The task's optional chunks, present ones first and in time order, a step apart."""
    lo, hi = max(m.at(task.lo), 0), max(m.at(task.hi), 0)
    count = 0 if hi - lo < task.cmin else min(math.ceil(task.size / task.cmin), MAX_CHUNKS)
    m.chunks[task.id] = []
    cp = m.cp
    for c in range(count):
        name = f"{task.id}_{c}"
        chunk = _Chunk(
            cp.new_bool_var(f"p_{name}"),
            cp.new_int_var(0, hi, f"s_{name}"),
            cp.new_int_var(0, task.cmax, f"z_{name}"),
            cp.new_int_var(0, hi, f"e_{name}"),
        )
        m.add(
            task, cp.new_optional_interval_var(chunk.start, chunk.size, chunk.end, chunk.present, f"i_{name}")
        )
        pad_end = cp.new_int_var(0, hi + 1, f"pe_{name}")
        cp.add(pad_end == chunk.end + 1)
        padded.append(
            cp.new_optional_interval_var(chunk.start, chunk.size + 1, pad_end, chunk.present, f"pad_{name}")
        )
        cp.add(chunk.start >= lo).only_enforce_if(chunk.present)
        cp.add(chunk.size >= task.cmin).only_enforce_if(chunk.present)
        cp.add(chunk.start == 0).only_enforce_if(~chunk.present)
        cp.add(chunk.size == 0).only_enforce_if(~chunk.present)
        if m.chunks[task.id]:
            previous = m.chunks[task.id][-1]
            cp.add_implication(chunk.present, previous.present)
            cp.add(chunk.start >= previous.end + 1).only_enforce_if(chunk.present)
        m.chunks[task.id].append(chunk)
        m.placed.append(chunk.size)
        m.ends.append(chunk.end)


def _add_task(m: _Model, task: StepTask, keep: Chunks | None) -> None:
    """A task's intervals: its own never touch (each padded by a step), and add up to its size."""
    padded: list[cp_model.IntervalVar] = []
    first = len(m.placed)
    _keep_current(m, task, (keep or {}).get(task.id, ()), padded)
    _add_chunks(m, task, padded)
    m.cp.add_no_overlap(padded)
    m.intervals += len(padded)
    m.cp.add(sum(m.placed[first:]) <= task.size)


def _set_objective(m: _Model, re_planning: bool) -> None:
    placed = cp_model.LinearExpr.sum(m.placed)
    if re_planning:
        kept = [k for spans in m.kept.values() for k, _ in spans]
        m.cp.maximize((len(kept) + 1) * placed + cp_model.LinearExpr.sum(kept))
    else:
        span = m.problem.horizon - m.problem.origin
        weight = len(m.ends) * (span + 1) + 1
        m.cp.maximize(weight * placed - cp_model.LinearExpr.sum(m.ends))


def _seed(m: _Model, hint: Chunks, keep: Chunks | None) -> None:
    """The search starts from `hint`: its spans that are current blocks kept, the rest as chunks."""
    for tid, chunks in m.chunks.items():
        hinted = {tuple(c) for c in hint.get(tid, ())}
        current = {tuple(x) for x in (keep or {}).get(tid, ())}
        fresh = [c for c in hint.get(tid, ()) if tuple(c) not in current]
        for k, span in m.kept.get(tid, ()):
            m.cp.add_hint(k, span in hinted)
        for i, chunk in enumerate(chunks):
            there = i < len(fresh)
            m.cp.add_hint(chunk.present, there)
            m.cp.add_hint(chunk.start, m.at(fresh[i][0]) if there else 0)
            m.cp.add_hint(chunk.size, fresh[i][1] - fresh[i][0] if there else 0)


def _search(m: _Model, budget_s: float) -> dict[str, list[Steps]] | None:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = deterministic_limit(budget_s, m.intervals)
    solver.parameters.max_time_in_seconds = budget_s
    # Probing in presolve costs seconds of wall time on a model this size for almost no
    # deterministic time (so no limit would see it), and the precedence reasoning of no-overlap
    # slows every branch; neither helps these models.
    solver.parameters.cp_model_probing_level = 0
    solver.parameters.use_precedences_in_disjunctive_constraint = False
    if solver.solve(m.cp) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    o = m.problem.origin
    out: dict[str, list[Steps]] = {}
    for tid, chunks in m.chunks.items():
        found = [
            (solver.value(c.start) + o, solver.value(c.start) + solver.value(c.size) + o)
            for c in chunks
            if solver.boolean_value(c.present)
        ]
        found.extend(span for k, span in m.kept.get(tid, ()) if solver.boolean_value(k))
        out[tid] = sorted(found)
    return out


def improve(
    problem: StepProblem, budget_s: float, *, hint: Chunks, keep: Chunks | None = None
) -> dict[str, list[Steps]] | None:
    """CP-SAT's chunks per task within `budget_s`, seeded with `hint`; with `keep` (re-planning),
    as many current blocks kept as placing the most minutes allows. None: nothing found in time."""
    m = _Model(problem)
    _forbid_closed_time(m)
    for task in problem.tasks:
        _add_task(m, task, keep)
    m.intervals += len(m.everyone)
    if len(m.by_kind) > 1:
        m.cp.add_no_overlap(m.everyone)  # with one kind, its own no-overlap already says this
    for intervals in m.by_kind.values():
        m.cp.add_no_overlap(intervals)
    _set_objective(m, keep is not None)
    _seed(m, hint, keep)
    return _search(m, budget_s)
