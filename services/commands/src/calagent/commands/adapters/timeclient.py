"""The time service, reached over the bus (never imported: services share only contracts)."""

from __future__ import annotations

from functools import partial

from calagent.contracts import wire
from calagent.runtime.bus import Bus


class BusTimeClient:
    """`contracts.time.TimeService` over the bus: each answer a request to its typed endpoint."""

    def __init__(self, bus: Bus, timeout: float = 5.0) -> None:
        self.resolve = partial(bus.request, wire.TIME_RESOLVE, timeout=timeout)
        self.resolve_range = partial(bus.request, wire.TIME_RESOLVE_RANGE, timeout=timeout)
        self.parse_reply = partial(bus.request, wire.TIME_PARSE_REPLY, timeout=timeout)
        self.choose_slot = partial(bus.request, wire.TIME_CHOOSE_SLOT, timeout=timeout)
