"""How the user's tasks lie in their time (contract §21): the free windows of each kind of hours
outside what their ordinary events keep busy (`freetime`, the one home of busy), the blocks
(events of kind `task_block`) from now on, and what each open task still misses before its due.
Read by placing (`service`) and by every read that shows tasks (`queries`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from calagent.commands.config import CommandConfig
from calagent.commands.domain.freetime import Span, person_of
from calagent.commands.domain.model import Event
from calagent.commands.domain.overlap import overlaps
from calagent.commands.domain.settings import StoredSettings
from calagent.commands.ports import UnitOfWork
from calagent.commands.reads import events_in
from calagent.commands.tasks.domain.placement import (
    DEFAULT_PERSONAL_WEEK,
    Block,
    Problem,
    TaskSpec,
    free_windows,
)
from calagent.contracts.tasks import BlockMove, TaskOut

# How far ahead a task with no due is placed, and the furthest any plan looks.
UNDATED_HORIZON = timedelta(days=28)
LONGEST_HORIZON = timedelta(days=92)


def minutes_of(event: Event) -> int:
    return int((event.end - event.start).total_seconds() // 60)


def left_minutes(task: TaskOut) -> int:
    """What is still to do, by how far along the task is."""
    return round(task.duration_minutes * (100 - task.percent) / 100)


def spec_of(task: TaskOut, minutes: int) -> TaskSpec:
    return TaskSpec(
        id=task.id,
        minutes=minutes,
        due=task.due,
        earliest=task.earliest,
        priority=task.priority,
        chunk_min=task.chunk_minutes,
        chunk_max=task.max_chunk_minutes,
        hours=task.hours,
    )


def as_block(event: Event) -> Block:
    assert event.task_id is not None
    return Block(event.task_id, event.start, event.end)


@dataclass(frozen=True)
class Layout:
    """The user's time from now to the horizon as placing reads it: the free windows of each kind
    of hours outside what their ordinary events keep busy, the blocks from now on, and the
    minutes each task has already had in blocks begun before now."""

    now: datetime
    end: datetime
    free: dict[str, tuple[Span, ...]]
    busy: tuple[Span, ...]
    blocks: tuple[Event, ...]
    begun: dict[str, int]

    def to_place(self, task: TaskOut) -> int:
        return max(0, left_minutes(task) - self.begun.get(task.id, 0))

    def problem(self, tasks: Iterable[TaskOut], free: dict[str, tuple[Span, ...]] | None = None) -> Problem:
        specs = tuple(spec_of(t, self.to_place(t)) for t in tasks)
        return Problem(tasks=specs, free=free or self.free, start=self.now, end=self.end)

    def blocks_of(self, task_id: str) -> list[Event]:
        return [b for b in self.blocks if b.task_id == task_id]

    def missing(self, task: TaskOut) -> int:
        """The minutes of an open task not in blocks clear of busy time before its due."""
        placed = sum(
            minutes_of(b)
            for b in self.blocks_of(task.id)
            if (task.due is None or b.end <= task.due)
            and not any(overlaps(b.start, b.end, s, e) for s, e in self.busy)
        )
        return max(0, self.to_place(task) - placed)


async def layout_of(
    uow: UnitOfWork,
    config: CommandConfig,
    user_id: str,
    tasks: Sequence[TaskOut],
    tz: ZoneInfo,
    now: datetime,
) -> Layout:
    """The user's time from now to the horizon the tasks' dues need."""
    dues = [t.due for t in tasks if t.due is not None]
    end = min(max([now + UNDATED_HORIZON, *dues]), now + LONGEST_HORIZON)
    saved = (await uow.settings.settings_of([user_id])).get(user_id, StoredSettings())
    found = await events_in(uow, user_id, now, end, incomplete_only=True)
    ordinary = [e for e in found if e.task_id is None]
    weeks = {"work": saved.week(config.working_hours), "personal": DEFAULT_PERSONAL_WEEK}
    person = person_of(ordinary, tz=tz, week=weeks["work"])
    # A tentative hold (a time proposed to someone) keeps its time from blocks too.
    busy = (*person.busy, *person.tentative)
    # A block under way keeps the rest of its time: no other block goes there.
    under_way = [(e.start, e.end) for e in found if e.task_id is not None and e.start < now]
    free = {
        kind: tuple(free_windows([*busy, *under_way], tz=tz, week=week, start=now, end=end))
        for kind, week in weeks.items()
    }
    begun: dict[str, int] = {}
    for block in await uow.tasks.blocks(user_id):
        if block.task_id is not None and block.start < now:
            begun[block.task_id] = begun.get(block.task_id, 0) + minutes_of(block)
    blocks = tuple(e for e in found if e.task_id is not None and e.start >= now)
    return Layout(now=now, end=end, free=free, busy=busy, blocks=blocks, begun=begun)


async def with_risk(
    uow: UnitOfWork,
    config: CommandConfig,
    user_id: str,
    tasks: Sequence[TaskOut],
    tz: ZoneInfo,
    now: datetime,
) -> list[TaskOut]:
    """The tasks, each open one `at_risk` by the minutes not in its blocks clear of busy time."""
    if not any(t.status == "open" for t in tasks):
        return list(tasks)
    layout = await layout_of(
        uow, config, user_id, await uow.tasks.list_tasks(user_id, open_only=True), tz, now
    )
    shown = []
    for t in tasks:
        short = layout.missing(t) if t.status == "open" else 0
        shown.append(t.model_copy(update={"at_risk": True, "missing_minutes": short}) if short else t)
    return shown


def moves_between(before: Sequence[Event], after: Sequence[Block], titles: dict[str, str]) -> list[BlockMove]:
    """The blocks of `before` not kept in `after` and the new ones, paired per task in time order
    (a block with no new place: removed; a new one with no old block: added)."""
    kept = set(after)
    gone = [b for b in before if as_block(b) not in kept]
    current = {as_block(b) for b in before}
    fresh = [b for b in after if b not in current]
    moves: list[BlockMove] = []
    for task_id in sorted({b.task_id for b in gone if b.task_id} | {b.task_id for b in fresh}):
        olds = sorted((b for b in gone if b.task_id == task_id), key=lambda b: b.start)
        news = sorted((b for b in fresh if b.task_id == task_id), key=lambda b: b.start)
        for i in range(max(len(olds), len(news))):
            old = olds[i] if i < len(olds) else None
            new = news[i] if i < len(news) else None
            moves.append(
                BlockMove(
                    task_id=task_id,
                    title=titles.get(task_id, ""),
                    block_id=old.id if old else None,
                    old_start=old.start if old else None,
                    old_end=old.end if old else None,
                    new_start=new.start if new else None,
                    new_end=new.end if new else None,
                )
            )
    return moves
