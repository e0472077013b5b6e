"""What a turn meets at the gate while the shared counters cannot be reached (a cluster node lost
with the counters' leader): a rate lets it through, a token budget does not run it unchecked."""

from __future__ import annotations

from datetime import datetime

import pytest
from nats.js.kv import KeyValue

from calagent.gateway.quotas import Quotas, QuotaUnavailableError
from calagent.runtime.bus import Bus
from calagent.runtime.clock import FrozenClock
from calagent.runtime.settings import Settings

NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")


class UnreachableCounters(Quotas):
    async def _bucket(self) -> KeyValue:
        raise ConnectionError("no leader for the bucket")


def quotas(**settings: object) -> Quotas:
    # The bus is never connected: the counters are what this test takes away.
    bus = Bus("nats://127.0.0.1:9", "gateway")
    return UnreachableCounters(bus, Settings(**settings), FrozenClock(NOW))  # type: ignore[arg-type]


async def test_a_rate_whose_counter_is_unreachable_lets_the_turn_through() -> None:
    await quotas(CALAGENT_USER_TURNS_PER_MINUTE=30).admit("u-1", "Asia/Shanghai")


async def test_a_token_budget_whose_counter_is_unreachable_does_not_run_the_turn() -> None:
    gate = quotas(CALAGENT_USER_TURNS_PER_MINUTE=30, CALAGENT_USER_DAILY_TOKENS=1000)
    with pytest.raises(QuotaUnavailableError):
        await gate.admit("u-1", "Asia/Shanghai")
