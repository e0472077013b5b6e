"""The create path: a create's words resolved, planned, asked about or written (contract §9).

`Writes` dispatches a `PrepareOrCreate` and a reply to a create's stub here; every step of the
stub goes through `pending.py`, as every other kind's does.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC
from zoneinfo import ZoneInfo

from calagent.commands.domain.calendars import pick_calendar
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
from calagent.commands.pending import Pending
from calagent.commands.placing import Placing, resolved_within_supported_years
from calagent.commands.ports import TimePort
from calagent.commands.txn import Txn, error_result, new_id
from calagent.commands.views import event_out, stub_out
from calagent.contracts.commands import (
    ActiveStubStatus,
    AnyCommand,
    CalendarFallback,
    CommandResult,
    HoldReason,
    MergeStub,
    PrepareOrCreate,
    StubOut,
    StubSlots,
)
from calagent.contracts.limits import OUT_OF_RANGE_MESSAGE
from calagent.contracts.people import Attendee
from calagent.contracts.time import ResolveRequest, ResolveResult


class Creates:
    def __init__(self, pending: Pending, placing: Placing, time_port: TimePort) -> None:
        self.pending = pending
        self.placing = placing
        self.time = time_port

    def early_resolve(self, command: AnyCommand) -> tuple[ResolveRequest, asyncio.Task[ResolveResult]] | None:
        if not isinstance(command, PrepareOrCreate):
            return None
        slots = merge_slots(StubSlots(), slots_from_args(command.args), command.patch)
        request = self.placing.resolve_request(slots, command.envelope, command.words)
        if request is None:
            return None
        return request, asyncio.ensure_future(self.time.resolve(request))

    async def prepare_or_create(self, txn: Txn, command: PrepareOrCreate) -> CommandResult:
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

    async def reply(self, txn: Txn, stub: Stub, command: MergeStub) -> CommandResult:
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
