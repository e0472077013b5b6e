"""Writes: create or prepare, merge a reply, confirm, cancel — each in one transaction.

Every command starts by claiming its idempotency key, so a duplicate either waits for the first
attempt and returns its stored result, or (if the first rolled back) does the work itself. Nothing
is written for an error result: the transaction is rolled back.

The pending-command rules of contract §8 that touch state live here and in `domain/stubs.py`:
a create continues the active stub only when `continues_stub` says so, otherwise the stub ends
`superseded`; a `held` stub runs only through an explicit confirmation (`MergeStub.confirm`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from calagent.commands.domain.calendars import pick_calendar
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.overlap import find_conflicts
from calagent.commands.domain.slots import merge_slots, slots_from_args
from calagent.commands.domain.stubs import (
    Decision,
    Incomplete,
    Proposal,
    UnresolvableError,
    check_transition,
    continues_stub,
    decide,
    plan,
)
from calagent.commands.ports import Store, TimePort, UnitOfWork
from calagent.commands.queries import ALL_DAY_SLACK
from calagent.commands.views import event_out, stub_out
from calagent.contracts.commands import (
    CalendarFallback,
    CancelStub,
    CommandError,
    CommandResult,
    HoldReason,
    MergeStub,
    PrepareOrCreate,
    StubOut,
    StubSlots,
    StubStatus,
)
from calagent.contracts.envelope import Envelope
from calagent.contracts.time import ResolveRequest
from calagent.runtime.clock import Clock

Command = PrepareOrCreate | MergeStub | CancelStub


@dataclass(frozen=True)
class WriteConfig:
    calendars: tuple[str, ...]
    stub_ttl: timedelta
    holiday_country: str


def new_id() -> str:
    return uuid.uuid4().hex


def error_result(code: str, message: str) -> CommandResult:
    return CommandResult(
        status="error", error=CommandError.model_validate({"code": code, "message": message})
    )


@dataclass
class _Turn:
    """What one command knows around it: its transaction, the user, the zone, both clocks."""

    uow: UnitOfWork
    envelope: Envelope
    key: str
    tz: ZoneInfo
    now: datetime  # the service clock: stub expiry

    @property
    def user_id(self) -> str:
        return self.envelope.user_id

    @property
    def spoken_at(self) -> datetime:  # the moment the user spoke: "in the past" is relative to it
        return self.envelope.occurred_at


class Writes:
    def __init__(self, store: Store, time_port: TimePort, config: WriteConfig, clock: Clock) -> None:
        self.store = store
        self.time = time_port
        self.config = config
        self.clock = clock

    async def run(self, command: Command, tz: ZoneInfo) -> CommandResult:
        envelope = command.envelope
        async with self.store.unit_of_work() as uow:
            stored = await uow.claim_key(envelope.user_id, command.idempotency_key)
            if stored is not None:
                return stored.model_copy(update={"replayed": True, "db_ms": uow.db_ms})
            await uow.lock_user(envelope.user_id)
            turn = _Turn(uow, envelope, command.idempotency_key, tz, self.clock.now())
            if isinstance(command, PrepareOrCreate):
                result = await self._prepare_or_create(turn, command)
            elif isinstance(command, MergeStub):
                result = await self._merge(turn, command)
            else:
                result = await self._cancel(turn, command)
            if result.status == "error":
                # Leaving without commit rolls back: an error writes nothing, not even the key.
                return result.model_copy(update={"db_ms": uow.db_ms})
            await uow.store_result(envelope.user_id, command.idempotency_key, result)
            await uow.commit()
            return result.model_copy(update={"db_ms": uow.db_ms})

    async def _prepare_or_create(self, turn: _Turn, command: PrepareOrCreate) -> CommandResult:
        args = command.args
        active = await turn.uow.active_stub(turn.user_id)
        if active is not None and active.expired_at(turn.now):
            await self._transition(turn, active, "expired")
            active = None
        if (
            active is not None
            and command.active_command_id == active.id
            and continues_stub(active, args.title, args.command_id)
        ):
            slots = merge_slots(active.slots, slots_from_args(args), command.patch, active.candidates)
            hold = command.hold or active.requested_hold
            # Code's half of the override: the stub really is in `conflict`; the model's half: the flag.
            allow_conflict = active.status == "conflict" and args.allow_conflict is True
            return await self._evaluate(
                turn,
                active.title,
                slots,
                active,
                hold=hold,
                # A renewed create never confirms a hold: only MergeStub.confirm does.
                confirmed=active.confirmed and command.hold is None,
                allow_conflict=allow_conflict,
            )
        superseded: StubOut | None = None
        if active is not None:
            # A new request: the pending one is given up and says so; it never lends its title or
            # slots to the new one.
            ended = await self._transition(turn, active, "superseded")
            superseded = stub_out(ended, (), turn.tz)
        slots = merge_slots(StubSlots(), slots_from_args(args), command.patch)
        result = await self._evaluate(
            turn, args.title, slots, None, hold=command.hold, confirmed=False, allow_conflict=False
        )
        if superseded is None or result.status == "error":
            return result
        return result.model_copy(update={"superseded": superseded})

    async def _merge(self, turn: _Turn, command: MergeStub) -> CommandResult:
        stub = await turn.uow.get_stub(turn.user_id, command.command_id)
        if stub is None or not stub.active:
            return error_result("no_active_command", "no active schedule command with that id")
        if stub.expired_at(turn.now):
            return await self._expire(turn, stub)
        slots = merge_slots(stub.slots, None, command.patch, stub.candidates)
        confirmed = stub.confirmed or (command.confirm and stub.status == "held")
        # Accepting a conflict offer keeps the proposed time; a patch that moves the time is a new
        # question and `_evaluate` checks it again.
        allow_conflict = command.confirm and stub.status == "conflict"
        return await self._evaluate(
            turn,
            stub.title,
            slots,
            stub,
            hold=stub.requested_hold,
            confirmed=confirmed,
            allow_conflict=allow_conflict,
        )

    async def _cancel(self, turn: _Turn, command: CancelStub) -> CommandResult:
        if command.command_id:
            stub = await turn.uow.get_stub(turn.user_id, command.command_id)
        else:
            stub = await turn.uow.active_stub(turn.user_id)
        if stub is None or not stub.active:
            return error_result("no_active_command", "there is no active schedule command to cancel")
        if stub.expired_at(turn.now):
            return await self._expire(turn, stub)
        cancelled = await self._transition(turn, stub, "cancelled")
        return CommandResult(status="cancelled", stub=stub_out(cancelled, (), turn.tz))

    # ---- the shared path: resolve, plan, decide, write -----------------------------------------

    async def _evaluate(
        self,
        turn: _Turn,
        title: str,
        slots: StubSlots,
        stub: Stub | None,
        *,
        hold: HoldReason | None,
        confirmed: bool,
        allow_conflict: bool,
    ) -> CommandResult:
        calendars = await turn.uow.calendars(turn.user_id, self.config.calendars)
        calendar, requested = pick_calendar(slots.calendar, calendars)
        fallback = CalendarFallback(requested=requested, used=calendar) if requested is not None else None
        if not slots.date:
            return error_result("invalid_arguments", "a date symbol is required")
        resolved = await self.time.resolve(
            ResolveRequest(
                date=slots.date,
                time=None if slots.all_day else slots.time,
                end_time=None if slots.all_day else slots.end_time,
                now=turn.spoken_at,
                tz=turn.envelope.tz,
                holiday_country=self.config.holiday_country,
            )
        )
        if resolved.error is not None:
            return error_result(resolved.error.code, resolved.error.message)
        try:
            planned = plan(resolved, slots, turn.tz)
        except UnresolvableError as exc:
            return error_result("invalid_symbol", str(exc))
        except ValueError as exc:
            return error_result("invalid_time", str(exc))

        if isinstance(planned, Incomplete):
            if planned.pinned_date is not None:
                slots = slots.model_copy(update={"date": planned.pinned_date.isoformat()})
            saved = await self._save_stub(
                turn,
                stub,
                title=title,
                slots=slots,
                status=planned.status,
                candidates=planned.candidates,
                hold=hold,
                confirmed=confirmed,
            )
            return CommandResult(
                status=planned.status, stub=stub_out(saved, (), turn.tz), calendar_fallback=fallback
            )

        conflicts = await self._conflicts(turn, planned)
        # The override is an answer to the conflict question about *this* time; a new time is a new
        # question (its conflicts are checked again).
        same_time = (
            stub is not None and stub.proposed_start == planned.start and stub.proposed_end == planned.end
        )
        decision = decide(
            planned,
            conflicts,
            turn.spoken_at,
            hold=hold,
            confirmed=confirmed,
            override_conflict=allow_conflict and same_time,
        )
        if decision.outcome == "created":
            return await self._create(turn, title, calendar, planned, stub, fallback)
        saved = await self._save_stub(
            turn,
            stub,
            title=title,
            slots=slots,
            status=decision.outcome,
            hold=hold,
            confirmed=confirmed,
            decision=decision,
            proposal=planned,
        )
        return CommandResult(
            status=decision.outcome,
            stub=stub_out(saved, decision.conflicts, turn.tz),
            calendar_fallback=fallback,
        )

    async def _create(
        self,
        turn: _Turn,
        title: str,
        calendar: str,
        proposal: Proposal,
        stub: Stub | None,
        fallback: CalendarFallback | None,
    ) -> CommandResult:
        event = Event(
            id=new_id(),
            user_id=turn.user_id,
            title=title,
            start=proposal.start,
            end=proposal.end,
            calendar=calendar,
            all_day=proposal.all_day,
        )
        await turn.uow.insert_event(event, turn_id=turn.envelope.turn_id, key=turn.key)
        out_stub: StubOut | None = None
        if stub is not None:
            done = await self._transition(
                turn,
                stub.evolve(
                    proposed_start=proposal.start,
                    proposed_end=proposal.end,
                    hold_reason=None,
                    conflict_event_ids=(),
                ),
                "created",
            )
            out_stub = stub_out(done, (), turn.tz)
        return CommandResult(
            status="created",
            persisted=True,
            event=event_out(event, turn.tz),
            stub=out_stub,
            calendar_fallback=fallback,
        )

    async def _conflicts(self, turn: _Turn, proposal: Proposal) -> tuple[Event, ...]:
        nearby = await turn.uow.events_overlapping(
            turn.user_id,
            proposal.start - ALL_DAY_SLACK,
            proposal.end + ALL_DAY_SLACK,
            incomplete_only=True,
        )
        return tuple(find_conflicts(proposal.start, proposal.end, proposal.all_day, nearby, turn.tz))

    async def _save_stub(
        self,
        turn: _Turn,
        stub: Stub | None,
        *,
        title: str,
        slots: StubSlots,
        status: StubStatus,
        hold: HoldReason | None,
        confirmed: bool,
        candidates: tuple[date, ...] = (),
        decision: Decision | None = None,
        proposal: Proposal | None = None,
    ) -> Stub:
        fields: dict[str, object] = {
            "title": title,
            "slots": slots,
            "candidates": candidates,
            "conflict_event_ids": tuple(ev.id for ev in decision.conflicts) if decision else (),
            "hold_reason": decision.hold_reason if decision else None,
            "requested_hold": hold if hold != "past_start" else None,
            "confirmed": confirmed,
            "proposed_start": proposal.start if proposal else None,
            "proposed_end": proposal.end if proposal else None,
        }
        if stub is None:
            check_transition(None, status)
            fresh = Stub(
                id=new_id(),
                user_id=turn.user_id,
                status=status,
                # A stub lives `stub_ttl` from its last change: a user still answering keeps it.
                expires_at=turn.now + self.config.stub_ttl,
                created_at=turn.now,
                updated_at=turn.now,
                created_by_turn=turn.envelope.turn_id,
                title=title,
                slots=slots,
            ).evolve(**fields)
            await turn.uow.insert_stub(fresh)
            return fresh
        return await self._transition(turn, stub.evolve(**fields), status)

    async def _transition(self, turn: _Turn, stub: Stub, status: StubStatus) -> Stub:
        check_transition(stub.status, status)
        changes: dict[str, object] = {"status": status, "updated_at": turn.now}
        if status in ("needs_date", "needs_time", "conflict", "held"):
            changes["expires_at"] = turn.now + self.config.stub_ttl
        updated = stub.evolve(**changes)
        await turn.uow.update_stub(updated)
        return updated

    async def _expire(self, turn: _Turn, stub: Stub) -> CommandResult:
        expired = await self._transition(turn, stub, "expired")
        return CommandResult(status="expired", stub=stub_out(expired, (), turn.tz))
