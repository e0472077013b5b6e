"""Reads: ranges, free time, found events, the active stub, the change log, plans and the export.
Nothing here writes; an expired stub is simply not reported (commands end it on the next write).
The requests on the query path that do write are served by the rooms that write (`service.py`):
the calendars and a turn's context (`calendars.py`), the feed secret (`feeds.py`), deleting a
plan (`plans.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeGuard
from zoneinfo import ZoneInfo

from calagent.commands.config import CommandConfig
from calagent.commands.domain.freetime import suggest
from calagent.commands.domain.model import Stub
from calagent.commands.domain.pending import lapsed
from calagent.commands.domain.timeutil import zone
from calagent.commands.ical.render import render_ics
from calagent.commands.ports import Store, TimePort, UnitOfWork
from calagent.commands.reads import ALL_DAY_SLACK, events_in
from calagent.commands.suggestions import suggestion_people
from calagent.commands.tasks.time import with_risk
from calagent.commands.txn import query_error
from calagent.commands.views import change_out, event_out, stub_out
from calagent.contracts.commands import StubOut, waits_beside
from calagent.contracts.envelope import Envelope
from calagent.contracts.limits import (
    OUT_OF_RANGE_MESSAGE,
    RANGE_TOO_LONG_MESSAGE,
    range_too_long,
    within_supported_years,
)
from calagent.contracts.queries import (
    AnyQuery,
    ExportIcs,
    FindEventsQuery,
    GetActiveStub,
    ListChanges,
    ListPlans,
    ListWaiting,
    QueryRange,
    QueryResult,
    SuggestFree,
)
from calagent.contracts.suggestions import FreeSlot, SlotAttendee
from calagent.contracts.time import RangeRequest
from calagent.runtime.clock import Clock

Query = AnyQuery


def title_matches(title: str, text: str | None) -> bool:
    """Any of the words (or the whole text, for scripts without spaces) appears in the title."""
    if not text or not text.strip():
        return True
    folded = title.casefold()
    terms = [t for t in text.casefold().split() if t]
    return text.casefold().strip() in folded or any(t in folded for t in terms)


def check_range(start: datetime, end: datetime, tz: ZoneInfo) -> QueryResult | None:
    if end <= start:
        return query_error("invalid_range", "the end of a range must be after its start")
    if range_too_long(start, end, tz):
        return query_error("invalid_range", RANGE_TOO_LONG_MESSAGE)
    if not (within_supported_years(start) and within_supported_years(end)):
        return query_error("invalid_range", OUT_OF_RANGE_MESSAGE)
    return None


class Queries:
    def __init__(self, store: Store, time_port: TimePort, config: CommandConfig, clock: Clock) -> None:
        self.store = store
        self.time = time_port
        self.config = config
        self.clock = clock
        self.handlers: dict[type[Query], Callable[[Any, ZoneInfo], Awaitable[QueryResult]]] = {
            QueryRange: self._query_range,
            SuggestFree: self._suggest_free,
            FindEventsQuery: self._find,
            GetActiveStub: self._get_active,
            ListChanges: self._list_changes,
            ListWaiting: self._list_waiting,
            ListPlans: self._list_plans,
            ExportIcs: self._export,
        }

    async def run(self, query: Query, tz: ZoneInfo) -> QueryResult:
        """A query in the asker's zone (the feed, which has none, is `feed`)."""
        return await self.handlers[type(query)](query, tz)

    async def _get_active(self, query: GetActiveStub, tz: ZoneInfo) -> QueryResult:
        async with self.store.unit_of_work() as uow:
            return QueryResult(stub=await self.active(uow, query.envelope.user_id, tz), db_ms=uow.db_ms)

    async def _list_changes(self, query: ListChanges, tz: ZoneInfo) -> QueryResult:
        async with self.store.unit_of_work() as uow:
            found = await uow.changes.change_page(query.envelope.user_id, query.limit, query.before)
            return QueryResult(changes=tuple(change_out(c, tz) for c in found), db_ms=uow.db_ms)

    async def _list_waiting(self, query: ListWaiting, tz: ZoneInfo) -> QueryResult:
        user_id = query.envelope.user_id
        async with self.store.unit_of_work() as uow:
            offered = await self.active(uow, user_id, tz)
            now = (
                (offered,) if offered is not None and waits_beside(offered.kind, offered.hold_reason) else ()
            )
            # A read ends nothing: one whose event has started is left out, not expired.
            now_at = self.clock.now()
            later = tuple(
                stub_out(stub, (), tz)
                for stub in await uow.stubs.waiting_stubs(user_id)
                if not lapsed(stub, now_at)
            )
            return QueryResult(waiting=(*now, *later), db_ms=uow.db_ms)

    async def _list_plans(self, query: ListPlans, tz: ZoneInfo) -> QueryResult:
        async with self.store.unit_of_work() as uow:
            return QueryResult(plans=tuple(await uow.stubs.plans(query.envelope.user_id)), db_ms=uow.db_ms)

    async def _export(self, query: ExportIcs, tz: ZoneInfo) -> QueryResult:
        async with self.store.unit_of_work() as uow:
            events = await uow.events.all_events(query.envelope.user_id)
            # A block names its task's object by the UID that object carries (the outbox's rule).
            parents = await uow.tasks.uids_by_id(
                query.envelope.user_id, {e.task_id for e in events if e.task_id}
            )
            return QueryResult(ics=render_ics(events, tz, self.clock.now(), parents), db_ms=uow.db_ms)

    async def active(
        self, uow: UnitOfWork, user_id: str, tz: ZoneInfo, named: str | None = None
    ) -> StubOut | None:
        """The user's active stub, or the one a message names (`named`: its card's id) while that
        one still waits for an answer — an offer waiting beside the conversation included."""
        stub = await self.answered_stub(uow, user_id, named)
        if not self.shows(stub):
            return None
        return stub_out(stub, await uow.events.events_by_ids(user_id, stub.conflict_event_ids), tz)

    async def answered_stub(self, uow: UnitOfWork, user_id: str, named: str | None) -> Stub | None:
        """The stub a message answers: the one it names while that one is active, else the
        user's active stub."""
        answered = await uow.stubs.get_stub(user_id, named) if named else None
        return answered if answered is not None and answered.active else await uow.stubs.active_stub(user_id)

    def shows(self, stub: Stub | None) -> TypeGuard[Stub]:
        """Whether a read shows `stub`: a read ends nothing, so a stub whose time ran out is left
        to the next write to end, and not shown."""
        return stub is not None and not lapsed(stub, self.clock.now())

    async def _range(
        self, envelope: Envelope, start_symbol: str | None, end_symbol: str | None
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
        return check_range(resolved.start, resolved.end, zone(envelope.tz)) or (resolved.start, resolved.end)

    async def _query_range(self, query: QueryRange, tz: ZoneInfo) -> QueryResult:
        if query.start_at is not None and query.end_at is not None:
            # Absolute bounds (the gateway's GET /v1/events); a naive one is read in the user's zone.
            start = query.start_at if query.start_at.tzinfo else query.start_at.replace(tzinfo=tz)
            end = query.end_at if query.end_at.tzinfo else query.end_at.replace(tzinfo=tz)
            invalid = check_range(start, end, tz)
            if invalid is not None:
                return invalid
        else:
            bounds = await self._range(query.envelope, query.start_symbol, query.end_symbol)
            if isinstance(bounds, QueryResult):
                return bounds
            start, end = bounds
        user_id = query.envelope.user_id
        async with self.store.unit_of_work() as uow:
            events = await events_in(uow, user_id, start, end, incomplete_only=query.incomplete_only)
            # What is not done yet includes the user's open tasks (contract §21), at risk or not.
            tasks = (
                await with_risk(
                    uow,
                    self.config,
                    user_id,
                    await uow.tasks.list_tasks(user_id, open_only=True),
                    tz,
                    self.clock.now(),
                )
                if query.incomplete_only
                else []
            )
        return QueryResult(
            events=tuple(event_out(ev, tz) for ev in events),
            tasks=tuple(tasks),
            range_start=start.astimezone(tz),
            range_end=end.astimezone(tz),
            db_ms=uow.db_ms,
        )

    async def _suggest_free(self, query: SuggestFree, tz: ZoneInfo) -> QueryResult:
        bounds = await self.window(query.envelope, query.start_symbol, query.end_symbol)
        if isinstance(bounds, QueryResult):
            return bounds
        async with self.store.unit_of_work() as uow:
            found = await self.suggested(uow, query, bounds, tz)
        return found.model_copy(update={"db_ms": uow.db_ms})

    async def window(
        self, envelope: Envelope, start_symbol: str, end_symbol: str
    ) -> tuple[datetime, datetime] | QueryResult:
        """A suggestion's range symbols resolved (or the error result to answer with)."""
        return await self._range(envelope, start_symbol, end_symbol)

    async def suggested(
        self, uow: UnitOfWork, query: SuggestFree, bounds: tuple[datetime, datetime], tz: ZoneInfo
    ) -> QueryResult:
        """The slots a suggestion offers over `bounds`, read in `uow` (a query's own, or the
        transaction of a write that offers them: a proposal to someone outside)."""
        start, end = bounds
        found = await suggestion_people(
            uow,
            query,
            (start - ALL_DAY_SLACK, end + ALL_DAY_SLACK),
            tz,
            self.config.working_hours,
            self.config.default_tz,
        )
        offered = suggest(
            found.people,
            start,
            end,
            duration=timedelta(minutes=query.duration_minutes),
            now=query.envelope.occurred_at,
            tz=tz,
            limit=query.max_suggestions,
            unknown=len(found.named.unknown),
        )
        who = found.who(query.envelope.user_id)
        return QueryResult(
            range_start=start.astimezone(tz),
            range_end=end.astimezone(tz),
            free_slots=tuple(
                FreeSlot(
                    start=slot.start.astimezone(tz),
                    end=slot.end.astimezone(tz),
                    weekday=slot.start.astimezone(tz).isoweekday(),
                    confidence=slot.confidence,
                    attendees=tuple(
                        SlotAttendee(who=name, availability=shown)
                        for name, shown in zip(who, slot.availability, strict=True)
                    ),
                    reason=slot.reason,
                )
                for slot in offered.slots
            ),
            people=found.told(offered.busy) if query.attendees else None,
            empty_reason=offered.empty_reason,
        )

    async def _find(self, query: FindEventsQuery, tz: ZoneInfo) -> QueryResult:
        bounds = await self._range(query.envelope, query.start_symbol, query.end_symbol)
        if isinstance(bounds, QueryResult):
            return bounds
        start, end = bounds
        async with self.store.unit_of_work() as uow:
            events = await events_in(uow, query.envelope.user_id, start, end)
        found = [e for e in events if title_matches(e.title, query.text)]
        return QueryResult(
            events=tuple(event_out(e, tz) for e in found),
            range_start=start.astimezone(tz),
            range_end=end.astimezone(tz),
            db_ms=uow.db_ms,
        )
