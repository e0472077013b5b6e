"""The command service on real NATS and PostgreSQL, with the real time service beside it on the bus."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from calagent.commands.app import CommandsService, create_app
from calagent.contracts import wire
from calagent.contracts.commands import CommandRequest, CommandResult
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import QueryRequest, QueryResult
from calagent.runtime.bus import Bus
from calagent.runtime.clock import FrozenClock
from calagent.runtime.service import start_service
from calagent.runtime.settings import Settings
from calagent.timeparse.app import create_app as create_timeparse

NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")  # a Thursday


@dataclass
class System:
    client: Bus
    app: CommandsService
    clock: FrozenClock
    db: AsyncEngine
    database_url: str

    async def execute(self, command: Any) -> CommandResult:
        return await self.client.request(wire.COMMAND_EXECUTE, CommandRequest(command=command), timeout=15)

    async def query(self, query: Any) -> QueryResult:
        return await self.client.request(wire.COMMAND_QUERY, QueryRequest(query=query), timeout=15)

    async def scalar(self, sql: str, **params: Any) -> Any:
        async with self.db.connect() as conn:
            return (await conn.execute(text(sql), params)).scalar()

    async def rows(self, sql: str, **params: Any) -> list[Any]:
        async with self.db.connect() as conn:
            return list(await conn.execute(text(sql), params))


def envelope(user: str, at: datetime = NOW, tz: str = "Asia/Shanghai") -> Envelope:
    return Envelope(turn_id=uuid.uuid4().hex[:16], user_id=user, conversation_id="c", occurred_at=at, tz=tz)


@pytest.fixture(scope="module")
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    clock = FrozenClock(NOW)
    settings = Settings.model_validate({"DATABASE_URL": database_url, "NATS_URL": nats_url})
    timeparse = create_timeparse(settings, clock)
    time_bus = await start_service(timeparse, nats_url, clock)
    app = create_app(settings, clock)
    command_bus = await start_service(app, nats_url, clock)
    client = await Bus.connect(nats_url, "agent", clock)
    db = create_async_engine(database_url)
    try:
        yield System(client, app, clock, db, database_url)
    finally:
        await client.close()
        await command_bus.close()
        await time_bus.close()
        await app.stop()
        await timeparse.stop()
        await db.dispose()


@pytest.fixture(autouse=True)
def _reset_clock(request: pytest.FixtureRequest) -> None:
    if "system" in request.fixturenames:
        system: System = request.getfixturevalue("system")
        system.clock.set(NOW)


@pytest.fixture
def user() -> str:
    return f"u-{uuid.uuid4().hex[:10]}"
