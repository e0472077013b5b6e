from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import Response, Script, ScriptedModelServer


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(Script(rules=[], default=Response(text="好的。")))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def stack(servers: Servers, database_url: str, scripted: ScriptedModelServer) -> AsyncIterator[Stack]:
    # Each service as its own NATS user, on the permission table `calagent up` deploys.
    system = await start_stack(
        nats_url=servers.nats_url,
        database_url=database_url,
        model_base_url=scripted.base_url,
        nats_url_for=servers.nats_url_for,
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


# ---- scripted model rules, shared by every end-to-end module ----------------------------------------


def script(*rules: dict[str, Any], default: str = "好的。") -> Script:
    return Script.model_validate({"rules": list(rules), "default": {"text": default}})


def on_user(contains: str | list[str], **respond: Any) -> dict[str, Any]:
    return {"when": {"user_contains": contains, "last_role": "user"}, "respond": respond}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def read_events(
    stack: Stack,
    user: str,
    start: str = "2026-01-01T00:00:00+08:00",
    end: str = "2026-12-31T00:00:00+08:00",
    tz: str | None = None,
) -> list[dict[str, Any]]:
    """The caller's events through `GET /v1/events`: the facts a client reads back."""
    response = await stack.client.get(
        "/v1/events", params={"start": start, "end": end}, headers=stack.headers(user, tz)
    )
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["events"]
    return found


# The spans this process records while a test runs (the stack's services share its tracer).
@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    made_here = not isinstance(provider, TracerProvider)
    if not isinstance(provider, TracerProvider):
        # The services' tracers are proxies: from here on they record into this provider.
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()
    if made_here:
        provider.shutdown()
