"""The user's calendars, made under their default names the first time a request asks for them
(named in that request's language): the list of calendars, and a turn's context, which reads them
with the active stub and takes the sync notices (each is told once) in one statement. Both commit,
so neither is served by the read-only `Queries`."""

from __future__ import annotations

from collections.abc import Sequence
from zoneinfo import ZoneInfo

from calagent.commands.domain.calendars import NewCalendars
from calagent.commands.domain.model import Event
from calagent.commands.ports import Store, TimePort, TurnReading
from calagent.commands.queries import Queries
from calagent.commands.views import event_out, stub_out
from calagent.contracts.queries import ListCalendars, QueryResult, SyncNotice, TurnContext
from calagent.contracts.tasks import TaskOut
from calagent.contracts.time import ParseReplyRequest


class Calendars:
    def __init__(self, store: Store, time_port: TimePort, config: NewCalendars, queries: Queries) -> None:
        self.store = store
        self.time = time_port
        self.config = config
        self.queries = queries  # the active stub, read as GetActiveStub reads it

    async def turn_context(self, query: TurnContext, tz: ZoneInfo) -> QueryResult:
        envelope = query.envelope
        defaults = self.config.named_for(envelope.lang)
        if query.command_id is None:
            found = await self.store.turn_context(envelope.user_id, defaults)
        else:
            found = await self._answering(envelope.user_id, query.command_id, defaults)
        stub = stub_out(found.stub, found.conflicts, tz) if self.queries.shows(found.stub) else None
        # Only an answer to an active stub is merged from its reading (the fast path): a turn with
        # no stub costs the time service nothing here.
        parsed = None
        if stub is not None and query.text:
            parsed = await self.time.parse_reply(
                ParseReplyRequest(text=query.text, now=envelope.occurred_at, tz=envelope.tz)
            )
        return QueryResult(
            stub=stub,
            calendars=tuple(found.calendars),
            connected_calendars=tuple(found.connected),
            sync_notices=tuple(_notice(outcome, about, tz) for outcome, about in found.notices),
            parsed=parsed,
            db_ms=found.db_ms,
        )

    async def _answering(self, user_id: str, named: str, defaults: Sequence[str]) -> TurnReading:
        """The context of a message that names a card: what `Store.turn_context` reads, with the
        stub it answers, in one transaction."""
        async with self.store.unit_of_work() as uow:
            stub = await self.queries.answered_stub(uow, user_id, named)
            names = await uow.settings.calendars(user_id, defaults)
            notices = await uow.sync.take_sync_notices(user_id)
            conflicts = await uow.events.events_by_ids(user_id, stub.conflict_event_ids) if stub else []
            connected = await uow.settings.connected_calendars(user_id)
            await uow.commit()  # a first turn creates the default calendars
        return TurnReading(stub, names, notices, conflicts, db_ms=uow.db_ms, connected=connected)

    async def list_calendars(self, query: ListCalendars, tz: ZoneInfo) -> QueryResult:
        async with self.store.unit_of_work() as uow:
            names = await uow.settings.calendars(
                query.envelope.user_id, self.config.named_for(query.envelope.lang)
            )
            await uow.commit()
            return QueryResult(calendars=tuple(names), db_ms=uow.db_ms)


def _notice(outcome: str, about: Event | TaskOut, tz: ZoneInfo) -> SyncNotice:
    if isinstance(about, TaskOut):
        return SyncNotice.model_validate({"outcome": outcome, "task": about})
    return SyncNotice.model_validate({"outcome": outcome, "event": event_out(about, tz)})
