"""What a write leads to, decided in one step after it (`Replans.after_write`) from what the unit
of work's `Effects` recorded — never at the call site (contract §21, §19):

- events that landed on task blocks: the blocks' fewest-moves re-plan (`placement.replan`) held as
  one offer (kind `replan`) listing each block's old and new time, applied only when the user
  confirms it (`confirm`). From outside (a sync, a conflict the server won) it waits beside the
  user's request instead of ending it;
- the blocks' TRANSP decided once, after the last write (a block turns busy when its task has no
  other place left), unless the writes decided it themselves (placing a task);
- a stub ended: the oldest offer waiting its turn comes back.

Every command (`Writes._run`: chat and `/v1/commands`, an undo), the inbound sync (`after_sync`)
and the outbox's conflict path run it. Blocks written by placing a task or by a re-plan are no
event that landed: they never offer another re-plan."""

from __future__ import annotations

from collections.abc import Sequence
from zoneinfo import ZoneInfo

from calagent.commands.config import CommandConfig
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.overlap import event_span, keeps_time, overlaps
from calagent.commands.domain.payloads import HeldReplan
from calagent.commands.domain.pending import Ask
from calagent.commands.domain.series import expand
from calagent.commands.domain.settings import StoredSettings
from calagent.commands.pending import BackgroundTxn, Pending, StubTxn
from calagent.commands.ports import UnitOfWork
from calagent.commands.tasks.domain.placement import replan
from calagent.commands.tasks.service import Tasks
from calagent.commands.tasks.time import Layout, as_block, layout_of, moves_between
from calagent.commands.txn import Txn, error_result
from calagent.commands.views import stub_out
from calagent.contracts.commands import CommandResult
from calagent.contracts.tasks import ReplanOut, TaskOut
from calagent.runtime.clock import Clock


class Replans:
    def __init__(self, tasks: Tasks, pending: Pending, config: CommandConfig, clock: Clock) -> None:
        self.tasks = tasks
        self.pending = pending
        self.config = config
        self.clock = clock

    async def after_write(self, txn: StubTxn, *, from_outside: bool = False) -> Stub | None:
        """The one step after a transaction's writes: the re-plan offered over the events that
        landed (returned, for the receipt), the blocks' TRANSP decided, a waiting offer brought
        back. A user without an open task at the claim pays no statement for the first two."""
        effects = txn.uow.effects
        offered = None
        if txn.uow.has_open_tasks and txn.user_id in effects.unsettled:
            offered = await self._settle(txn, effects.landed_of(txn.user_id), from_outside)
        if txn.user_id in effects.stubs_ended:
            await self.pending.offer_waiting(txn)
        return offered

    async def after_sync(self, uow: UnitOfWork, user_id: str, landed: Sequence[Event]) -> None:
        """`after_write` for what came from the connected calendar: `landed`, the events a sync
        wrote by statements of its own (none when the repositories wrote them, as the outbox's
        conflict path does). Its offers are from outside."""
        uow.effects.synced(user_id, landed)
        saved = (await uow.settings.settings_of([user_id])).get(user_id, StoredSettings())
        tz = ZoneInfo(saved.zone(self.config.default_tz))
        await self.after_write(BackgroundTxn(uow, self.clock.now(), user_id, tz), from_outside=True)

    async def _settle(self, txn: StubTxn, landed: Sequence[Event], from_outside: bool) -> Stub | None:
        uow, user_id = txn.uow, txn.user_id
        open_tasks = await uow.tasks.list_tasks(user_id, open_only=True)
        if not open_tasks:
            uow.effects.blocks_settled(user_id)
            return None
        layout = await layout_of(uow, self.config, user_id, open_tasks, txn.tz, txn.now)
        # The room each task has left elsewhere may have shrunk or grown without anything landing
        # on a block: a block whose task has no other place turns busy (none moves).
        await self.tasks.show_busy_in(uow, user_id, open_tasks, layout)
        return await self._offer(txn, landed, open_tasks, layout, from_outside)

    async def _offer(
        self,
        txn: StubTxn,
        landed: Sequence[Event],
        open_tasks: Sequence[TaskOut],
        layout: Layout,
        from_outside: bool,
    ) -> Stub | None:
        """Events just written (`landed`) meet blocks: the fewest-moves re-plan, held as one offer
        (nothing moves now); None when they meet none or no block can move."""
        hitting = [e for e in landed if keeps_time(e)]
        if not hitting:
            return None
        # A series lands wherever any of its occurrences does, not only its first: each one up to
        # the blocks' horizon, expanded as every read expands them.
        spans = [event_span(e, txn.tz) for e in expand(hitting, layout.now, layout.end)]
        if not any(overlaps(b.start, b.end, *span) for span in spans for b in layout.blocks):
            return None
        with_blocks = [t for t in open_tasks if layout.blocks_of(t.id)]
        found = replan(layout.problem(with_blocks), [as_block(b) for b in layout.blocks], self.tasks.budget_s)
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

    async def confirm(self, txn: Txn, stub: Stub) -> CommandResult:
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
        calendar = await self.tasks.default_calendar(uow, txn.user_id, txn.envelope.lang)
        await self.tasks.write_moves(
            uow,
            txn.user_id,
            payload.replan.moves,
            txn.tz,
            current=current,
            titles={t.id: t.title for t in tasks.values()},
            calendar=calendar,
            turn_id=txn.envelope.turn_id,
        )
        # The blocks' TRANSP is decided after this write like after any (`after_write`).
        done = await self.pending.store(txn, self.pending.of(stub).finish("updated", txn.now))
        return CommandResult(status="updated", persisted=True, stub=stub_out(done, (), txn.tz))
