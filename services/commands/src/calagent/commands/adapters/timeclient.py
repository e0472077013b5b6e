"""The time service, reached over the bus (never imported: services share only contracts)."""

from __future__ import annotations

from calagent.contracts import wire
from calagent.contracts.time import (
    ParsedReply,
    ParseReplyRequest,
    RangeRequest,
    RangeResult,
    ResolveRequest,
    ResolveResult,
)
from calagent.runtime.bus import Bus


class BusTimeClient:
    def __init__(self, bus: Bus, timeout: float = 5.0) -> None:
        self.bus = bus
        self.timeout = timeout

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        return await self.bus.request(wire.TIME_RESOLVE, request, timeout=self.timeout)

    async def resolve_range(self, request: RangeRequest) -> RangeResult:
        return await self.bus.request(wire.TIME_RESOLVE_RANGE, request, timeout=self.timeout)

    async def parse_reply(self, request: ParseReplyRequest) -> ParsedReply:
        return await self.bus.request(wire.TIME_PARSE_REPLY, request, timeout=self.timeout)
