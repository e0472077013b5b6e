"""The user's calendars, made under their default names the first time a request asks for them
(named in that request's language): the list of calendars, and a turn's context, which reads them
in the same transaction as the active stub and takes the sync notices (each is told once). Both
commit, so neither is served by the read-only `Queries`."""

from __future__ import annotations

import asyncio
from zoneinfo import ZoneInfo

from calagent.commands.domain.calendars import NewCalendars
from calagent.commands.ports import Store, TimePort
from calagent.commands.queries import Queries
from calagent.commands.views import event_out
from calagent.contracts.queries import ListCalendars, QueryResult, SyncNotice, TurnContext
from calagent.contracts.time import ParsedReply, ParseReplyRequest


class Calendars:
    def __init__(self, store: Store, time_port: TimePort, config: NewCalendars, queries: Queries) -> None:
        self.store = store
        self.time = time_port
        self.config = config
        self.queries = queries  # the active stub, read as GetActiveStub reads it

    async def turn_context(self, query: TurnContext, tz: ZoneInfo) -> QueryResult:
        envelope = query.envelope
        user_id = envelope.user_id
        reading: asyncio.Task[ParsedReply] | None = None
        try:
            async with self.store.unit_of_work() as uow:
                stub = await self.queries.active(uow, user_id, tz, named=query.command_id)
                # Only an answer to an active stub is merged from its reading (the fast path): a
                # turn with no stub costs the time service nothing here. Asked as soon as the stub
                # is known, while the calendars are read, and awaited after the commit, so no
                # transaction waits on the bus.
                if stub is not None and query.text:
                    reading = asyncio.create_task(
                        self.time.parse_reply(
                            ParseReplyRequest(text=query.text, now=envelope.occurred_at, tz=envelope.tz)
                        )
                    )
                    # A reading left behind by a failed transaction is not an unretrieved error.
                    reading.add_done_callback(lambda task: task.cancelled() or task.exception())
                names = await uow.settings.calendars(user_id, self.config.named_for(envelope.lang))
                notices = await uow.sync.take_sync_notices(user_id)
                await uow.commit()  # a first turn creates the default calendars
            parsed = None if reading is None else await reading
        finally:
            if reading is not None and not reading.done():
                reading.cancel()
        return QueryResult(
            stub=stub,
            calendars=tuple(names),
            sync_notices=tuple(
                SyncNotice.model_validate({"outcome": outcome, "event": event_out(event, tz)})
                for outcome, event in notices
            ),
            parsed=parsed,
            db_ms=uow.db_ms,
        )

    async def list_calendars(self, query: ListCalendars, tz: ZoneInfo) -> QueryResult:
        async with self.store.unit_of_work() as uow:
            names = await uow.settings.calendars(
                query.envelope.user_id, self.config.named_for(query.envelope.lang)
            )
            await uow.commit()
            return QueryResult(calendars=tuple(names), db_ms=uow.db_ms)
