"""What the turn needs from the outside, as protocols: the commands and time services over the
bus, the agent's own store. Tests pass hand-written fakes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol

from calagent.contracts.commands import AnyCommand, CommandResult
from calagent.contracts.queries import (
    FindEventsQuery,
    GetActiveStub,
    ListCalendars,
    QueryRange,
    QueryResult,
    SuggestFree,
    TurnContext,
)
from calagent.contracts.time import ParsedReply
from calagent.contracts.turns import TurnAnswer, TurnEvent

# What the agent sends the commands service: the writes and reads of a turn. Every command the
# contract declares is one the agent may send (the commands service handles each, a unit test says).
AgentCommand = AnyCommand
AgentQuery = TurnContext | QueryRange | SuggestFree | GetActiveStub | ListCalendars | FindEventsQuery


class CommandsPort(Protocol):
    async def execute(self, command: AgentCommand) -> CommandResult: ...

    async def query(self, query: AgentQuery) -> QueryResult: ...


class TimePort(Protocol):
    async def parse_reply(self, text: str, now: datetime, tz: str) -> ParsedReply: ...


class StorePort(Protocol):
    """The agent's memories and archive as the tools read and write them. A turn's own messages
    are written by the transactions that start and finish it (see `TurnFinish`), not through here."""

    async def save_memory(self, user_id: str, content: str, key: str, at: datetime) -> None: ...

    async def search_memory(self, user_id: str, query: str) -> list[str]: ...

    async def search_archive(self, user_id: str, query: str, before_turn: str) -> list[str]: ...


EventSink = Callable[[TurnEvent], Awaitable[None]]

TurnFinish = Callable[[TurnAnswer, str | None, str | None], Awaitable[None]]
"""Ends the turn before its answer is told: the reply archived (with the stub it offered and whose
words it quoted besides the user's, if any), the answer stored for a retry with the same key, the
user's lease given back — one transaction."""
