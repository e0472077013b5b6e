"""The application layer: commands and queries over the ports, with the domain deciding.

Every command runs in one transaction that starts by claiming its idempotency key, so a duplicate
either waits for the first attempt and returns its stored result, or (if the first rolled back)
does the work itself. Nothing is written for an error result: the transaction is rolled back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from icalendar import Calendar
from icalendar import Event as IcsEvent

from calagent.commands.domain.calendars import pick_calendar
from calagent.commands.domain.freetime import free_slots, parse_working_hours
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.overlap import find_conflicts
from calagent.commands.domain.slots import merge_slots, slots_from_args
from calagent.commands.domain.stubs import (
    Decision,
    Incomplete,
    Proposal,
    UnresolvableError,
    check_transition,
    decide,
    plan,
)
from calagent.commands.domain.timeutil import InvalidZoneError, zone
from calagent.commands.ports import Store, TimePort, UnitOfWork
from calagent.contracts.commands import (
    CalendarFallback,
    CancelStub,
    CommandError,
    CommandResult,
    EventOut,
    ExportIcs,
    FreeSlot,
    GetActiveStub,
    HoldReason,
    ListCalendars,
    MergeStub,
    PrepareOrCreate,
    QueryRange,
    QueryResult,
    StubOut,
    StubSlots,
    StubStatus,
    SuggestFree,
)
from calagent.contracts.envelope import Envelope
from calagent.contracts.time import RangeRequest, ResolveRequest
from calagent.runtime.clock import Clock
from calagent.runtime.settings import Settings

MAX_RANGE = timedelta(days=366)
# All-day events are stored as instants of the zone they were made in; widen the search so a
# user who moved zones still sees the whole local day blocked.
ALL_DAY_SLACK = timedelta(days=1)

Command = PrepareOrCreate | MergeStub | CancelStub
Query = QueryRange | SuggestFree | GetActiveStub | ListCalendars | ExportIcs


@dataclass(frozen=True)
class CommandConfig:
    calendars: tuple[str, ...]
    stub_ttl: timedelta
    working_hours: tuple[time, time]
    holiday_country: str

    @classmethod
    def from_settings(cls, settings: Settings) -> CommandConfig:
        return cls(
            calendars=settings.calendars,
            stub_ttl=timedelta(minutes=settings.stub_ttl_minutes),
            working_hours=parse_working_hours(settings.working_hours),
            holiday_country=settings.holiday_country,
        )


def new_id() -> str:
    return uuid.uuid4().hex


def error_result(code: str, message: str) -> CommandResult:
    return CommandResult(
        status="error", error=CommandError.model_validate({"code": code, "message": message})
    )


def query_error(code: str, message: str) -> QueryResult:
    return QueryResult(error=CommandError.model_validate({"code": code, "message": message}))


def event_out(event: Event, tz: ZoneInfo) -> EventOut:
    start = event.start.astimezone(tz)
    return EventOut(
        id=event.id,
        title=event.title,
        start=start,
        end=event.end.astimezone(tz),
        all_day=event.all_day,
        calendar=event.calendar,
        completed=event.completed,
        weekday=start.isoweekday(),
        tz=tz.key,
    )


def stub_out(stub: Stub, conflicts: list[Event] | tuple[Event, ...], tz: ZoneInfo) -> StubOut:
    return StubOut(
        id=stub.id,
        status=stub.status,
        title=stub.title,
        slots=stub.slots,
        candidates=stub.candidates,
        conflicts_with=tuple(event_out(ev, tz) for ev in conflicts),
        hold_reason=stub.hold_reason if stub.status == "held" else None,
        proposed_start=stub.proposed_start.astimezone(tz) if stub.proposed_start else None,
        proposed_end=stub.proposed_end.astimezone(tz) if stub.proposed_end else None,
        expires_at=stub.expires_at.astimezone(tz),
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


class CommandService:
    def __init__(self, store: Store, time_port: TimePort, config: CommandConfig, clock: Clock) -> None:
        self.store = store
        self.time = time_port
        self.config = config
        self.clock = clock

    # ---- commands --------------------------------------------------------------------------------

    async def execute(self, command: Command) -> CommandResult:
        envelope = command.envelope
        try:
            tz = zone(envelope.tz)
        except InvalidZoneError as exc:
            return error_result("invalid_zone", str(exc))
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
        stub: Stub | None = None
        if command.active_command_id:
            found = await turn.uow.get_stub(turn.user_id, command.active_command_id)
            if found is not None and found.active:
                if found.expired_at(turn.now):
                    return await self._expire(turn, found)
                stub = found
        if stub is None:
            # A fresh request: whatever stub was pending is given up, the new one takes its place.
            await self._supersede_active(turn)
            slots = merge_slots(StubSlots(), slots_from_args(args), command.patch)
            return await self._evaluate(
                turn, args.title, slots, None, hold=command.hold, confirmed=False, allow_conflict=False
            )
        slots = merge_slots(stub.slots, slots_from_args(args), command.patch, stub.candidates)
        hold = command.hold or stub.requested_hold
        # Code's half of the override: the stub really is in `conflict`; the model's half: the flag.
        allow_conflict = stub.status == "conflict" and args.allow_conflict is True
        return await self._evaluate(
            turn,
            stub.title,
            slots,
            stub,
            hold=hold,
            confirmed=stub.confirmed and command.hold is None,
            allow_conflict=allow_conflict,
        )

    async def _merge(self, turn: _Turn, command: MergeStub) -> CommandResult:
        stub = await turn.uow.get_stub(turn.user_id, command.command_id)
        if stub is None or not stub.active:
            return error_result("no_active_command", "no active schedule command with that id")
        if stub.expired_at(turn.now):
            return await self._expire(turn, stub)
        slots = merge_slots(stub.slots, None, command.patch, stub.candidates)
        confirmed = stub.confirmed or (command.confirm and stub.status == "held")
        return await self._evaluate(
            turn, stub.title, slots, stub, hold=stub.requested_hold, confirmed=confirmed, allow_conflict=False
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

    async def _supersede_active(self, turn: _Turn) -> None:
        old = await turn.uow.active_stub(turn.user_id)
        if old is not None:
            await self._transition(turn, old, "expired" if old.expired_at(turn.now) else "cancelled")

    # ---- queries ---------------------------------------------------------------------------------

    async def query(self, query: Query) -> QueryResult:
        try:
            tz = zone(query.envelope.tz)
        except InvalidZoneError as exc:
            return query_error("invalid_zone", str(exc))
        if isinstance(query, QueryRange):
            return await self._query_range(query, tz)
        if isinstance(query, SuggestFree):
            return await self._suggest_free(query, tz)
        user_id = query.envelope.user_id
        async with self.store.unit_of_work() as uow:
            if isinstance(query, GetActiveStub):
                stub = await uow.active_stub(user_id)
                if stub is None or stub.expired_at(self.clock.now()):
                    return QueryResult(db_ms=uow.db_ms)
                conflicts = await uow.events_by_ids(user_id, stub.conflict_event_ids)
                return QueryResult(stub=stub_out(stub, conflicts, tz), db_ms=uow.db_ms)
            if isinstance(query, ListCalendars):
                names = await uow.calendars(user_id, self.config.calendars)
                await uow.commit()
                return QueryResult(calendars=tuple(names), db_ms=uow.db_ms)
            events = await uow.all_events(user_id)
            return QueryResult(ics=self._ics(events, tz), db_ms=uow.db_ms)

    async def _range(
        self, envelope: Envelope, tz: ZoneInfo, start_symbol: str | None, end_symbol: str | None
    ) -> tuple[datetime, datetime] | QueryResult:
        """Resolve range symbols into validated bounds, or the error result to answer with."""
        if not (start_symbol and end_symbol):
            return query_error("invalid_range", "a range needs both a start and an end")
        resolved = await self.time.resolve_range(
            RangeRequest(
                start=start_symbol,
                end=end_symbol,
                now=envelope.occurred_at,
                tz=envelope.tz,
                holiday_country=self.config.holiday_country,
            )
        )
        if resolved.error is not None:
            return query_error(resolved.error.code, resolved.error.message)
        if resolved.start is None or resolved.end is None:
            return query_error("invalid_range", "the range did not resolve")
        return self._check_range(resolved.start, resolved.end) or (resolved.start, resolved.end)

    @staticmethod
    def _check_range(start: datetime, end: datetime) -> QueryResult | None:
        if end <= start:
            return query_error("invalid_range", "the end of a range must be after its start")
        if end - start > MAX_RANGE:
            return query_error("invalid_range", "a range may span at most 366 days")
        return None

    async def _query_range(self, query: QueryRange, tz: ZoneInfo) -> QueryResult:
        if query.start_at is not None and query.end_at is not None:
            # Absolute bounds (the gateway's GET /v1/events); a naive one is read in the user's zone.
            start = query.start_at if query.start_at.tzinfo else query.start_at.replace(tzinfo=tz)
            end = query.end_at if query.end_at.tzinfo else query.end_at.replace(tzinfo=tz)
            invalid = self._check_range(start, end)
            if invalid is not None:
                return invalid
        else:
            bounds = await self._range(query.envelope, tz, query.start_symbol, query.end_symbol)
            if isinstance(bounds, QueryResult):
                return bounds
            start, end = bounds
        async with self.store.unit_of_work() as uow:
            events = await uow.events_overlapping(
                query.envelope.user_id, start, end, incomplete_only=query.incomplete_only
            )
        return QueryResult(
            events=tuple(event_out(ev, tz) for ev in events),
            range_start=start.astimezone(tz),
            range_end=end.astimezone(tz),
            db_ms=uow.db_ms,
        )

    async def _suggest_free(self, query: SuggestFree, tz: ZoneInfo) -> QueryResult:
        bounds = await self._range(query.envelope, tz, query.start_symbol, query.end_symbol)
        if isinstance(bounds, QueryResult):
            return bounds
        start, end = bounds
        async with self.store.unit_of_work() as uow:
            events = await uow.events_overlapping(
                query.envelope.user_id, start - ALL_DAY_SLACK, end + ALL_DAY_SLACK, incomplete_only=True
            )
        slots = free_slots(
            start,
            end,
            events,
            duration=timedelta(minutes=query.duration_minutes),
            working_hours=self.config.working_hours,
            now=query.envelope.occurred_at,
            tz=tz,
            limit=query.max_suggestions,
        )
        return QueryResult(
            range_start=start.astimezone(tz),
            range_end=end.astimezone(tz),
            free_slots=tuple(
                FreeSlot(start=s.astimezone(tz), end=e.astimezone(tz), weekday=s.astimezone(tz).isoweekday())
                for s, e in slots
            ),
            db_ms=uow.db_ms,
        )

    def _ics(self, events: list[Event], tz: ZoneInfo) -> str:
        cal = Calendar()
        cal.add("prodid", "-//calagent//commands//EN")
        cal.add("version", "2.0")
        stamp = self.clock.now().astimezone(UTC)
        for ev in events:
            item = IcsEvent()
            item.add("uid", f"{ev.id}@calagent")
            item.add("dtstamp", stamp)
            if ev.all_day:
                item.add("dtstart", ev.start.astimezone(tz).date())
                item.add("dtend", ev.end.astimezone(tz).date())
            else:
                item.add("dtstart", ev.start)
                item.add("dtend", ev.end)
            item.add("summary", ev.title)
            item.add("categories", [ev.calendar])
            cal.add_component(item)
        return bytes(cal.to_ical()).decode("utf-8")
