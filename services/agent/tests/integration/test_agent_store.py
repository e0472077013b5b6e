"""The agent's store on a real PostgreSQL: the per-user turn lease keeps one user's turns apart
without holding a connection, lets other users through, and outlives a crashed holder only for
its lease time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.agent.adapters.store import MIGRATIONS_DIR, SCHEMA, AgentStore, TurnStart
from calagent.runtime.db import make_engine, upgrade_async

pytestmark = pytest.mark.integration


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    await upgrade_async(database_url, MIGRATIONS_DIR, SCHEMA)
    engine = make_engine(database_url, pool_size=2)
    yield engine
    await engine.dispose()


async def test_one_users_turns_never_interleave_and_others_pass(engine: AsyncEngine) -> None:
    store = AgentStore(engine)
    trace: list[str] = []

    async def turn(user: str, name: str, hold: float) -> None:
        async with store.user_turn_lock(user):
            trace.append(f"{name}+")
            await asyncio.sleep(hold)
            trace.append(f"{name}-")

    first = asyncio.create_task(turn("alice", "a1", 0.3))
    await asyncio.sleep(0.05)
    await asyncio.gather(turn("alice", "a2", 0.01), turn("bob", "b1", 0.01), first)
    # bob ran while a1 held alice; a2 started only after a1 ended.
    assert trace.index("b1-") < trace.index("a1-")
    assert trace.index("a2+") > trace.index("a1-")


async def test_many_turns_in_flight_hold_no_connection(engine: AsyncEngine) -> None:
    # Pool of 2 (+ overflow): 60 users each holding their lease at once must not exhaust it.
    store = AgentStore(engine)
    inside = 0
    peak = 0

    async def turn(user: str) -> None:
        nonlocal inside, peak
        async with store.user_turn_lock(user):
            inside += 1
            peak = max(peak, inside)
            # Long enough that all 60 are inside together on a loaded machine, too: each holds
            # its lease while the others take theirs.
            await asyncio.sleep(1.5)
            inside -= 1

    await asyncio.wait_for(asyncio.gather(*(turn(f"u{i}") for i in range(60))), timeout=30)
    assert peak == 60


async def test_a_crashed_holders_lease_expires(engine: AsyncEngine) -> None:
    # Taken and never given back nor renewed: the holder died.
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO agent.user_leases (user_id, holder, expires_at)"
                " VALUES ('carol', 'dead', clock_timestamp() + interval '0.3 seconds')"
            )
        )
    store = AgentStore(engine)
    began = asyncio.get_running_loop().time()
    async with store.user_turn_lock("carol"):
        waited = asyncio.get_running_loop().time() - began
    assert 0.2 <= waited < 5


async def test_a_turn_is_claimed_with_its_lease_and_a_finished_one_is_answered_again(
    engine: AsyncEngine,
) -> None:
    from datetime import UTC, datetime

    from calagent.contracts.turns import TurnAnswer

    store = AgentStore(engine)
    now = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)
    answer = TurnAnswer(
        turn_id="t1", conversation_id="c", outcome="answered", reply="ok", intent="general.chat"
    )
    start = TurnStart("dave", "c", "k1", "t1", "hi")
    async with store.turn(start, lambda: now) as lease:
        assert lease.claim.status == "new"
        await store.finish_turn(lease, "k1", answer, now)
        assert lease.released
    # The lease is free again, and a redelivery of the same key finds the stored answer.
    async with store.turn(start, lambda: now) as again:
        assert again.claim.status == "done"
        assert again.claim.answer == answer
    async with store.user_turn_lock("dave"):
        pass


async def test_a_live_holder_keeps_its_lease_past_the_lease_time(engine: AsyncEngine) -> None:
    # The lease is short so a crashed holder frees its user fast; a live one renews it, however
    # long its turn waits for the model.
    holder = AgentStore(engine, lease_seconds=0.6)
    other = AgentStore(engine, lease_seconds=0.6)
    order: list[str] = []

    async def long_turn() -> None:
        async with holder.user_turn_lock("erin"):
            order.append("first in")
            await asyncio.sleep(2.0)
            order.append("first out")

    async def second_turn() -> None:
        await asyncio.sleep(0.2)
        async with other.user_turn_lock("erin"):
            order.append("second in")

    await asyncio.wait_for(asyncio.gather(long_turn(), second_turn()), timeout=20)
    assert order == ["first in", "first out", "second in"]


async def test_the_leases_a_store_holds_are_renewed_together_in_one_statement(
    engine: AsyncEngine,
) -> None:
    store = AgentStore(engine, lease_seconds=0.6)
    renewals: list[tuple[str, ...]] = []

    def on_statement(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if statement.lstrip().startswith("UPDATE agent.user_leases"):
            # asyncpg's parameters are positional: the users' array is the first array.
            renewals.append(tuple(next(p for p in parameters if isinstance(p, list))))

    event.listen(engine.sync_engine, "before_cursor_execute", on_statement)
    try:
        async with store.user_turn_lock("gail"), store.user_turn_lock("hank"):
            await asyncio.sleep(1.0)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", on_statement)
    # A renewal every 0.2 s, each one statement for both users' leases.
    assert len(renewals) >= 3
    assert all(sorted(users) == ["gail", "hank"] for users in renewals), renewals
    # Both were kept past the lease time, and both were given back.
    async with engine.connect() as conn:
        left = await conn.scalar(
            text("SELECT count(*) FROM agent.user_leases WHERE user_id IN ('gail', 'hank')")
        )
    assert left == 0


async def test_a_running_claim_nobody_holds_is_reported_stalled(engine: AsyncEngine) -> None:
    from datetime import UTC, datetime

    store = AgentStore(engine)
    now = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)
    start = TurnStart("frank", "c", "k1", "t1", "hi")
    async with store.turn(start, lambda: now):
        # While its turn runs the claim is running (the lease is live)...
        claim = await store.lookup_turn("frank", "k1")
        assert claim is not None and claim.status == "running"
    # ...and once nobody holds the user (the turn failed and was given up), it is stalled: a
    # client retry must run it again instead of waiting for an answer that never comes.
    claim = await store.lookup_turn("frank", "k1")
    assert claim is not None and claim.status == "stalled"
    async with store.turn(start, lambda: now) as again:
        assert again.claim.status == "running"  # claimed but not done: the turn runs again


async def test_a_turn_waiting_for_its_user_starts_after_the_reply_and_reads_it(engine: AsyncEngine) -> None:
    from datetime import UTC, datetime, timedelta

    from calagent.contracts.turns import TurnAnswer

    store = AgentStore(engine)
    now = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)
    order: list[str] = []

    async def first() -> None:
        async with store.turn(TurnStart("fay", "c", "f1", "f1", "one"), lambda: now) as lease:
            order.append("first in")
            await asyncio.sleep(0.3)
            answer = TurnAnswer(
                turn_id="f1",
                conversation_id="c",
                outcome="answered",
                reply="first reply",
                intent="general.chat",
            )
            await store.finish_turn(lease, "f1", answer, now + timedelta(seconds=1))
            order.append("first out")

    async def second() -> list[str]:
        await asyncio.sleep(0.05)
        later = now + timedelta(seconds=2)
        async with store.turn(TurnStart("fay", "c", "f2", "f2", "two"), lambda: later) as lease:
            order.append("second in")
            return [m.content for m in lease.history]

    _, history = await asyncio.wait_for(asyncio.gather(first(), second()), timeout=20)
    assert order == ["first in", "first out", "second in"]
    assert history == ["one", "first reply"]


async def test_a_turn_takes_over_a_crashed_holders_user(engine: AsyncEngine) -> None:
    from datetime import UTC, datetime

    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO agent.user_leases (user_id, holder, expires_at)"
                " VALUES ('gus', 'dead', clock_timestamp() + interval '0.3 seconds')"
            )
        )
    store = AgentStore(engine)
    now = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)
    began = asyncio.get_running_loop().time()
    async with store.turn(TurnStart("gus", "c", "g1", "g1", "hi"), lambda: now) as lease:
        waited = asyncio.get_running_loop().time() - began
        assert lease.claim.status == "new"
    assert 0.2 <= waited < 5
