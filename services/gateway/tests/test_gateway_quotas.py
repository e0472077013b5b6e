"""What a turn meets at the gate: the rate counter shared by replicas on a real bus (never more than
the limit between them, one write per turn), and while the shared counters cannot be reached (a
cluster node lost with the counters' leader) a rate lets the turn through, a token budget does not
run it unchecked."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.kv import KeyValue

from calagent.gateway import quotas as quotas_module
from calagent.gateway.quotas import BUCKET, QuotaExceededError, Quotas, QuotaUnavailableError
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


@pytest.mark.unit
async def test_a_rate_whose_counter_is_unreachable_lets_the_turn_through() -> None:
    await quotas(CALAGENT_USER_TURNS_PER_MINUTE=30).admit("u-1", "Asia/Shanghai")


@pytest.mark.unit
async def test_a_token_budget_whose_counter_is_unreachable_does_not_run_the_turn() -> None:
    gate = quotas(CALAGENT_USER_TURNS_PER_MINUTE=30, CALAGENT_USER_DAILY_TOKENS=1000)
    with pytest.raises(QuotaUnavailableError):
        await gate.admit("u-1", "Asia/Shanghai")


# ---- the rate counter on a real bus ----------------------------------------------------------------

# One wall-clock minute for every check below: a test must not straddle two counters.
WALL = 1_790_000_000.0
TZ = "Asia/Shanghai"


async def admitted(gate: Quotas, user_id: str) -> bool:
    try:
        await gate.admit(user_id, TZ)
    except QuotaExceededError:
        return False
    return True


@asynccontextmanager
async def replicas(nats_url: str, count: int, limit: int) -> AsyncIterator[list[Quotas]]:
    """`count` gateways' gates, each on its own connection, sharing the counters' bucket."""
    buses = [Bus(nats_url, "gateway") for _ in range(count)]
    for bus in buses:
        await bus.start()
    try:
        settings = Settings(CALAGENT_USER_TURNS_PER_MINUTE=limit)
        yield [Quotas(bus, settings, FrozenClock(NOW), wall=lambda: WALL) for bus in buses]
    finally:
        for bus in buses:
            await bus.close()


@pytest.mark.integration
async def test_two_replicas_never_admit_more_than_the_limit_together(
    nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What is under test is the compare-and-set, not how long a contended check may take.
    monkeypatch.setattr(quotas_module, "RATE_CHECK_S", 30.0)
    user_id = f"u-{uuid.uuid4().hex[:10]}"
    async with replicas(nats_url, 2, limit=5) as (one, two):
        # Each replica's memory of the counter goes stale as the other one moves it.
        first = await asyncio.gather(*(admitted((one, two)[i % 2], user_id) for i in range(8)))
        for gate in (one, two, two, one):
            first.append(await admitted(gate, user_id))
        async with replicas(nats_url, 1, limit=5) as (fresh,):
            late = await admitted(fresh, user_id)
    assert sum(first) == 5
    assert late is False


@pytest.mark.integration
async def test_the_rate_check_sets_the_counter_without_reading_it(nats_url: str) -> None:
    user_id = f"u-{uuid.uuid4().hex[:10]}"
    seen: list[str] = []

    async def on_message(msg: Msg) -> None:
        seen.append(msg.subject)

    watcher = await nats.connect(nats_url)
    try:
        async with replicas(nats_url, 1, limit=5) as (gate,):
            await gate._bucket()  # opened before watching: opening is not the check
            await watcher.subscribe("$JS.API.>", cb=on_message)
            await watcher.subscribe(f"$KV.{BUCKET}.>", cb=on_message)
            await watcher.flush()
            for _ in range(3):
                assert await admitted(gate, user_id)
            await watcher.flush()
    finally:
        await watcher.close()
    # The first turn of the minute creates the counter, the next ones set it: one write each.
    assert len([s for s in seen if s.startswith("$KV.")]) == 3
    assert [s for s in seen if ".GET." in s] == []
