"""The time service: stateless request-reply over NATS on top of the pure resolver."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from calagent.contracts import wire
from calagent.contracts.time import (
    ChooseSlotRequest,
    ChosenSlot,
    ParsedReply,
    ParseReplyRequest,
    RangeRequest,
    RangeResult,
    ResolveRequest,
    ResolveResult,
)
from calagent.runtime.bus import Bus
from calagent.runtime.clock import Clock, SystemClock
from calagent.runtime.settings import Settings, load_settings
from calagent.timeparse.domain.choice import choose
from calagent.timeparse.domain.replies import parsed_reply
from calagent.timeparse.domain.symbols import resolve, resolve_range


class TimeparseService:
    name = "timeparse"

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock

    def wire(self, bus: Bus) -> None:
        bus.serve(wire.TIME_RESOLVE, self.on_resolve)
        bus.serve(wire.TIME_RESOLVE_RANGE, self.on_resolve_range)
        bus.serve(wire.TIME_PARSE_REPLY, self.on_parse_reply)
        bus.serve(wire.TIME_CHOOSE_SLOT, self.on_choose_slot)

    async def start(self, bus: Bus) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def on_resolve(self, request: ResolveRequest) -> ResolveResult:
        return resolve(request)

    async def on_resolve_range(self, request: RangeRequest) -> RangeResult:
        return resolve_range(request)

    async def on_parse_reply(self, request: ParseReplyRequest) -> ParsedReply:
        # The patch and whether it is the whole message: the caller may merge with zero model
        # calls only a complete reply (contract section 8).
        # `now`/`tz` (optional) turn a day of the month (12号, 月底, the 12th) into a date; the
        # recurrence marker rides along for the contract section 9 hold.
        return parsed_reply(request.text, request.now, request.tz)

    async def on_choose_slot(self, request: ChooseSlotRequest) -> ChosenSlot:
        try:
            zones = [ZoneInfo(name) for name in request.zones]
        except (ZoneInfoNotFoundError, ValueError):
            # A zone commands stored is one it checked; one that no longer reads names nothing.
            return ChosenSlot()
        return ChosenSlot(index=choose(request.text, request.starts, zones))


def create_app(settings: Settings | None = None, clock: Clock | None = None) -> TimeparseService:
    return TimeparseService(settings or load_settings(), clock or SystemClock())
