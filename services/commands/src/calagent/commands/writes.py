"""Writes: the dispatch of every command — merge a reply, confirm, cancel, revert — each in one
transaction; a create's words are planned and written by `creates.py`.

Every command starts by claiming its idempotency key, so a duplicate either waits for the first
attempt and returns its stored result, or (if the first rolled back) does the work itself. Nothing
is written for an error result: the transaction is rolled back.

Every step of a stub goes through `pending.py` (the rules: `domain/pending.py`): a create
continues the active stub only when `PendingCommand.continued_by` says so, otherwise the stub ends
`superseded`; a `held` stub runs only through an explicit confirmation (`MergeStub.confirm`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from calagent.commands.changes import Changes
from calagent.commands.counters import Counters, is_counter
from calagent.commands.creates import Creates
from calagent.commands.domain.changelog import ChangeContext
from calagent.commands.domain.model import Stub
from calagent.commands.offers import Offers
from calagent.commands.pending import Pending
from calagent.commands.people.attendees import AttendeeRules
from calagent.commands.people.inbox import InvitationAnswers
from calagent.commands.placing import Placing
from calagent.commands.plans import Plans
from calagent.commands.ports import Store
from calagent.commands.proposing import Proposing
from calagent.commands.tasks.offers import TaskOffers
from calagent.commands.tasks.replans import Replans
from calagent.commands.tasks.service import Tasks
from calagent.commands.txn import Txn, error_result, new_id
from calagent.commands.undo import Undo
from calagent.commands.views import stub_out
from calagent.contracts.commands import (
    AddTaskCommand,
    AnyCommand,
    CancelStub,
    CommandResult,
    CompleteTaskCommand,
    MergeStub,
    PrepareChange,
    PrepareOrCreate,
    ProposePlan,
    ProposeTimesCommand,
    RevertChange,
    StubKind,
)
from calagent.runtime.clock import Clock

Command = AnyCommand


Run = Callable[[Txn, Stub], Awaitable[CommandResult]]


@dataclass(frozen=True)
class KindAnswers:
    """What the user's word does to a stub of one kind: `confirm` (a MergeStub), `refuse` (a
    CancelStub)."""

    confirm: Callable[[Txn, Stub, MergeStub], Awaitable[CommandResult]]
    refuse: Run


def on_word(run: Run) -> Callable[[Txn, Stub, MergeStub], Awaitable[CommandResult]]:
    """A kind with no slots a short reply could fill: it runs on the user's confirmation only."""

    async def confirm(txn: Txn, stub: Stub, command: MergeStub) -> CommandResult:
        if stub.status == "needs_attendee":
            # A change waiting for a person is answered by a new update naming them.
            return error_result("invalid_arguments", "this pending request waits for an attendee")
        if not command.confirm:
            # A change or a plan has no slots a short reply could fill: the model reads it.
            return error_result("invalid_arguments", "this pending request takes only a confirmation")
        return await run(txn, stub)

    return confirm


@dataclass(frozen=True)
class Collaborators:
    """What `Writes` dispatches to, each built once by `bootstrap.bootstrap` and shared with what
    else needs them (the inbox, the sync)."""

    pending: Pending
    placing: Placing
    people: AttendeeRules
    changes: Changes
    plans: Plans
    offers: Offers
    undo: Undo
    answers: InvitationAnswers
    counters: Counters
    proposing: Proposing
    tasks: Tasks
    replans: Replans
    task_offers: TaskOffers
    creates: Creates


class Writes:
    def __init__(self, store: Store, clock: Clock, rooms: Collaborators) -> None:
        self.store = store
        self.clock = clock
        self.rooms = rooms
        # One row per kind of stub: what the user's word does to it (what it keeps and how long it
        # waits: `payloads.KINDS`).
        self.kinds: dict[StubKind, KindAnswers] = {
            "create": KindAnswers(self.rooms.creates.reply, self._drop),
            "change": KindAnswers(on_word(self._run_change), self._refuse_change),
            "plan": KindAnswers(on_word(self.rooms.plans.confirm), self._drop),
            "invitation": KindAnswers(self._answer_invitation, self._decline_invitation),
            "proposal": KindAnswers(on_word(self.rooms.proposing.send), self._drop),
            "booking": KindAnswers(on_word(self.rooms.proposing.book), self._drop),
            "replan": KindAnswers(on_word(self.rooms.replans.confirm), self._drop),
            "task_change": KindAnswers(on_word(self.rooms.task_offers.confirm), self._drop),
        }
        self.handlers: dict[type[Command], Callable[[Txn, Any], Awaitable[CommandResult]]] = {
            PrepareOrCreate: self.rooms.creates.prepare_or_create,
            MergeStub: self._merge,
            PrepareChange: self._prepare_change,
            RevertChange: self.rooms.undo.revert,
            ProposePlan: self.rooms.plans.propose,
            ProposeTimesCommand: self.rooms.proposing.propose,
            CancelStub: self._cancel,
            AddTaskCommand: self.rooms.tasks.add_task,
            CompleteTaskCommand: self.rooms.tasks.complete_task,
        }

    async def run(self, command: Command, tz: ZoneInfo) -> CommandResult:
        envelope = command.envelope
        # The symbols a create names are known before any row is read: resolve them while the
        # transaction claims its key and takes the user's lock, not inside the lock afterwards.
        early = self.rooms.creates.early_resolve(command)
        try:
            async with self.store.unit_of_work() as uow:
                now = self.clock.now()
                source = (
                    command.source
                    if isinstance(command, PrepareOrCreate | MergeStub | RevertChange)
                    else "chat"
                )
                change = ChangeContext(new_id(), source, envelope.turn_id, now)
                # Named before the claim: claiming the key also takes the user's lock and tells the
                # change log this change, in the same statement.
                uow.changes.log_changes_as(change)
                stored = await uow.claim_key(envelope.user_id, command.idempotency_key)
                if stored is not None:
                    return stored.model_copy(update={"replayed": True, "db_ms": uow.db_ms})
                txn = Txn(uow, envelope, command.idempotency_key, tz, now)
                txn.log_as(change)
                if early is not None:
                    txn.prefetched[early[0]] = early[1]
                return await self._run(txn, command)
        finally:
            if early is not None:
                task = early[1]
                if not task.done():
                    task.cancel()
                elif not task.cancelled():
                    task.exception()  # retrieved: an unused early answer is not an unhandled error

    async def _run(self, txn: Txn, command: Command) -> CommandResult:
        uow = txn.uow
        result = await self.handlers[type(command)](txn, command)
        if result.status == "error":
            # Leaving without commit rolls back: an error writes nothing, not even the key.
            return result.model_copy(update={"db_ms": uow.db_ms})
        # What the writes lead to, from what they recorded: the same step after every command.
        replan = await self.rooms.replans.after_write(txn)
        if replan is not None:
            result = result.model_copy(update={"replan": stub_out(replan, (), txn.tz)})
        # The change the trigger logged these rows as: what an Undo on this receipt reverts (none
        # when the write left every row as it was).
        logged_as = (
            result.model_copy(update={"change_id": txn.change.id})
            if result.persisted and result.change_id is None and txn.change is not None
            else None
        )
        result = await uow.store_result(txn.user_id, txn.key, result, logged_as=logged_as)
        await uow.commit()
        return result.model_copy(update={"db_ms": uow.db_ms})

    async def _prepare_change(self, txn: Txn, command: PrepareChange) -> CommandResult:
        return await self.rooms.offers.bind(txn, command, await self.rooms.changes.prepare(txn, command))

    async def _merge(self, txn: Txn, command: MergeStub) -> CommandResult:
        stub = await self.rooms.pending.answered(txn, command.command_id)
        if isinstance(stub, CommandResult):
            return stub
        if command.pick is not None:
            # A pick only says which event (contract §20); the change still waits for the user's word.
            if command.confirm or stub.kind != "change":
                return error_result("invalid_arguments", "a pick answers only a change asking which event")
            return await self.rooms.offers.pick(txn, stub, command.pick)
        return await self.kinds[stub.kind].confirm(txn, stub, command)

    async def _cancel(self, txn: Txn, command: CancelStub) -> CommandResult:
        stub = await self.rooms.pending.answered(txn, command.command_id)
        if isinstance(stub, CommandResult):
            return stub
        return await self.kinds[stub.kind].refuse(txn, stub)

    # ---- what the user's word does, kind by kind -------------------------------------------------

    async def _run_change(self, txn: Txn, stub: Stub) -> CommandResult:
        if self.rooms.pending.of(stub).asks_which():
            # Which event is still the question (contract §20): nothing runs; it is asked again.
            return CommandResult(status="held", stub=stub_out(stub, (), txn.tz))
        # A counter-proposal made again is still the attendee's: offered as theirs.
        check = self.rooms.counters.check if is_counter(stub) else self.rooms.offers.check
        stale = await check(txn, stub)
        if stale is not None:
            return stale
        return await self.rooms.changes.confirm(txn, stub)

    async def _answer_invitation(self, txn: Txn, stub: Stub, command: MergeStub) -> CommandResult:
        if not command.confirm and command.partstat is None:
            return error_result("invalid_arguments", "this invitation takes an answer")
        return await self.rooms.answers.answer(txn, stub, command.partstat or "ACCEPTED")

    async def _decline_invitation(self, txn: Txn, stub: Stub) -> CommandResult:
        # Turning an invitation down is declining it: the organizer is told.
        return await self.rooms.answers.answer(txn, stub, "DECLINED")

    async def _refuse_change(self, txn: Txn, stub: Stub) -> CommandResult:
        if is_counter(stub):
            # Turning a counter-proposal down is declining it: the proposer is told.
            return await self.rooms.counters.decline(txn, stub)
        return await self._drop(txn, stub)

    async def _drop(self, txn: Txn, stub: Stub) -> CommandResult:
        cancelled = await self.rooms.pending.store(txn, self.rooms.pending.of(stub).cancel(txn.now))
        return CommandResult(status="cancelled", stub=stub_out(cancelled, (), txn.tz))
