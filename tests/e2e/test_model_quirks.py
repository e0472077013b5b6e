"""Real models' habits through HTTP (contract §17): tool calls written into the text, almost-JSON
arguments, missing call ids, natural dates, no tool support, no usage; usage recorded and read
back; budgets and rates per user under concurrency, across gateway replicas. Facts read back:
rows, the turn records, the requests the endpoint received, status codes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.testing.servers import Servers
from calagent.runtime.bus import Bus
from calagent.scriptedmodel import Script, ScriptedModelServer
from calagent.scriptedmodel.server import _prompt_tokens

from .conftest import call, count_events, event_rows, on_user

pytestmark = pytest.mark.e2e

MESSAGE = "明天下午三点和张三开会"
CREATE = call("prepare_or_create_schedule", title="和张三开会", date="D+1", time="15:00", calendar="工作")


@contextlib.asynccontextmanager
async def system(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, **overrides: Any
) -> AsyncIterator[Stack]:
    stack = await start_stack(
        nats_url=servers.nats_url,
        nats_url_for=servers.nats_url_for,
        database_url=database_url,
        model_base_url=scripted.base_url,
        settings_overrides={"CALAGENT_MODEL_BACKOFF_S": 0.05, **overrides},
    )
    try:
        yield stack
    finally:
        await stack.stop()


def quirky(quirks: dict[str, Any], *rules: dict[str, Any]) -> Script:
    asks_again = {
        "when": {"last_role": "tool", "tool_result_contains": "invalid_arguments"},
        "respond": {"text": "哪一天？"},
    }
    return Script.model_validate(
        {"rules": [asks_again, *rules], "default": {"text": "好的。"}, "quirks": quirks}
    )


async def record_of(db: AsyncEngine, user: str) -> dict[str, Any]:
    """The user's one turn record, once evalrec has stored it."""
    for _ in range(100):
        async with db.connect() as conn:
            row = (
                await conn.execute(
                    text("select outcome, flags, repairs, tool_calls from evalrec.turns where user_id = :u"),
                    {"u": user},
                )
            ).first()
        if row is not None:
            return dict(row._mapping)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no turn record for {user}")


STYLES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "clean": ({}, []),
    "tool_call_tag": ({"tool_call_style": "tool_call_tag"}, ["text_tool_call"]),
    "fenced_json": ({"tool_call_style": "fenced_json"}, ["text_tool_call"]),
    "almost_json": ({"almost_json": True}, ["almost_json"]),
    "missing_ids": ({"omit_call_ids": True}, ["missing_call_id"]),
    "natural_dates": ({"natural_dates": True}, ["natural_date:date"]),
    "all_at_once": (
        {"tool_call_style": "tool_call_tag", "almost_json": True, "natural_dates": True},
        ["text_tool_call", "almost_json", "natural_date:date"],
    ),
}


@pytest.mark.parametrize("style", list(STYLES))
async def test_each_provider_style_writes_the_same_event_once_and_records_the_repair(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine, style: str
) -> None:
    quirks, repairs = STYLES[style]
    user = f"style-{style}"
    scripted.set_script(quirky(quirks, on_user("开会", tool_calls=[CREATE])))
    async with system(servers, database_url, scripted) as stack:
        answer = (await stack.chat(user, MESSAGE)).json()
        record = await record_of(db, user)
    assert answer["outcome"] == "created", answer
    assert "tool_call" not in answer["reply"] and "```" not in answer["reply"]
    rows = await event_rows(db, user)
    assert [(r["title"], str(r["start_at"])) for r in rows] == [("和张三开会", "2026-09-25 07:00:00+00:00")]
    assert sorted(record["repairs"]) == sorted(repairs)
    assert ("repaired" in record["flags"]) == bool(repairs)


@pytest.mark.parametrize(
    ("natural", "symbol_date"),
    [("tomorrow", "2026-09-25"), ("2026/9/28", "2026-09-28"), ("下周三", "2026-09-30")],
)
async def test_a_natural_date_with_one_reading_is_resolved_by_the_time_service(
    servers: Servers,
    database_url: str,
    scripted: ScriptedModelServer,
    db: AsyncEngine,
    natural: str,
    symbol_date: str,
) -> None:
    user = f"natural-{symbol_date}"
    create = call("prepare_or_create_schedule", title="评审", date=natural, time="10:00")
    scripted.set_script(quirky({}, on_user("评审", tool_calls=[create])))
    async with system(servers, database_url, scripted) as stack:
        answer = (await stack.chat(user, f"{natural}上午十点评审")).json()
        record = await record_of(db, user)
    assert answer["outcome"] == "created"
    # 10:00 in Shanghai is 02:00 UTC of the same day.
    assert [str(r["start_at"]) for r in await event_rows(db, user)] == [f"{symbol_date} 02:00:00+00:00"]
    assert record["repairs"] == ["natural_date:date"]


@pytest.mark.parametrize("natural", ["this weekend", "周三", "next week", "sometime soon"])
async def test_a_natural_date_without_one_reading_goes_back_to_the_model(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine, natural: str
) -> None:
    user = f"vague-{natural.replace(' ', '-')}"
    create = call("prepare_or_create_schedule", title="评审", date=natural, time="10:00")
    scripted.set_script(quirky({}, on_user("评审", tool_calls=[create])))
    scripted.clear_requests()
    async with system(servers, database_url, scripted) as stack:
        answer = (await stack.chat(user, f"{natural}评审")).json()
        record = await record_of(db, user)
    assert [c["result"] for c in answer["tool_calls"]] == ["error:invalid_arguments"]
    assert answer["model_calls"] == 2  # the structured error went back to the model
    assert "invalid_arguments" in scripted.requests[-1].messages[-1]["content"]
    assert await count_events(db, user) == 0
    assert record["repairs"] == []


async def test_an_endpoint_without_tool_support_answers_model_unavailable_and_writes_nothing(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(quirky({"no_tools": True}, on_user("开会", tool_calls=[CREATE])))
    scripted.clear_requests()
    async with system(servers, database_url, scripted) as stack:
        response = await stack.chat(user, MESSAGE)
    assert response.status_code == 200
    assert response.json()["outcome"] == "model_unavailable"
    assert [r.status for r in scripted.requests] == [400]  # a refusal is not retried
    assert await count_events(db, user) == 0


async def usage_rows(db: AsyncEngine, user: str) -> list[dict[str, Any]]:
    for _ in range(100):
        async with db.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        "select model, prompt_tokens, completion_tokens, cached_tokens, reported "
                        "from evalrec.model_usage where user_id = :u order by seq"
                    ),
                    {"u": user},
                )
            ).all()
        if rows:
            return [dict(r._mapping) for r in rows]
        await asyncio.sleep(0.1)
    return []


async def test_usage_is_recorded_per_call_and_read_back_by_its_user_only(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine
) -> None:
    scripted.set_script(quirky({}, on_user("开会", tool_calls=[CREATE])))
    scripted.clear_requests()
    async with system(servers, database_url, scripted) as stack:
        await stack.chat("usage-a", MESSAGE)
        request = scripted.requests[-1]
        rows = await usage_rows(db, "usage-a")
        assert request.body["stream_options"] == {"include_usage": True}
        assert len(rows) == 1
        assert rows[0]["prompt_tokens"] == _prompt_tokens(request.body)
        assert rows[0]["completion_tokens"] > 0 and rows[0]["reported"]
        mine = (
            await stack.client.get("/v1/usage", params={"days": 7}, headers=stack.headers("usage-a"))
        ).json()
        other = (await stack.client.get("/v1/usage", headers=stack.headers("usage-b"))).json()
        bad = await stack.client.get("/v1/usage", params={"days": "0"}, headers=stack.headers("usage-a"))
        # Digits that are not ASCII ("³", "٣") are no number of days either: a 4xx, never a 500.
        unlike = [
            await stack.client.get("/v1/usage", params={"days": days}, headers=stack.headers("usage-a"))
            for days in ("³", "٣")
        ]
    assert mine["total"]["prompt_tokens"] == rows[0]["prompt_tokens"]
    assert mine["total"]["completion_tokens"] == rows[0]["completion_tokens"]
    assert [r["key"] for r in mine["rows"]] == ["2026-09-24"]
    assert other["total"]["model_calls"] == 0
    assert bad.status_code == 422
    assert [r.status_code for r in unlike] == [422, 422]


async def test_an_endpoint_that_reports_no_usage_is_recorded_as_unreported(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(quirky({"omit_usage": True}, on_user("开会", tool_calls=[CREATE])))
    async with system(servers, database_url, scripted) as stack:
        await stack.chat(user, MESSAGE)
        rows = await usage_rows(db, user)
        usage = (await stack.client.get("/v1/usage", headers=stack.headers(user))).json()
    assert [r["reported"] for r in rows] == [False]
    assert usage["total"]["unreported_calls"] == 1


async def test_users_over_their_daily_budget_are_refused_before_anything_runs_and_others_are_not(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine
) -> None:
    scripted.set_script(quirky({}, on_user("开会", tool_calls=[CREATE])))
    spent = [f"budget-spent-{i}" for i in range(3)]
    fresh = [f"budget-fresh-{i}" for i in range(7)]
    async with system(servers, database_url, scripted, CALAGENT_USER_DAILY_TOKENS=100) as stack:
        for name in spent:
            assert (await stack.chat(name, MESSAGE)).json()["outcome"] == "created"
        scripted.clear_requests()
        responses = await asyncio.gather(
            *(stack.chat(name, "后天下午三点和张三开会") for name in [*spent, *fresh])
        )
    by_user = dict(zip([*spent, *fresh], responses, strict=True))
    for name in spent:
        assert by_user[name].status_code == 429
        assert by_user[name].json()["error"]["code"] == "budget_exceeded"
        assert int(by_user[name].headers["Retry-After"]) > 0
        assert await count_events(db, name) == 1
    for name in fresh:
        assert by_user[name].status_code == 200
        assert by_user[name].json()["outcome"] == "created"
        assert await count_events(db, name) == 1
    # Only the fresh users' turns reached the model.
    assert len(scripted.requests) == len(fresh)


async def test_the_rate_is_shared_by_gateway_replicas(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine
) -> None:
    from calagent.gateway.app import create_app as create_gateway

    scripted.set_script(quirky({}, on_user("开会", tool_calls=[CREATE])))
    scripted.clear_requests()
    into_minute = time.time() % 60
    if into_minute > 50:  # the whole test inside one minute window
        await asyncio.sleep(60.5 - into_minute)
    async with system(servers, database_url, scripted, CALAGENT_USER_TURNS_PER_MINUTE=3) as stack:
        bus = Bus(servers.nats_url, "gateway", stack.clock)
        second = create_gateway(stack.settings, stack.clock, bus=bus)
        await bus.start()
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=second), base_url="http://gw2", timeout=60
        )
        try:
            clients = [stack.client, client] * 3
            responses = await asyncio.gather(
                *(
                    c.post("/v1/chat", json={"message": f"{MESSAGE} {i}"}, headers=stack.headers("rate-busy"))
                    for i, c in enumerate(clients)
                ),
                stack.chat("rate-calm", MESSAGE),
            )
        finally:
            await client.aclose()
            await bus.close()
    busy, calm = responses[:-1], responses[-1]
    assert sorted(r.status_code for r in busy) == [200, 200, 200, 429, 429, 429]
    for refused in (r for r in busy if r.status_code == 429):
        assert refused.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert calm.status_code == 200
    # Only the admitted turns reached the model: three of the busy user's, the calm user's one.
    assert len(scripted.requests) == 4
    assert await count_events(db, "rate-calm") == 1


async def test_a_retry_of_an_admitted_message_is_not_counted_again_and_a_refused_one_is(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, db: AsyncEngine
) -> None:
    from calagent.gateway.app import create_app as create_gateway

    slow = {
        "when": {"user_contains": "开会", "last_role": "user"},
        "respond": {"tool_calls": [CREATE], "delay_ms": 1500},
    }
    scripted.set_script(quirky({}, slow))
    into_minute = time.time() % 60
    if into_minute > 45:  # the whole test inside one minute window
        await asyncio.sleep(60.5 - into_minute)
    user = "rate-keyed"
    async with system(servers, database_url, scripted, CALAGENT_USER_TURNS_PER_MINUTE=2) as stack:
        bus = Bus(servers.nats_url, "gateway", stack.clock)
        second = create_gateway(stack.settings, stack.clock, bus=bus)
        await bus.start()
        other = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=second), base_url="http://gw2", timeout=60
        )
        try:
            # The client retries m1 through another replica while the first attempt still runs.
            first_task = asyncio.ensure_future(stack.chat(user, MESSAGE, client_message_id="m1"))
            await asyncio.sleep(0.5)
            retry = await other.post(
                "/v1/chat", json={"message": MESSAGE, "client_message_id": "m1"}, headers=stack.headers(user)
            )
            first = await first_task
            second_message = await stack.chat(user, f"{MESSAGE}，带电脑", client_message_id="m2")
            third = await stack.chat(user, f"{MESSAGE}，带资料", client_message_id="m3")
            third_again = await other.post(
                "/v1/chat",
                json={"message": f"{MESSAGE}，带资料", "client_message_id": "m3"},
                headers=stack.headers(user),
            )
        finally:
            await other.aclose()
            await bus.close()
    assert [first.status_code, retry.status_code, second_message.status_code] == [200, 200, 200]
    assert retry.json()["turn_id"] == first.json()["turn_id"]
    # Over the rate: refused, and its retry is judged afresh, not let through as a retry.
    assert [third.status_code, third_again.status_code] == [429, 429]
    assert third_again.json()["error"]["code"] == "rate_limited"
