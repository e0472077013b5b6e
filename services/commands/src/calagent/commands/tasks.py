"""The user's tasks (contract §21): kept, changed and removed on `/v1/tasks` (the query path's
writes, like deleting a plan) and by the model's `add_task` / `complete_task`, each placed in the
user's free time as blocks — events of kind `task_block` (`events.task_id`).

Placing is `domain.placement`'s (greedy, then CP-SAT within `CALAGENT_PLAN_BUDGET_S`). Free time
is the user's hours for the task's kind (working hours from their settings; personal:
`DEFAULT_PERSONAL_WEEK`) minus what their ordinary events keep busy (`freetime`, the one home of
busy) and minus every other task's blocks; a task's own blocks never count against it. Placing or
re-placing one task never moves another's blocks. A block is TRANSPARENT while its task could still
be placed elsewhere before its due and OPAQUE when not (`placement.opaque_tasks`), decided again
after every write to blocks and every write of events for a user with an open task (`after_write`):
an event beside a block may take the only other room its task had.

A new or changed event that lands on blocks moves nothing: the fewest-moves re-plan
(`placement.replan`) is held as one offer (kind `replan`) listing each block's old and new time,
applied only when the user confirms. Completing a task removes its blocks that start later than
now. An open task whose minutes are not all in blocks clear of busy time is `at_risk` by the
minutes missing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from calagent.commands.config import CommandConfig
from calagent.commands.domain.changelog import ChangeContext
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.overlap import event_span, keeps_time, overlaps
from calagent.commands.domain.payloads import HeldReplan
from calagent.commands.domain.pending import Ask
from calagent.commands.domain.placement import (
    Block,
    opaque_tasks,
    plan,
    replan,
)
from calagent.commands.domain.series import expand
from calagent.commands.domain.settings import StoredSettings
from calagent.commands.domain.task_changes import apply_patch
from calagent.commands.domain.timeutil import at_local, local_midnight, parse_hhmm
from calagent.commands.pending import BackgroundTxn, Pending, StubTxn
from calagent.commands.placing import Placing
from calagent.commands.ports import Store, UnitOfWork
from calagent.commands.queries import query_error
from calagent.commands.task_time import as_block, layout_of, with_risk
from calagent.commands.txn import Txn, error_result, new_id
from calagent.commands.views import event_out, stub_out
from calagent.contracts.commands import AddTaskCommand, CommandResult, CompleteTaskCommand
from calagent.contracts.queries import QueryResult
from calagent.contracts.tasks import BlockMove, ListTasks, ReplanOut, SaveTask, TaskFields, TaskOut
from calagent.runtime.clock import Clock

NOT_FOUND = "no task with that id"


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


class Tasks:
    def __init__(
        self, store: Store, config: CommandConfig, clock: Clock, pending: Pending, placing: Placing
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self.pending = pending
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
    ) -> None:
        """Place `task` afresh: its blocks from now on replaced by the plan of its minutes in the
        time no ordinary event and no other task's block holds. Others' blocks stay."""
        open_tasks = await uow.tasks.list_tasks(user_id, open_only=True)
        layout = await layout_of(uow, self.config, user_id, open_tasks, tz, now)
        await uow.events.delete_events(user_id, [b.id for b in layout.blocks_of(task.id)])
        if task.status == "open":
            found = plan(layout.problem([task], layout.free_for(task.id)), self.budget_s)
            for block in found.blocks:
                event = Event(
                    id=new_id(),
                    user_id=user_id,
                    title=task.title,
                    start=block.start,
                    end=block.end,
                    calendar=calendar,
                    tz=tz.key,
                    task_id=task.id,
                    transparent=True,
                )
                await uow.events.insert_event(event, turn_id=turn_id, key=None)
        await self.show_busy_when_needed(uow, user_id, tz, now)

    async def show_busy_when_needed(self, uow: UnitOfWork, user_id: str, tz: ZoneInfo, now: datetime) -> None:
        """Every block from now on TRANSPARENT while its task could be placed elsewhere before its
        due, OPAQUE when it could not (contract §21)."""
        open_tasks = await uow.tasks.list_tasks(user_id, open_only=True)
        if not open_tasks:
            return
        layout = await layout_of(uow, self.config, user_id, open_tasks, tz, now)
        with_blocks = [t for t in open_tasks if layout.blocks_of(t.id)]
        opaque = opaque_tasks(layout.problem(with_blocks), [as_block(b) for b in layout.blocks])
        for block in layout.blocks:
            transparent = block.task_id not in opaque
            if block.transparent != transparent:
                await uow.events.update_event(block.evolve(transparent=transparent))

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
            await self.settle(uow, user_id, task, tz, now, turn_id=env.turn_id, lang=env.lang)
            [shown] = await with_risk(uow, self.config, user_id, [task], tz, now)
            await uow.commit()
            return QueryResult(tasks=(shown,), db_ms=uow.db_ms)

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
    ) -> None:
        """After a task was written: an open one placed afresh, a done one's later blocks freed."""
        if task.status == "done":
            await self.free_later_blocks(uow, user_id, task.id, now)
            await self.show_busy_when_needed(uow, user_id, tz, now)
            return
        calendar = await self.default_calendar(uow, user_id, lang)
        await self.place(uow, user_id, task, tz, now, turn_id=turn_id, calendar=calendar)

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
        await self.settle(
            uow, txn.user_id, task, txn.tz, txn.now, turn_id=txn.envelope.turn_id, lang=txn.envelope.lang
        )
        txn.blocks_shown = True
        return await self.task_result(txn, task, "created")

    async def complete_task(self, txn: Txn, command: CompleteTaskCommand) -> CommandResult:
        uow = txn.uow
        current = {t.id: t for t in await uow.tasks.list_tasks(txn.user_id)}.get(command.task_id)
        if current is None:
            return error_result("not_found", NOT_FOUND)
        task = current.model_copy(update={"status": "done", "percent": 100, "completed_at": txn.now})
        await uow.tasks.update_task(txn.user_id, task, txn.now)
        await self.settle(
            uow, txn.user_id, task, txn.tz, txn.now, turn_id=txn.envelope.turn_id, lang=txn.envelope.lang
        )
        txn.blocks_shown = True
        return await self.task_result(txn, task, "updated")

    async def task_result(
        self, txn: Txn, task: TaskOut, status: Literal["created", "updated"]
    ) -> CommandResult:
        """The task as it now is (at risk or not) and its blocks from now on, for the receipt."""
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
            status=status, persisted=True, task=shown, blocks=tuple(event_out(b, txn.tz) for b in blocks)
        )

    # ---- re-planning when something lands on blocks --------------------------------------------

    async def offer_replan(
        self, txn: StubTxn, landed: Sequence[Event], *, from_outside: bool = False
    ) -> Stub | None:
        """Events just written (`landed`) meet blocks: the fewest-moves re-plan, held as one offer
        (nothing moves now); None when they meet none or no block can move. `from_outside` (a
        sync): it never ends the user's pending request, it waits beside it."""
        hitting = [e for e in landed if e.task_id is None and keeps_time(e)]
        uow = txn.uow
        if not hitting or not uow.has_open_tasks:
            return None
        open_tasks = await uow.tasks.list_tasks(txn.user_id, open_only=True)
        if not open_tasks:
            return None
        layout = await layout_of(uow, self.config, txn.user_id, open_tasks, txn.tz, txn.now)
        # A series lands wherever any of its occurrences does, not only its first: each one up to
        # the blocks' horizon, expanded as every read expands them.
        spans = [event_span(e, txn.tz) for e in expand(hitting, layout.now, layout.end)]
        if not any(overlaps(b.start, b.end, *span) for span in spans for b in layout.blocks):
            return None
        # Less room is left: a block whose task now has no other place turns busy (no block moves).
        await self.show_busy_when_needed(uow, txn.user_id, txn.tz, txn.now)
        txn.blocks_shown = True
        with_blocks = [t for t in open_tasks if layout.blocks_of(t.id)]
        found = replan(layout.problem(with_blocks), [as_block(b) for b in layout.blocks], self.budget_s)
        titles = {t.id: t.title for t in open_tasks}
        moves = moves_between(layout.blocks, found.blocks, titles)
        if not moves:
            return None
        missing = tuple((titles[tid], minutes) for tid, minutes in sorted(found.missing.items()))
        offer = ReplanOut(moves=tuple(moves), missing=missing)
        names = "、".join(dict.fromkeys(m.title for m in moves))
        ask = Ask(
            title=names[:200] or hitting[0].title, hold_reason="task_replan", payload=HeldReplan(replan=offer)
        )
        if from_outside:
            return await self.pending.from_outside(txn, ask, "replan")
        held, _ = await self.pending.hold(txn, ask, "replan")
        return held

    async def after_write(self, txn: StubTxn) -> None:
        """Events were written, added or removed (by chat, the API, an undo, a sync): the blocks'
        TRANSP decided again, since the room each task has left elsewhere may have shrunk or
        grown without anything landing on a block — unless this transaction decided it already
        or the user has no open task (known from the claim, at no cost)."""
        if txn.blocks_shown or not txn.uow.has_open_tasks:
            return
        await self.show_busy_when_needed(txn.uow, txn.user_id, txn.tz, txn.now)
        txn.blocks_shown = True

    async def offer_replan_after_sync(self, uow: UnitOfWork, user_id: str, landed: Sequence[Event]) -> None:
        """A sync wrote `landed` (and maybe removed events) from the connected calendar: the
        re-plan of the blocks they meet, offered like any offer from outside, and the blocks'
        TRANSP decided again (contract §21)."""
        saved = (await uow.settings.settings_of([user_id])).get(user_id, StoredSettings())
        tz = ZoneInfo(saved.zone(self.config.default_tz))
        txn = BackgroundTxn(uow, self.clock.now(), user_id, tz)
        await self.offer_replan(txn, landed, from_outside=True)
        await self.after_write(txn)

    async def confirm_replan(self, txn: Txn, stub: Stub) -> CommandResult:
        """The user's word on a held re-plan: its blocks moved as offered, if each is still where
        it was offered from and every new time is still free of busy time and of other blocks;
        else nothing moves (the error is answered, the offer stays until refused or lapsed)."""
        payload = stub.payload
        assert isinstance(payload, HeldReplan)
        uow = txn.uow
        ids = [m.block_id for m in payload.replan.moves if m.block_id is not None]
        current = {b.id: b for b in await uow.events.events_by_ids(txn.user_id, ids)}
        for move in payload.replan.moves:
            if move.block_id is None:
                continue
            block = current.get(move.block_id)
            if block is None or (block.start, block.end) != (move.old_start, move.old_end):
                return error_result("no_free_time", "the task blocks changed after this re-plan was offered")
        tasks = {t.id: t for t in await uow.tasks.list_tasks(txn.user_id)}
        layout = await layout_of(uow, self.config, txn.user_id, list(tasks.values()), txn.tz, txn.now)
        staying = [b for b in layout.blocks if b.id not in current]
        for move in payload.replan.moves:
            if move.new_start is None or move.new_end is None:
                continue
            taken = [*layout.busy, *((b.start, b.end) for b in staying)]
            if move.new_start < txn.now or any(
                overlaps(move.new_start, move.new_end, a, b) for a, b in taken
            ):
                return error_result("no_free_time", "a new time of this re-plan is no longer free")
        calendar = await self.default_calendar(uow, txn.user_id, txn.envelope.lang)
        for move in payload.replan.moves:
            old = current.get(move.block_id) if move.block_id else None
            if move.new_start is None or move.new_end is None:
                if old is not None:
                    await uow.events.delete_events(txn.user_id, [old.id])
            elif old is not None:
                await uow.events.update_event(old.evolve(start=move.new_start, end=move.new_end))
            elif move.task_id in tasks:
                event = Event(
                    id=new_id(),
                    user_id=txn.user_id,
                    title=tasks[move.task_id].title,
                    start=move.new_start,
                    end=move.new_end,
                    calendar=calendar,
                    tz=txn.tz.key,
                    task_id=move.task_id,
                    transparent=True,
                )
                await uow.events.insert_event(event, turn_id=txn.envelope.turn_id, key=None)
        await self.show_busy_when_needed(uow, txn.user_id, txn.tz, txn.now)
        txn.blocks_shown = True
        done = await self.pending.store(txn, self.pending.of(stub).finish("updated", txn.now))
        return CommandResult(status="updated", persisted=True, stub=stub_out(done, (), txn.tz))


def new_task(fields: TaskFields) -> TaskOut:
    return TaskOut(id=new_id(), **fields.model_dump(), status="open", percent=0, completed_at=None)


def due_instant(day: date, due_time: str | None, tz: ZoneInfo) -> datetime:
    """A due day and time as an instant; a day with no time is due by its end."""
    if due_time is None:
        return local_midnight(day + timedelta(days=1), tz)
    return at_local(day, parse_hhmm(due_time), tz)


def patched(task: TaskOut, query: SaveTask, now: datetime) -> TaskOut:
    return task if query.patch is None else apply_patch(task, query.patch, now)
