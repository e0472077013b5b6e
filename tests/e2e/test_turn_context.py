"""The turn's context in one request, watched on the bus (docs/architecture.md, "One turn on
paper"): commands asks the time service to read the user's words only when they may answer an
active stub, so a create with no stub sends no `calagent.time.parse_reply` at all; its words are
read with the create's own resolution instead, where commands holds a one-off that the words asked
to repeat (contract §9)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.contracts import subjects
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, count_events, on_user, read_events, script

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def watched(nats_url: str, subject: str) -> AsyncIterator[list[Msg]]:
    """Every message the NATS server routes on `subject` while the block runs."""
    nc = await nats.connect(nats_url)
    seen: list[Msg] = []

    async def on_message(msg: Msg) -> None:
        seen.append(msg)

    sub = await nc.subscribe(subject, cb=on_message)
    await nc.flush()
    try:
        yield seen
    finally:
        await sub.unsubscribe()
        await nc.close()


async def chat(stack: Stack, user: str, message: str) -> dict[str, Any]:
    response = await stack.chat(user, message)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def hold_reasons(db: AsyncEngine, user: str) -> list[str | None]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text("select hold_reason from commands.stubs where user_id = :u order by created_at"), {"u": user}
        )
        return [r[0] for r in rows]


async def test_a_create_asks_for_no_reading_and_a_reply_to_its_stub_is_still_merged(
    stack: Stack, scripted: ScriptedModelServer, servers: Servers, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "和老李吃饭", tool_calls=[call("prepare_or_create_schedule", title="和老李吃饭", date="D+1")]
            )
        )
    )
    async with (
        watched(servers.nats_url, subjects.TIME_PARSE_REPLY) as readings,
        watched(servers.nats_url, subjects.TIME_RESOLVE) as resolutions,
    ):
        asked = await chat(stack, user, "明天和老李吃饭")
        assert asked["outcome"] == "needs_time", asked
        assert readings == []
        # The watch does see the time service's traffic: the create's own resolution.
        assert len(resolutions) >= 1

        scripted.clear_requests()
        answer = await chat(stack, user, "晚上七点")
        assert (answer["outcome"], answer["model_calls"]) == ("created", 0), answer
        assert scripted.requests == []
        # The reply to the stub was read once, inside the context request.
        assert len(readings) == 1
    assert [(e["title"], e["start"]) for e in await read_events(stack, user)] == [
        ("和老李吃饭", "2026-09-25T19:00:00+08:00")
    ]


async def test_a_weekly_meeting_written_as_a_one_off_is_held_without_the_agent_reading_the_words(
    stack: Stack, scripted: ScriptedModelServer, servers: Servers, db: AsyncEngine, user: str
) -> None:
    message = "每周一上午十点开会"
    one_off = call("prepare_or_create_schedule", title="开会", date="W1+1", time="10:00")
    scripted.set_script(script(on_user(message, tool_calls=[one_off])))
    async with watched(servers.nats_url, subjects.TIME_PARSE_REPLY) as readings:
        held = await chat(stack, user, message)
        assert held["outcome"] == "held", held
        assert await hold_reasons(db, user) == ["recurrence_unclear"]
        assert await count_events(db, user) == 0
        # The marker came with the create's resolution: the agent asked for no reading.
        assert readings == []

        # The hold costs one word: the user's confirmation writes the one-off, with no model.
        scripted.clear_requests()
        done = await chat(stack, user, "确认")
        assert (done["outcome"], done["model_calls"]) == ("created", 0), done
        assert scripted.requests == []
    assert [(e["title"], e["start"]) for e in await read_events(stack, user)] == [
        ("开会", "2026-09-28T10:00:00+08:00")
    ]
