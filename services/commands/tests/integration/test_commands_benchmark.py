"""Latency of the command service over the bus (no model anywhere): prints numbers, asserts none."""

from __future__ import annotations

import statistics
import time
import uuid
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from calagent.contracts.commands import PrepareOrCreate
from calagent.contracts.queries import QueryRange
from calagent.contracts.tools import PrepareOrCreateSchedule

from .conftest import System, envelope

pytestmark = pytest.mark.benchmark

CREATES = 60
QUERIES = 40
MONTH_EVENTS = 1000


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, round(len(ordered) * 0.95) - 1)]
    return f"median {statistics.median(ordered):.2f} ms, p95 {p95:.2f} ms, n={len(ordered)}"


async def test_benchmark_create_and_month_query(system: System, capsys: pytest.CaptureFixture[str]) -> None:
    user = f"bench-{uuid.uuid4().hex[:8]}"
    create_ms: list[float] = []
    create_db_ms: list[float] = []
    first_day = date(2027, 1, 1)
    for i in range(CREATES + 5):
        command = PrepareOrCreate(
            envelope=envelope(user),
            idempotency_key=f"bench-{i}",
            args=PrepareOrCreateSchedule(
                title=f"bench {i}", date=(first_day + timedelta(days=i)).isoformat(), time="10:00"
            ),
        )
        started = time.perf_counter()
        result = await system.execute(command)
        elapsed = (time.perf_counter() - started) * 1000
        assert result.status == "created"
        if i >= 5:  # warm-up: connection pool, first migrations-era caches
            create_ms.append(elapsed)
            create_db_ms.append(result.db_ms)

    reader = f"bench-month-{uuid.uuid4().hex[:8]}"
    month_start = datetime.fromisoformat("2026-09-01T00:00:00+08:00")
    rows: list[dict[str, Any]] = []
    for i in range(MONTH_EVENTS):
        start = month_start + timedelta(minutes=(i * 43) % (30 * 24 * 60))
        rows.append(
            {
                "i": uuid.uuid4().hex,
                "u": reader,
                "t": f"event {i}",
                "s": start,
                "e": start + timedelta(minutes=30),
            }
        )
    async with system.db.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO commands.events (id, user_id, title, start_at, end_at, calendar)"
                " VALUES (:i, :u, :t, :s, :e, '工作')"
            ),
            rows,
        )
    query = QueryRange(envelope=envelope(reader), start_symbol="M+0", end_symbol="M+1")
    query_ms: list[float] = []
    query_db_ms: list[float] = []
    for i in range(QUERIES + 3):
        started = time.perf_counter()
        answer = await system.query(query)
        elapsed = (time.perf_counter() - started) * 1000
        assert len(answer.events) == MONTH_EVENTS, answer.error
        if i >= 3:
            query_ms.append(elapsed)
            query_db_ms.append(answer.db_ms)

    with capsys.disabled():
        print()
        print(f"[benchmark] create over the bus (incl. time service): {_ms(create_ms)}")
        print(f"[benchmark]   of which database:                     {_ms(create_db_ms)}")
        print(f"[benchmark] month query, {MONTH_EVENTS} events, over the bus: {_ms(query_ms)}")
        print(f"[benchmark]   of which database:                     {_ms(query_db_ms)}")
