"""The user's tasks (contract §21): kept, changed and removed on `/v1/tasks` (the query path's
writes, like deleting a plan) and by the model's `add_task` / `complete_task`, each placed in the
user's free time as blocks — events of kind `task_block` (`events.task_id`).

Placing is `domain.placement`'s (greedy, then CP-SAT within `CALAGENT_PLAN_BUDGET_S`). Free time
is the user's hours for the task's kind (working hours from their settings; personal:
`DEFAULT_PERSONAL_WEEK`) minus what their ordinary events keep busy (`freetime`, the one home of
busy) and minus every other task's blocks; a task's own blocks never count against it. Placing or
re-placing one task moves another's blocks only where placing it alone would leave more unplaced
than greedy over all the open tasks (`placement.place_one`). A block is TRANSPARENT while its task could still
be placed elsewhere before its due and OPAQUE when not (`placement.opaque_tasks`), decided again
after every write to blocks and every write of events for a user with an open task
(`replans.Replans.after_write`): an event beside a block may take the only other room its task had.

A new or changed event that lands on blocks moves nothing: its re-plan is offered (`replans.py`).
Completing a task removes its blocks that start later than now. An open task whose minutes are not all in blocks clear of busy time is `at_risk` by the
minutes missing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from calagent.commands.config import CommandConfig
from calagent.commands.domain.changelog import ChangeContext
from calagent.commands.domain.model import Event
from calagent.commands.domain.timeutil import at_local, local_midnight, parse_hhmm
from calagent.commands.placing import Placing
from calagent.commands.ports import Store, UnitOfWork
from calagent.commands.tasks.domain.changes import apply_patch
from calagent.commands.tasks.domain.placement import opaque_tasks, place_one
from calagent.commands.tasks.time import Layout, as_block, layout_of, moves_between, with_risk
from calagent.commands.txn import Txn, error_result, new_id, query_error
from calagent.commands.views import event_out
from calagent.contracts.commands import AddTaskCommand, CommandResult, CompleteTaskCommand
from calagent.contracts.queries import QueryResult
from calagent.contracts.tasks import BlockMove, ListTasks, SaveTask, TaskFields, TaskOut
from calagent.runtime.clock import Clock

NOT_FOUND = "no task with that id"


class Tasks:
    def __init__(self, store: Store, config: CommandConfig, clock: Clock, placing: Placing) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self.placing = placing
        self.budget_s = config.plan_budget_s

    # ---- writing blocks ------------------------------------------------------------------------

    async def place(
        self,
        uow: UnitOfWork,
        user_id: str,
        task: TaskOut,
        tz: ZoneInfo,
        now: datetime,
        *,
        turn_id: str,
        calendar: str,
    ) -> tuple[BlockMove, ...]:
        """Place `task` afresh: its blocks from now on replaced by the plan of its minutes in the
        time no ordinary event and no other task's block holds. Others' blocks stay unless that
        leaves more unplaced than greedy over all the open tasks (`placement.place_one`); the
        moves of theirs are returned, for the caller to tell (§21: nothing moves silently)."""
        moved: tuple[BlockMove, ...] = ()
        open_tasks = await uow.tasks.list_tasks(user_id, open_only=True)
        layout = await layout_of(uow, self.config, user_id, open_tasks, tz, now)
        await uow.events.delete_events(user_id, [b.id for b in layout.blocks_of(task.id)])
        if task.status == "open":
            tasks = {t.id: t for t in open_tasks} | {task.id: task}
            others = [b for b in layout.blocks if b.task_id in tasks and b.task_id != task.id]
            found = place_one(
                layout.problem(tasks.values()), [as_block(b) for b in others], task.id, self.budget_s
            )
            titles = {t.id: t.title for t in tasks.values()}
            moves = moves_between(others, found.blocks, titles)
            current = {b.id: b for b in others}
            await self.write_moves(
                uow, user_id, moves, tz, current=current, titles=titles, calendar=calendar, turn_id=turn_id
            )
            moved = tuple(m for m in moves if m.task_id != task.id)
        await self.show_busy_when_needed(uow, user_id, tz, now)
        return moved

    async def write_moves(
        self,
        uow: UnitOfWork,
        user_id: str,
        moves: Sequence[BlockMove],
        tz: ZoneInfo,
        *,
        current: Mapping[str, Event],
        titles: Mapping[str, str],
        calendar: str,
        turn_id: str,
    ) -> None:
        """Blocks moved as `moves` say (`current`: the blocks they move, by id): one with no new
        time removed, one with no old block added."""
        for move in moves:
            old = current.get(move.block_id) if move.block_id else None
            if move.new_start is None or move.new_end is None:
                if old is not None:
                    await uow.events.delete_events(user_id, [old.id])
            elif old is not None:
                await uow.events.update_event(old.evolve(start=move.new_start, end=move.new_end))
            elif move.task_id in titles:
                event = Event(
                    id=new_id(),
                    user_id=user_id,
                    title=titles[move.task_id],
                    start=move.new_start,
                    end=move.new_end,
                    calendar=calendar,
                    tz=tz.key,
                    task_id=move.task_id,
                    transparent=True,
                )
                await uow.events.insert_event(event, turn_id=turn_id, key=None)

    async def show_busy_when_needed(self, uow: UnitOfWork, user_id: str, tz: ZoneInfo, now: datetime) -> None:
        """Every block from now on TRANSPARENT while its task could be placed elsewhere before its
        due, OPAQUE when it could not (contract §21)."""
        open_tasks = await uow.tasks.list_tasks(user_id, open_only=True)
        if open_tasks:
            layout = await layout_of(uow, self.config, user_id, open_tasks, tz, now)
            await self.show_busy_in(uow, user_id, open_tasks, layout)
        uow.effects.blocks_settled(user_id)

    async def show_busy_in(
        self, uow: UnitOfWork, user_id: str, open_tasks: Sequence[TaskOut], layout: Layout
    ) -> None:
        """`show_busy_when_needed` on the open tasks and the layout the caller read already."""
        with_blocks = [t for t in open_tasks if layout.blocks_of(t.id)]
        opaque = opaque_tasks(layout.problem(with_blocks), [as_block(b) for b in layout.blocks])
        for block in layout.blocks:
            transparent = block.task_id not in opaque
            if block.transparent != transparent:
                await uow.events.update_event(block.evolve(transparent=transparent))
        # Its own writes are blocks whose TRANSP it just decided: nothing is left to decide.
        uow.effects.blocks_settled(user_id)

    async def remove(self, uow: UnitOfWork, user_id: str, task_id: str, tz: ZoneInfo, now: datetime) -> None:
        """A task removed takes every block of it along; the others' TRANSP is decided again, as
        the room they have left may have grown."""
        blocks = [b.id for b in await uow.tasks.blocks(user_id) if b.task_id == task_id]
        await uow.events.delete_events(user_id, blocks)
        await uow.tasks.delete_task(user_id, task_id)
        await self.show_busy_when_needed(uow, user_id, tz, now)

    async def free_later_blocks(self, uow: UnitOfWork, user_id: str, task_id: str, now: datetime) -> int:
        """A task done: its blocks not yet begun (starting now or later) are removed at once; the
        ones already begun stay as the time it took."""
        later = [b.id for b in await uow.tasks.blocks(user_id) if b.task_id == task_id and b.start >= now]
        return await uow.events.delete_events(user_id, later)

    async def default_calendar(self, uow: UnitOfWork, user_id: str, lang: str | None) -> str:
        return (await uow.settings.calendars(user_id, self.config.calendars.named_for(lang)))[0]

    # ---- the query path: /v1/tasks -------------------------------------------------------------

    async def list_tasks(self, query: ListTasks, tz: ZoneInfo) -> QueryResult:
        user_id = query.envelope.user_id
        async with self.store.unit_of_work() as uow:
            found = await uow.tasks.list_tasks(user_id, open_only=query.incomplete_only)
            shown = await with_risk(uow, self.config, user_id, found, tz, self.clock.now())
            return QueryResult(tasks=tuple(shown), db_ms=uow.db_ms)

    async def save_task(self, query: SaveTask, tz: ZoneInfo) -> QueryResult:
        env = query.envelope
        user_id = env.user_id
        now = self.clock.now()
        async with self.store.unit_of_work() as uow:
            # The blocks this writes are the client's change (contract §15), placed under the
            # user's lock like every write of their calendar: no two placements read the same gap.
            uow.changes.log_changes_as(ChangeContext(new_id(), "api", env.turn_id, now))
            await uow.lock_user(user_id)
            if query.op == "create":
                if query.fields is None:
                    return query_error("invalid_arguments", "a new task needs its fields")
                task = new_task(query.fields)
                await uow.tasks.insert_task(user_id, task, now)
            else:
                current = {t.id: t for t in await uow.tasks.list_tasks(user_id)}.get(query.task_id or "")
                if current is None:
                    return query_error("not_found", NOT_FOUND)
                if query.op == "delete":
                    await self.remove(uow, user_id, current.id, tz, now)
                    await uow.commit()
                    return QueryResult(deleted=True, db_ms=uow.db_ms)
                task = patched(current, query, now)
                await uow.tasks.update_task(user_id, task, now)
            moved = await self.settle(uow, user_id, task, tz, now, turn_id=env.turn_id, lang=env.lang)
            [shown] = await with_risk(uow, self.config, user_id, [task], tz, now)
            await uow.commit()
            return QueryResult(tasks=(shown,), moved_blocks=moved, db_ms=uow.db_ms)

    async def settle(
        self,
        uow: UnitOfWork,
        user_id: str,
        task: TaskOut,
        tz: ZoneInfo,
        now: datetime,
        *,
        turn_id: str,
        lang: str | None,
    ) -> tuple[BlockMove, ...]:
        """After a task was written: an open one placed afresh, a done one's later blocks freed;
        the other tasks' blocks its placing moved."""
        if task.status == "done":
            await self.free_later_blocks(uow, user_id, task.id, now)
            await self.show_busy_when_needed(uow, user_id, tz, now)
            return ()
        calendar = await self.default_calendar(uow, user_id, lang)
        return await self.place(uow, user_id, task, tz, now, turn_id=turn_id, calendar=calendar)

    # ---- the model's tools (the writes table) --------------------------------------------------

    async def add_task(self, txn: Txn, command: AddTaskCommand) -> CommandResult:
        args = command.args
        due: datetime | None = None
        earliest: datetime | None = None
        if args.due is not None:
            day = await self.placing.resolve_day(txn, args.due)
            if isinstance(day, CommandResult):
                return day
            due = due_instant(day, args.due_time, txn.tz)
        if args.earliest is not None:
            first = await self.placing.resolve_day(txn, args.earliest)
            if isinstance(first, CommandResult):
                return first
            earliest = local_midnight(first, txn.tz)
        if due is not None and due <= txn.now:
            return error_result("invalid_time", "the due is already past")
        if due is not None and earliest is not None and due <= earliest:
            return error_result("invalid_arguments", "due must be after earliest")
        fields = TaskFields(
            title=args.title,
            duration_minutes=args.duration_minutes,
            due=due,
            earliest=earliest,
            priority=args.priority,
            chunk_minutes=args.chunk_minutes,
            max_chunk_minutes=args.max_chunk_minutes,
            hours=args.hours,
        )
        task = new_task(fields)
        uow = txn.uow
        await uow.tasks.insert_task(txn.user_id, task, txn.now)
        moved = await self.settle(
            uow, txn.user_id, task, txn.tz, txn.now, turn_id=txn.envelope.turn_id, lang=txn.envelope.lang
        )
        return await self.task_result(txn, task, "created", moved)

    async def complete_task(self, txn: Txn, command: CompleteTaskCommand) -> CommandResult:
        uow = txn.uow
        current = {t.id: t for t in await uow.tasks.list_tasks(txn.user_id)}.get(command.task_id)
        if current is None:
            return error_result("not_found", NOT_FOUND)
        task = current.model_copy(update={"status": "done", "percent": 100, "completed_at": txn.now})
        await uow.tasks.update_task(txn.user_id, task, txn.now)
        moved = await self.settle(
            uow, txn.user_id, task, txn.tz, txn.now, turn_id=txn.envelope.turn_id, lang=txn.envelope.lang
        )
        return await self.task_result(txn, task, "updated", moved)

    async def task_result(
        self,
        txn: Txn,
        task: TaskOut,
        status: Literal["created", "updated"],
        moved: tuple[BlockMove, ...],
    ) -> CommandResult:
        """The task as it now is (at risk or not), its blocks from now on and the other tasks'
        blocks placing it moved, for the receipt."""
        [shown] = await with_risk(txn.uow, self.config, txn.user_id, [task], txn.tz, txn.now)
        blocks = sorted(
            (
                b
                for b in await txn.uow.tasks.blocks(txn.user_id)
                if b.task_id == task.id and b.start >= txn.now
            ),
            key=lambda b: b.start,
        )
        return CommandResult(
            status=status,
            persisted=True,
            task=shown,
            blocks=tuple(event_out(b, txn.tz) for b in blocks),
            moved_blocks=moved,
        )


def new_task(fields: TaskFields) -> TaskOut:
    return TaskOut(id=new_id(), **fields.model_dump(), status="open", percent=0, completed_at=None)


def due_instant(day: date, due_time: str | None, tz: ZoneInfo) -> datetime:
    """A due day and time as an instant; a day with no time is due by its end."""
    if due_time is None:
        return local_midnight(day + timedelta(days=1), tz)
    return at_local(day, parse_hhmm(due_time), tz)


def patched(task: TaskOut, query: SaveTask, now: datetime) -> TaskOut:
    return task if query.patch is None else apply_patch(task, query.patch, now)
