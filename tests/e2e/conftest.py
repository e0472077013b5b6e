from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from calagent.cli.stack import Stack, start_stack
from calagent.runtime.testing.servers import Servers
from calagent.scriptedmodel import Response, Script, ScriptedModelServer


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(Script(rules=[], default=Response(text="好的。")))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def stack(servers: Servers, database_url: str, scripted: ScriptedModelServer) -> AsyncIterator[Stack]:
    system = await start_stack(
        nats_url=servers.nats_url, database_url=database_url, model_base_url=scripted.base_url
    )
    yield system
    await system.stop()


@pytest.fixture(scope="module")
async def db(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def user() -> str:
    return f"u-{uuid.uuid4().hex[:10]}"


async def count_events(db: AsyncEngine, user_id: str) -> int:
    async with db.connect() as conn:
        value = await conn.scalar(
            text("select count(*) from commands.events where user_id = :u"), {"u": user_id}
        )
    return int(value or 0)


async def event_rows(db: AsyncEngine, user_id: str) -> list[dict[str, object]]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text(
                "select title, start_at, end_at, calendar from commands.events where user_id = :u order by start_at"
            ),
            {"u": user_id},
        )
        return [dict(r._mapping) for r in rows]
