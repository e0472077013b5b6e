"""Provider faults through HTTP (contract §17): a 429 with `Retry-After`, a 5xx, a stalled stream,
a fallback model, the circuit, and no write twice because of a retry. Facts read back: the rows,
the requests the model endpoint received, status codes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, count_events, event_rows, on_user, script

pytestmark = pytest.mark.e2e

CREATE = call("prepare_or_create_schedule", title="和张三开会", date="D+1", time="15:00", calendar="工作")
MESSAGE = "明天下午三点和张三开会"


@contextlib.asynccontextmanager
async def system(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, **overrides: Any
) -> AsyncIterator[Stack]:
    settings: dict[str, Any] = {
        "CALAGENT_MODEL_TIMEOUT_S": 2.0,
        "CALAGENT_MODEL_BACKOFF_S": 0.05,
        "CALAGENT_MODEL_ATTEMPTS": 3,
        **overrides,
    }
    stack = await start_stack(
        nats_url=servers.nats_url,
        nats_url_for=servers.nats_url_for,
        database_url=database_url,
        model_base_url=scripted.base_url,
        settings_overrides=settings,
    )
    try:
        yield stack
    finally:
        await stack.stop()


def failing(status: int, times: int, **headers: str) -> dict[str, Any]:
    return {
        "when": {"user_contains": "开会"},
        "times": times,
        "respond": {"error": {"status": status, "message": "busy", "headers": headers}},
    }


async def test_a_429_is_retried_after_the_retry_after_and_writes_once(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(failing(429, 2, **{"retry-after": "1"}), on_user("开会", tool_calls=[CREATE])))
    scripted.clear_requests()
    async with system(servers, database_url, scripted) as stack:
        response = await stack.chat(user, MESSAGE)
    assert response.status_code == 200
    assert response.json()["outcome"] == "created"
    requests = scripted.requests
    assert [r.status for r in requests] == [429, 429, 200]
    # Waited what the endpoint asked for, not the 50 ms backoff.
    assert requests[1].timestamp - requests[0].timestamp >= 0.95
    assert requests[2].timestamp - requests[1].timestamp >= 0.95
    assert await count_events(db, user) == 1


async def test_a_5xx_a_stalled_stream_and_a_dropped_stream_are_retried(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    stalled = {
        "when": {"user_contains": "开会"},
        "times": 1,
        "respond": {"tool_calls": [CREATE], "stall_after_chunks": 1, "stall_ms": 6000},
    }
    dropped = {
        "when": {"user_contains": "开会"},
        "times": 1,
        "respond": {"tool_calls": [CREATE], "drop_after_chunks": 2},
    }
    scripted.set_script(script(failing(502, 1), stalled, dropped, on_user("开会", tool_calls=[CREATE])))
    scripted.clear_requests()
    async with system(servers, database_url, scripted, CALAGENT_MODEL_ATTEMPTS=4) as stack:
        response = await stack.chat(user, MESSAGE)
        assert response.json()["outcome"] == "created", response.json()
    assert [r.rule for r in scripted.requests] == ["rules[0]", "rules[1]", "rules[2]", "rules[3]"]
    assert await count_events(db, user) == 1


async def test_the_fallback_model_answers_when_the_primary_keeps_failing(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    primary_down = {
        "when": {"model": "scripted"},
        "respond": {"error": {"status": 503, "message": "overloaded"}},
    }
    backup = {"when": {"model": "backup", "user_contains": "开会"}, "respond": {"tool_calls": [CREATE]}}
    scripted.set_script(script(primary_down, backup))
    scripted.clear_requests()
    async with system(
        servers, database_url, scripted, CALAGENT_MODEL="scripted", CALAGENT_FALLBACK_MODEL="backup"
    ) as stack:
        response = await stack.chat(user, MESSAGE)
    assert response.json()["outcome"] == "created"
    assert [r.body["model"] for r in scripted.requests] == ["scripted"] * 3 + ["backup"]
    assert await count_events(db, user) == 1


async def test_the_circuit_opens_answers_503_at_once_and_closes_by_itself(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine
) -> None:
    scripted.set_script(script(on_user("开会", tool_calls=[CREATE])))
    scripted.clear_requests()
    users = [f"circuit-{i}" for i in range(6)]
    async with system(
        servers,
        database_url,
        scripted,
        CALAGENT_MODEL_ATTEMPTS=2,
        CALAGENT_MODEL_CIRCUIT_FAILURES=4,
        CALAGENT_MODEL_CIRCUIT_OPEN_S=2.0,
    ) as stack:
        scripted.down()
        try:
            # Two turns whose calls fail after their retries: 200, model_unavailable; the
            # fourth failed attempt opens the circuit.
            for name in users[:2]:
                first = await stack.chat(name, MESSAGE)
                assert first.status_code == 200
                assert first.json()["outcome"] == "model_unavailable"
            assert len(scripted.requests) == 4
            # Open: every turn answered at once, without calling the endpoint.
            loop = asyncio.get_running_loop()
            started = loop.time()
            refused = await asyncio.gather(
                *(stack.chat(name, MESSAGE, client_message_id=f"k-{name}") for name in users[2:])
            )
            assert loop.time() - started < 1.5
            for response in refused:
                assert response.status_code == 503
                assert response.json()["error"]["code"] == "model_unavailable"
                assert 1 <= int(response.headers["Retry-After"]) <= 2
            assert len(scripted.requests) == 4
        finally:
            scripted.up()
        await asyncio.sleep(2.1)
        # Half-open: the next turn probes, succeeds, and the circuit is closed again. A refused
        # turn retried with its key runs now instead of replaying the refusal.
        recovered = await stack.chat(users[2], MESSAGE, client_message_id=f"k-{users[2]}")
        assert recovered.status_code == 200
        assert recovered.json()["outcome"] == "created"
        after = await stack.chat(users[3], MESSAGE)
        assert after.json()["outcome"] == "created"
    for name in users:
        assert await count_events(db, name) == (1 if name in users[2:4] else 0)


async def test_no_write_runs_twice_when_the_model_fails_after_a_write(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    # Two writes in one response: the first runs, the second is refused (one write per response)
    # and the model is asked again; that call fails twice before it answers with the second write.
    two = on_user(
        "两个会",
        tool_calls=[
            call("prepare_or_create_schedule", title="会一", date="D+1", time="09:00"),
            call("prepare_or_create_schedule", title="会二", date="D+1", time="11:00"),
        ],
    )
    again = {
        "when": {"last_role": "tool", "tool_result_contains": "one_write_per_response"},
        "respond": {
            "tool_calls": [call("prepare_or_create_schedule", title="会二", date="D+1", time="11:00")]
        },
    }
    after_write = {
        "when": {"last_role": "tool"},
        "times": 2,
        "respond": {"error": {"status": 500, "message": "boom"}},
    }
    scripted.set_script(script(after_write, two, again))
    scripted.clear_requests()
    async with system(servers, database_url, scripted) as stack:
        first = await stack.chat(user, "明天两个会，九点和十一点", client_message_id="two-meetings")
        assert first.json()["outcome"] == "created", first.json()
        assert [c["result"] for c in first.json()["tool_calls"]] == [
            "created",
            "refused:one_write_per_response",
            "created",
        ]
        retried = await stack.chat(user, "明天两个会，九点和十一点", client_message_id="two-meetings")
        assert retried.json() == first.json()
    assert [r.status for r in scripted.requests] == [200, 500, 500, 200]
    assert sorted(str(r["title"]) for r in await event_rows(db, user)) == ["会一", "会二"]
