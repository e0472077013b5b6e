"""A running eval recorder against the session's real NATS and this module's own database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.js.errors import NotFoundError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.contracts import subjects
from calagent.contracts.envelope import Envelope
from calagent.contracts.turns import Segment, ToolCallOut, TurnRecord
from calagent.evalrec.app import EvalrecService, create_app
from calagent.runtime.bus import Bus
from calagent.runtime.clock import FrozenClock
from calagent.runtime.db import make_engine
from calagent.runtime.service import start_service
from calagent.runtime.settings import Settings

RECORDED_AT = datetime(2026, 9, 24, 3, 0, tzinfo=UTC)


def make_record(
    turn_id: str,
    *,
    user_id: str = "u1",
    occurred_at: datetime = RECORDED_AT,
    segments: tuple[Segment, ...] = (),
    tool_calls: tuple[ToolCallOut, ...] = (),
    **fields: Any,
) -> TurnRecord:
    values: dict[str, Any] = {
        "text": "明天下午三点和张三开会",
        "outcome": "created",
        "intent": "schedule.create",
        "reply": "已创建",
        "model_calls": 1,
        "total_ms": 1000.0,
    }
    values.update(fields)
    return TurnRecord(
        envelope=Envelope(
            turn_id=turn_id,
            user_id=user_id,
            conversation_id=f"c-{user_id}",
            occurred_at=occurred_at,
            tz="Asia/Shanghai",
        ),
        segments=segments,
        tool_calls=tool_calls,
        **values,
    )


@dataclass
class Recorder:
    app: EvalrecService
    bus: Bus  # the recorder's own connection
    client: Bus  # a producer's connection, as the agent would hold
    raw: NatsClient  # a plain connection: consumer positions, and what no typed call may send
    engine: AsyncEngine

    async def drained(self, within_s: float = 20.0) -> None:
        """Wait until the consumer has acknowledged everything published so far."""
        deadline = time.monotonic() + within_s
        while True:
            try:
                info = await self.raw.jetstream().consumer_info(
                    subjects.RECORDS_STREAM, subjects.EVALREC_CONSUMER
                )
                if not (info.num_pending or info.num_ack_pending):
                    return
            except NotFoundError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("the recorder did not drain its consumers in time")
            await asyncio.sleep(0.05)

    async def scalar(self, sql: str, **params: Any) -> Any:
        async with self.engine.connect() as conn:
            return (await conn.execute(text(sql), params)).scalar()


@pytest.fixture(scope="module")
async def recorder(nats_url: str, database_url: str) -> AsyncIterator[Recorder]:
    clock = FrozenClock(RECORDED_AT)
    settings = Settings(NATS_URL=nats_url, DATABASE_URL=database_url)
    client = await Bus.connect(nats_url, "evalrec-test-producer", clock)
    raw = await nats.connect(nats_url)
    # The records stream is shared by the whole test session; what earlier modules left in it
    # would land in this module's database and skew its counts.
    await raw.jetstream().purge_stream(subjects.RECORDS_STREAM)
    app = create_app(settings, clock)
    bus = await start_service(app, nats_url, clock)
    engine = make_engine(database_url, pool_size=2)
    try:
        yield Recorder(app=app, bus=bus, client=client, raw=raw, engine=engine)
    finally:
        await bus.close()
        await app.stop()
        await client.close()
        await raw.close()
        await engine.dispose()
