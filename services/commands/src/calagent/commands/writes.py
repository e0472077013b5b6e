"""Writes: create or prepare, merge a reply, confirm, cancel — each in one transaction.

Every command starts by claiming its idempotency key, so a duplicate either waits for the first
attempt and returns its stored result, or (if the first rolled back) does the work itself. Nothing
is written for an error result: the transaction is rolled back.

Every step of a stub goes through `pending.py` (the rules: `domain/pending.py`): a create
continues the active stub only when `PendingCommand.continued_by` says so, otherwise the stub ends
`superseded`; a `held` stub runs only through an explicit confirmation (`MergeStub.confirm`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC
from typing import Any
from zoneinfo import ZoneInfo

from calagent.commands.changes import Changes
from calagent.commands.config import CommandConfig
from calagent.commands.counters import Counters, is_counter
from calagent.commands.domain.calendars import pick_calendar
from calagent.commands.domain.changelog import ChangeContext
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.pending import Ask, decide, unclear_recurrence
from calagent.commands.domain.people import Unresolved, resolve_attendees
from calagent.commands.domain.proposals import Incomplete, Proposal, UnresolvableError, plan
from calagent.commands.domain.series import (
    InvalidRecurrenceError,
    next_starts,
    validate_rule,
)
from calagent.commands.domain.slots import UnplacedWeekdayError, merge_slots, slots_from_args
from calagent.commands.domain.timeutil import local_days, whole_days
from calagent.commands.offers import Offers
from calagent.commands.pending import Pending
from calagent.commands.people.attendees import AttendeeRules
from calagent.commands.people.inbox import InvitationAnswers
from calagent.commands.placing import Placing, resolved_within_supported_years
from calagent.commands.plans import Plans
from calagent.commands.ports import Store, TimePort
from calagent.commands.proposing import Proposing
from calagent.commands.queries import Queries
from calagent.commands.tasks.offers import TaskOffers
from calagent.commands.tasks.replans import Replans
from calagent.commands.tasks.service import Tasks
from calagent.commands.txn import Txn, error_result, new_id
from calagent.commands.undo import Undo
from calagent.commands.views import event_out, stub_out
from calagent.contracts.commands import (
    ActiveStubStatus,
    AddTaskCommand,
    AnyCommand,
    CalendarFallback,
    CancelStub,
    CommandResult,
    CompleteTaskCommand,
    HoldReason,
    MergeStub,
    PrepareChange,
    PrepareOrCreate,
    ProposePlan,
    ProposeTimesCommand,
    RevertChange,
    StubKind,
    StubOut,
    StubSlots,
)
from calagent.contracts.limits import OUT_OF_RANGE_MESSAGE
from calagent.contracts.people import Attendee
from calagent.contracts.time import ResolveRequest, ResolveResult
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


class Writes:
    def __init__(self, store: Store, time_port: TimePort, config: CommandConfig, clock: Clock) -> None:
        self.store = store
        self.time = time_port
        self.config = config
        self.clock = clock
        self.pending = Pending(config.stub_ttl)
        self.placing = Placing(time_port, config)
        self.people = AttendeeRules(self.placing)
        self.changes = Changes(self.pending, self.placing, self.people)
        self.plans = Plans(self.pending)
        self.offers = Offers(self.changes, self.placing)
        self.undo = Undo()
        self.answers = InvitationAnswers(self.pending, self.placing)
        self.counters = Counters(self.pending, self.changes, self.offers, self.placing, self.people)
        self.proposing = Proposing(self.pending, self.placing, Queries(store, time_port, config, clock))
        self.tasks = Tasks(store, config, clock, self.placing)
        self.replans = Replans(self.tasks, self.pending, config, clock)
        self.task_offers = TaskOffers(self.tasks, self.pending)
        # One row per kind of stub: what the user's word does to it (what it keeps and how long it
        # waits: `payloads.KINDS`).
        self.kinds: dict[StubKind, KindAnswers] = {
            "create": KindAnswers(self._reply, self._drop),
            "change": KindAnswers(on_word(self._run_change), self._refuse_change),
            "plan": KindAnswers(on_word(self.plans.confirm), self._drop),
            "invitation": KindAnswers(self._answer_invitation, self._decline_invitation),
            "proposal": KindAnswers(on_word(self.proposing.send), self._drop),
            "booking": KindAnswers(on_word(self.proposing.book), self._drop),
            "replan": KindAnswers(on_word(self.replans.confirm), self._drop),
            "task_change": KindAnswers(on_word(self.task_offers.confirm), self._drop),
        }
        self.handlers: dict[type[Command], Callable[[Txn, Any], Awaitable[CommandResult]]] = {
            PrepareOrCreate: self._prepare_or_create,
            MergeStub: self._merge,
            PrepareChange: self._prepare_change,
            RevertChange: self.undo.revert,
            ProposePlan: self.plans.propose,
            ProposeTimesCommand: self.proposing.propose,
            CancelStub: self._cancel,
            AddTaskCommand: self.tasks.add_task,
            CompleteTaskCommand: self.tasks.complete_task,
        }

    async def run(self, command: Command, tz: ZoneInfo) -> CommandResult:
        envelope = command.envelope
        # The symbols a create names are known before any row is read: resolve them while the
        # transaction claims its key and takes the user's lock, not inside the lock afterwards.
        early = self._early_resolve(command)
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

    def _early_resolve(self, command: Command) -> tuple[ResolveRequest, asyncio.Task[ResolveResult]] | None:
        if not isinstance(command, PrepareOrCreate):
            return None
        slots = merge_slots(StubSlots(), slots_from_args(command.args), command.patch)
        request = self.placing.resolve_request(slots, command.envelope, command.words)
        if request is None:
            return None
        return request, asyncio.ensure_future(self.time.resolve(request))

    async def _run(self, txn: Txn, command: Command) -> CommandResult:
        uow = txn.uow
        result = await self.handlers[type(command)](txn, command)
        if result.status == "error":
            # Leaving without commit rolls back: an error writes nothing, not even the key.
            return result.model_copy(update={"db_ms": uow.db_ms})
        # What the writes lead to, from what they recorded: the same step after every command.
        replan = await self.replans.after_write(txn)
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

    async def _prepare_or_create(self, txn: Txn, command: PrepareOrCreate) -> CommandResult:
        args = command.args
        active = await self.pending.active(txn)
        if (
            active is not None
            and command.active_command_id == active.id
            and self.pending.of(active).continued_by(args.title, args.command_id)
        ):
            slots = merge_slots(active.slots, slots_from_args(args), command.patch, active.candidates)
            consent = self.pending.of(active).consent_of_create(args.allow_conflict, command.hold)
            return await self._evaluate(
                txn,
                active.title,
                slots,
                active,
                hold=command.hold or active.requested_hold,
                confirmed=consent.confirmed,
                allow_conflict=consent.override_conflict,
                words=command.words,
            )
        way = await self.pending.make_way(txn, command.hold, active)
        if way.kept is not None:
            return CommandResult(status="held", kept=stub_out(way.kept, (), txn.tz))
        slots = merge_slots(StubSlots(), slots_from_args(args), command.patch)
        result = await self._evaluate(
            txn,
            args.title,
            slots,
            None,
            hold=command.hold,
            confirmed=False,
            allow_conflict=False,
            words=command.words,
        )
        if way.superseded is None or result.status == "error":
            return result
        return result.model_copy(update={"superseded": way.superseded})

    async def _prepare_change(self, txn: Txn, command: PrepareChange) -> CommandResult:
        return await self.offers.bind(txn, command, await self.changes.prepare(txn, command))

    async def _merge(self, txn: Txn, command: MergeStub) -> CommandResult:
        stub = await self.pending.answered(txn, command.command_id)
        if isinstance(stub, CommandResult):
            return stub
        if command.pick is not None:
            # A pick only says which event (contract §20); the change still waits for the user's word.
            if command.confirm or stub.kind != "change":
                return error_result("invalid_arguments", "a pick answers only a change asking which event")
            return await self.offers.pick(txn, stub, command.pick)
        return await self.kinds[stub.kind].confirm(txn, stub, command)

    async def _cancel(self, txn: Txn, command: CancelStub) -> CommandResult:
        stub = await self.pending.answered(txn, command.command_id)
        if isinstance(stub, CommandResult):
            return stub
        return await self.kinds[stub.kind].refuse(txn, stub)

    # ---- what the user's word does, kind by kind -------------------------------------------------

    async def _reply(self, txn: Txn, stub: Stub, command: MergeStub) -> CommandResult:
        """A create's stub answered: the reply's slots merged in, asked or run again."""
        try:
            slots = merge_slots(stub.slots, None, command.patch, stub.candidates)
        except UnplacedWeekdayError as exc:
            # Not a day code can place: the caller hands the message to the model.
            return error_result("invalid_arguments", str(exc))
        # A patch that moves the time is a new question: `_evaluate` checks its conflicts again.
        consent = self.pending.of(stub).consent_of_reply(command.confirm)
        return await self._evaluate(
            txn,
            stub.title,
            slots,
            stub,
            hold=stub.requested_hold,
            confirmed=consent.confirmed,
            allow_conflict=consent.override_conflict,
        )

    async def _run_change(self, txn: Txn, stub: Stub) -> CommandResult:
        if self.pending.of(stub).asks_which():
            # Which event is still the question (contract §20): nothing runs; it is asked again.
            return CommandResult(status="held", stub=stub_out(stub, (), txn.tz))
        # A counter-proposal made again is still the attendee's: offered as theirs.
        check = self.counters.check if is_counter(stub) else self.offers.check
        stale = await check(txn, stub)
        if stale is not None:
            return stale
        return await self.changes.confirm(txn, stub)

    async def _answer_invitation(self, txn: Txn, stub: Stub, command: MergeStub) -> CommandResult:
        if not command.confirm and command.partstat is None:
            return error_result("invalid_arguments", "this invitation takes an answer")
        return await self.answers.answer(txn, stub, command.partstat or "ACCEPTED")

    async def _decline_invitation(self, txn: Txn, stub: Stub) -> CommandResult:
        # Turning an invitation down is declining it: the organizer is told.
        return await self.answers.answer(txn, stub, "DECLINED")

    async def _refuse_change(self, txn: Txn, stub: Stub) -> CommandResult:
        if is_counter(stub):
            # Turning a counter-proposal down is declining it: the proposer is told.
            return await self.counters.decline(txn, stub)
        return await self._drop(txn, stub)

    async def _drop(self, txn: Txn, stub: Stub) -> CommandResult:
        cancelled = await self.pending.store(txn, self.pending.of(stub).cancel(txn.now))
        return CommandResult(status="cancelled", stub=stub_out(cancelled, (), txn.tz))

    # ---- the shared path: resolve, plan, decide, write -----------------------------------------

    async def _evaluate(
        self,
        txn: Txn,
        title: str,
        slots: StubSlots,
        stub: Stub | None,
        *,
        hold: HoldReason | None,
        confirmed: bool,
        allow_conflict: bool,
        words: str | None = None,
    ) -> CommandResult:
        """`words`: those of the turn that asked for this write (a create), read for the §9 hold."""
        calendars = await self.placing.calendars(txn)
        calendar, requested = pick_calendar(slots.calendar, calendars)
        fallback = CalendarFallback(requested=requested, used=calendar) if requested is not None else None
        placed = await self._place(txn, slots, words)
        if isinstance(placed, CommandResult):
            return placed
        planned, marker = placed
        unclear = unclear_recurrence(marker, slots.recurrence)
        # A hold asked for now takes back an earlier confirmation, as any new hold does.
        confirmed = confirmed and unclear is None
        # Only someone else's words stick to a stub across clarifications; the other holds are
        # judged again on every evaluation (a past start, a rule, an unclear one).
        ask = Ask(
            title=title,
            slots=slots,
            requested_hold=hold if hold == "third_party_content" else None,
            confirmed=confirmed,
        )
        if isinstance(planned, Incomplete):
            if planned.pinned_date is not None:
                slots = slots.model_copy(update={"date": planned.pinned_date.isoformat()})
            ask = replace(ask, slots=slots, candidates=planned.candidates)
            return await self._asked(txn, stub, planned.status, ask, fallback)
        ask = replace(ask, proposed_start=planned.start, proposed_end=planned.end)
        people: tuple[Attendee, ...] | Unresolved = ()
        if slots.attendees:
            people = resolve_attendees(slots.attendees, await txn.uow.people.contacts(txn.user_id))
        if isinstance(people, Unresolved):
            ask = replace(ask, attendee_query=people.query, attendee_candidates=people.candidates)
            return await self._asked(txn, stub, "needs_attendee", ask, fallback)
        if slots.recurrence:
            try:
                validate_rule(slots.recurrence, planned.start, txn.tz)
            except InvalidRecurrenceError as exc:
                return error_result("invalid_recurrence", str(exc))
        conflicts = await self.placing.conflicts(txn, planned.start, planned.end, planned.all_day)
        decision = decide(
            planned,
            conflicts,
            txn.spoken_at,
            reasons=(
                hold,
                unclear,
                # Inviting sends mail to other people: held until the user's word (contract §16).
                "sends_invitations" if people else None,
                # A series is shown as a plan (rule in words, next occurrences) before it exists.
                "recurrence_plan" if slots.recurrence else None,
            ),
            confirmed=confirmed,
            # The override is an answer to the conflict question about *this* time; a new time is
            # a new question (its conflicts are checked again).
            override_conflict=allow_conflict
            and stub is not None
            and self.pending.of(stub).same_time(planned),
        )
        if decision.outcome == "run":
            return await self._create(txn, title, calendar, planned, slots, stub, fallback, people)
        ask = replace(
            ask,
            conflict_event_ids=tuple(ev.id for ev in decision.conflicts),
            hold_reason=decision.hold_reason,
            recipients=people,
        )
        return await self._asked(txn, stub, decision.outcome, ask, fallback, decision.conflicts)

    async def _asked(
        self,
        txn: Txn,
        stub: Stub | None,
        status: ActiveStubStatus,
        ask: Ask,
        fallback: CalendarFallback | None,
        conflicts: tuple[Event, ...] = (),
    ) -> CommandResult:
        """A create that did not run: its stub asked (again) what it lacks or why it waits."""
        saved = await self.pending.step(txn, stub, status, ask)
        return CommandResult(
            status=status, stub=stub_out(saved, conflicts, txn.tz), calendar_fallback=fallback
        )

    async def _place(
        self, txn: Txn, slots: StubSlots, words: str | None
    ) -> tuple[Proposal | Incomplete, str | None] | CommandResult:
        """The slots resolved and planned into a time (or what is still missing), with the
        recurrence marker of the words; or the error to answer with."""
        request = self.placing.resolve_request(slots, txn.envelope, words)
        if request is None:
            return error_result("invalid_arguments", "a date symbol is required")
        early = txn.prefetched.pop(request, None)
        resolved = await early if early is not None else await self.time.resolve(request)
        if resolved.error is not None:
            return error_result(resolved.error.code, resolved.error.message)
        if not resolved_within_supported_years(resolved):
            return error_result("invalid_time", OUT_OF_RANGE_MESSAGE)
        last_day = await self.placing.last_day(txn, slots.end_date)
        if isinstance(last_day, CommandResult):
            return last_day
        try:
            return plan(resolved, slots, txn.tz, last_day), resolved.recurrence_marker
        except UnresolvableError as exc:
            return error_result("invalid_symbol", str(exc))
        except (ValueError, OverflowError) as exc:
            return error_result("invalid_time", str(exc))

    async def _create(
        self,
        txn: Txn,
        title: str,
        calendar: str,
        proposal: Proposal,
        slots: StubSlots,
        stub: Stub | None,
        fallback: CalendarFallback | None,
        people: tuple[Attendee, ...] = (),
    ) -> CommandResult:
        if slots.recurrence:
            # RFC 5545 wants DTSTART to be the first instance; dateutil does not count a start the
            # rule does not give ("Thursday" with BYDAY=MO). The series starts at its first real
            # occurrence, which is also what the plan showed as the first of the next three.
            proposal = first_occurrence(proposal, slots.recurrence, txn.tz)
        event = Event(
            id=new_id(),
            user_id=txn.user_id,
            title=title,
            start=proposal.start,
            end=proposal.end,
            calendar=calendar,
            all_day=proposal.all_day,
            tz=txn.tz.key,
            rrule=slots.recurrence,
            reminder_minutes=slots.reminder_minutes,
            location=slots.location,
            notes=slots.notes,
            attendees=people,
            organizer=await self.placing.organizer(txn) if people else None,
        )
        # The receipt is what the row says once written, not what was asked for.
        stored = await txn.uow.events.insert_event(event, turn_id=txn.envelope.turn_id, key=txn.key)
        out_stub: StubOut | None = None
        if stub is not None:
            done = await self.pending.store(txn, self.pending.of(stub).finish("created", txn.now, proposal))
            out_stub = stub_out(done, (), txn.tz)
        return CommandResult(
            status="created",
            persisted=True,
            event=event_out(stored, txn.tz),
            stub=out_stub,
            calendar_fallback=fallback,
        )


def first_occurrence(proposal: Proposal, rule: str, tz: ZoneInfo) -> Proposal:
    """The proposal moved to the rule's first occurrence on or after it (same length; whole
    local days for an all-day series)."""
    found = next_starts(rule, proposal.start, tz, proposal.start, 1)
    if not found or found[0] == proposal.start:
        return proposal
    start = found[0].astimezone(UTC)
    if proposal.all_day:
        first, end = whole_days(found[0].date(), local_days(proposal.start, proposal.end, tz), tz)
        return Proposal(first, end, True)
    return Proposal(start, start + (proposal.end - proposal.start), False)
