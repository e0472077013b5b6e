"""What one turn's path costs in messages and transactions, counted on the running system.

The bus is watched from outside with the admin's credentials: a subscription to `>` sees every
message the server routes — publishes to streams, the JetStream API and acknowledgements,
requests and their replies, the turn's events — so the count is the bus's, not a service's idea
of it. A message that carries a reply subject starts a round trip; its reply comes back on an
inbox. PostgreSQL's own counters (`pg_stat_database.xact_commit` and `xact_rollback` of the
system's one database) count the transactions; they are flushed by each backend when it goes
idle, at the latest `STATS_FLUSH_S` later, so the reading waits for them.

Turns run one after another, each for a fresh user, so nothing but the turns is counted (the
services' own periodic traffic — health checks, sync loops — is measured over an idle stretch of
the same length and subtracted).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg
import nats
from nats.aio.msg import Msg

# PostgreSQL flushes a backend's pending statistics when it goes idle, at most once a second,
# else after its idle interval of ten seconds.
STATS_FLUSH_S = 11.0


def subject_class(msg: Msg) -> str:
    """A message's role on the path, from its subject: stable names across turns and users."""
    subject = msg.subject
    if subject.startswith(("_INBOX.", "_R_.")):
        return "reply"
    if subject.startswith("$JS.ACK."):
        return "jetstream ack"
    if subject.startswith("$JS.API."):
        return "jetstream api " + subject.removeprefix("$JS.API.").split(".")[0].lower()
    if subject.startswith("$KV."):
        return "kv " + subject.split(".")[1]
    parts = subject.split(".")
    if parts[:2] == ["calagent", "turn"] and len(parts) > 2 and parts[2] == "events":
        return "calagent.turn.events"
    if parts[:2] == ["calagent", "caldav"] and len(parts) > 2 and parts[2] == "outbox":
        return "calagent.caldav.outbox"
    return ".".join(parts[:3])


@dataclass
class PathCount:
    turns: int
    messages: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    transactions: float = 0.0

    @property
    def messages_per_turn(self) -> float:
        return sum(self.messages.values()) / self.turns

    @property
    def round_trips_per_turn(self) -> float:
        return self.requests / self.turns

    def by_class(self) -> dict[str, float]:
        return {name: n / self.turns for name, n in sorted(self.messages.items()) if n / self.turns >= 0.05}


async def _transactions(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        total = await conn.fetchval(
            # The system's own database only: autovacuum in the others is not a turn's.
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        )
        return int(total or 0)
    finally:
        await conn.close()


async def count_path(
    nats_url: str,
    dsn: str,
    turns: int,
    run_turn: Callable[[str], Awaitable[object]],
    stats_flush_s: float = STATS_FLUSH_S,
) -> PathCount:
    """Counts what `turns` sequential turns (each `run_turn(user)`) cost, minus idle traffic.

    A `stats_flush_s` shorter than PostgreSQL's idle flush undercounts the transactions (a check
    that the path is counted at all, not a measurement); the bus's counts are exact either way."""
    nc = await nats.connect(nats_url.split(","), name="calagent-bench-path")
    seen: list[Msg] = []

    async def on_message(msg: Msg) -> None:
        seen.append(msg)

    sub = await nc.subscribe(">", cb=on_message)
    try:
        await nc.flush()
        # The idle stretch first: the system's own periodic traffic and the counting's own reads.
        tx0 = await _transactions(dsn)
        began = time.monotonic()
        await asyncio.sleep(stats_flush_s)
        tx1 = await _transactions(dsn)
        idle_s = time.monotonic() - began
        idle = list(seen)
        seen.clear()

        began = time.monotonic()
        for _ in range(turns):
            await run_turn(f"path-{uuid.uuid4().hex[:8]}")
        await nc.flush()
        await asyncio.sleep(stats_flush_s)
        busy_s = time.monotonic() - began
        tx2 = await _transactions(dsn)
        busy = list(seen)
    finally:
        await sub.unsubscribe()
        await nc.close()

    # Idle traffic grows with the time the turns took: it is subtracted in that proportion.
    scale = busy_s / idle_s
    idle_by_class = Counter(subject_class(m) for m in idle)
    busy_by_class = Counter(subject_class(m) for m in busy)
    count = PathCount(turns=turns)
    for name in busy_by_class:
        count.messages[name] = max(0, round(busy_by_class[name] - scale * idle_by_class[name]))
    idle_requests = sum(1 for m in idle if m.reply)
    count.requests = max(0, round(sum(1 for m in busy if m.reply) - scale * idle_requests))
    # Each reading of the counters is itself one transaction.
    count.transactions = max(0.0, ((tx2 - tx1) - (tx1 - tx0) * scale - 1) / turns)
    return count


def format_path(name: str, count: PathCount) -> list[str]:
    lines = [
        f"{name}: per turn {count.messages_per_turn:.1f} bus messages, "
        f"{count.round_trips_per_turn:.1f} of them requests (round trips), "
        f"{count.transactions:.1f} PostgreSQL transactions"
    ]
    lines += [f"    {n:5.1f}  {subject}" for subject, n in count.by_class().items()]
    return lines
