"""The application layer: the one dispatch the bus handlers call (`on_command`, `on_query`), one
entry for commands (`writes.py`) and one for queries, built from the settings in one place
(`bootstrap.py`). A query is a read (`queries.py`) unless it writes: the calendars and a
turn's context (`calendars.py`), the feed secret (`feeds.py`) and deleting a plan (`plans.py`)
are served by their own rooms."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from opentelemetry import trace

from calagent.commands.calendars import Calendars
from calagent.commands.domain.timeutil import InvalidZoneError, zone
from calagent.commands.feeds import Feeds
from calagent.commands.handlers import answered
from calagent.commands.plans import PlanDeletion
from calagent.commands.ports import Store
from calagent.commands.queries import Queries, Query
from calagent.commands.reads import own_addresses
from calagent.commands.txn import error_result, query_error
from calagent.commands.views import organizers_named, with_organizers
from calagent.commands.writes import Command, Writes
from calagent.contracts.commands import CommandRequest, CommandResult
from calagent.contracts.queries import (
    DeletePlan,
    FeedCalendar,
    ListCalendars,
    QueryRequest,
    QueryResult,
    RotateFeed,
    TurnContext,
)
from calagent.contracts.tasks import ListTasks, SaveTask

Answer = TypeVar("Answer", CommandResult, QueryResult)
tracer = trace.get_tracer("calagent.commands")


class CommandService:
    def __init__(
        self,
        store: Store,
        writes: Writes,
        queries: Queries,
        calendars: Calendars,
        feeds: Feeds,
        plans: PlanDeletion,
    ) -> None:
        self.store = store
        self.writes = writes
        self.queries = queries
        self.calendars = calendars
        self.feeds = feeds
        self.tasks = writes.rooms.tasks
        # The queries that write, each served by the room that holds what it writes.
        self.writing_queries: dict[type[Query], Callable[[Any, ZoneInfo], Awaitable[QueryResult]]] = {
            TurnContext: self.calendars.turn_context,
            ListCalendars: self.calendars.list_calendars,
            RotateFeed: self.feeds.rotate_feed,
            DeletePlan: plans.delete_plan,
            # Tasks (contract §21): a save places them as blocks; both go with the room that writes them.
            ListTasks: self.tasks.list_tasks,
            SaveTask: self.tasks.save_task,
        }

    async def on_command(self, request: CommandRequest) -> CommandResult:
        command = request.command
        with tracer.start_as_current_span(f"command.{command.kind}") as span:
            result = await answered(command.kind, self.execute(command), error_result, "invalid_arguments")
            span.set_attribute("calagent.status", result.status)
            span.set_attribute("calagent.db_ms", result.db_ms)
            return result

    async def on_query(self, request: QueryRequest) -> QueryResult:
        query = request.query
        with tracer.start_as_current_span(f"query.{query.kind}") as span:
            result = await answered(query.kind, self.query(query), query_error, "invalid_range")
            span.set_attribute("calagent.db_ms", result.db_ms)
            return result

    async def execute(self, command: Command) -> CommandResult:
        try:
            tz = zone(command.envelope.tz)
        except InvalidZoneError as exc:
            return error_result("invalid_zone", str(exc))
        return await self._organizers_known(await self.writes.run(command, tz), command.envelope.user_id)

    async def query(self, query: Query) -> QueryResult:
        if isinstance(query, FeedCalendar):
            # No envelope: the secret names the user, and the feed is served in the zone saved with it.
            return await self.feeds.feed(query)
        try:
            tz = zone(query.envelope.tz)
        except InvalidZoneError as exc:
            return query_error("invalid_zone", str(exc))
        writing = self.writing_queries.get(type(query))
        if writing is not None:
            result = await writing(query, tz)
        else:
            result = await self.queries.run(query, tz)
        return await self._organizers_known(result, query.envelope.user_id)

    async def _organizers_known(self, result: Answer, user_id: str) -> Answer:
        """The answer with each event it shows saying whether the user organizes it: one read of
        the user's addresses, only when an event names an organizer (contract §19: the agent
        tells whose words an event is by it, without a request of its own)."""
        if not organizers_named(result):
            return result
        async with self.store.unit_of_work() as uow:
            own = await own_addresses(uow, user_id)
        return with_organizers(result, own)
