"""What the turn needs from the outside, as protocols: the commands and time services over the
bus, the agent's own store. Tests pass hand-written fakes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol

from calagent.agent.domain.session import ArchivedMessage
from calagent.contracts.commands import (
    CancelStub,
    CommandResult,
    FindEventsQuery,
    GetActiveStub,
    ListCalendars,
    MergeStub,
    PrepareChange,
    PrepareOrCreate,
    ProposePlan,
    QueryRange,
    QueryResult,
    RevertChange,
    SuggestFree,
    TurnContext,
)
from calagent.contracts.time import ParsedReply
from calagent.contracts.turns import TurnEvent

# What the agent sends the commands service: the writes and reads of a turn.
AgentCommand = PrepareOrCreate | MergeStub | CancelStub | PrepareChange | ProposePlan | RevertChange
AgentQuery = TurnContext | QueryRange | SuggestFree | GetActiveStub | ListCalendars | FindEventsQuery


class CommandsPort(Protocol):
    async def execute(self, command: AgentCommand) -> CommandResult: ...

    async def query(self, query: AgentQuery) -> QueryResult: ...


class TimePort(Protocol):
    async def parse_reply(self, text: str, now: datetime, tz: str) -> ParsedReply: ...


class StorePort(Protocol):
    async def history(
        self, user_id: str, conversation_id: str, exclude_turn: str
    ) -> list[ArchivedMessage]: ...

    async def archive(
        self,
        user_id: str,
        conversation_id: str,
        role: str,
        content: str,
        turn_id: str,
        at: datetime,
        offer_command_id: str | None = None,
    ) -> None: ...

    async def save_memory(self, user_id: str, content: str, key: str, at: datetime) -> None: ...

    async def search_memory(self, user_id: str, query: str) -> list[str]: ...

    async def search_archive(self, user_id: str, query: str, before_turn: str) -> list[str]: ...


EventSink = Callable[[TurnEvent], Awaitable[None]]
