"""The agent's view of the commands and time services: requests over the bus.

A `transient` or timed-out command is retried with the same idempotency key, so a retry can never
write twice; commands sends "persisted" only after its commit.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from calagent.agent.ports import AgentCommand, AgentQuery
from calagent.contracts import wire
from calagent.contracts.commands import CommandRequest, CommandResult
from calagent.contracts.queries import QueryRequest, QueryResult
from calagent.contracts.time import ParsedReply, ParseReplyRequest
from calagent.runtime.bus import Bus, BusRequestError
from calagent.runtime.settle import is_transient

log = logging.getLogger("calagent.agent.clients")

RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0)


class CommandsClient:
    def __init__(self, bus: Bus, timeout: float = 10.0) -> None:
        self.bus = bus
        self.timeout = timeout

    async def execute(self, command: AgentCommand) -> CommandResult:
        request = CommandRequest(command=command)
        for attempt, delay in enumerate((*RETRY_DELAYS, None)):
            try:
                return await self.bus.request(wire.COMMAND_EXECUTE, request, timeout=self.timeout)
            except BusRequestError as exc:
                if not is_transient(exc) or delay is None:
                    raise
                log.warning("command attempt %s failed (%s); retrying with the same key", attempt + 1, exc)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def query(self, query: AgentQuery) -> QueryResult:
        request = QueryRequest(query=query)
        for delay in (*RETRY_DELAYS, None):
            try:
                return await self.bus.request(wire.COMMAND_QUERY, request, timeout=self.timeout)
            except BusRequestError as exc:
                if not is_transient(exc) or delay is None:
                    raise
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")


class TimeClient:
    def __init__(self, bus: Bus, timeout: float = 5.0) -> None:
        self.bus = bus
        self.timeout = timeout

    async def parse_reply(self, text: str, now: datetime, tz: str) -> ParsedReply:
        return await self.bus.request(
            wire.TIME_PARSE_REPLY, ParseReplyRequest(text=text[:4000], now=now, tz=tz), timeout=self.timeout
        )
