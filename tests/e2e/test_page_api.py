"""What the page needs from the HTTP surface (contract §18), through HTTP with the facts read back:
the conversation comes back page by page with each turn's outcome and command; a command without
the model runs the same path a model's call takes, held the same way, with no model call; a new
user's calendars are named in their language."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script

pytestmark = pytest.mark.e2e


def create(title: str, date: str, time: str | None = None) -> dict[str, object]:
    arguments: dict[str, object] = {"title": title, "date": date}
    if time is not None:
        arguments["time"] = time
    return call("prepare_or_create_schedule", **arguments)


async def test_the_conversation_comes_back_oldest_first_with_each_turns_outcome_and_command(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("开会", tool_calls=[create("开会", "D+1", "10:00")]),
            on_user("修汽车轮毂", tool_calls=[create("修汽车轮毂", "WE", "14:00")]),
        )
    )
    first = (await stack.chat(user, "明天上午十点开会")).json()
    second = (await stack.chat(user, "这个周末下午两点去修汽车轮毂")).json()
    assert (first["outcome"], second["outcome"]) == ("created", "needs_date")

    response = await stack.client.get("/v1/messages", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    page = response.json()
    assert page["before"] is None
    messages = page["messages"]
    assert [(m["role"], m["turn_id"]) for m in messages] == [
        ("user", first["turn_id"]),
        ("assistant", first["turn_id"]),
        ("user", second["turn_id"]),
        ("assistant", second["turn_id"]),
    ]
    assert [m["text"] for m in messages] == [
        "明天上午十点开会",
        first["reply"],
        "这个周末下午两点去修汽车轮毂",
        second["reply"],
    ]
    assert [m["outcome"] for m in messages] == ["created", "created", "needs_date", "needs_date"]
    assert messages[3]["command"]["id"] == second["command"]["id"]
    assert messages[3]["command"]["status"] == "needs_date"
    assert messages[1]["command"] is None
    assert [c["name"] for c in messages[3]["tool_calls"]] == ["prepare_or_create_schedule"]
    assert messages[3]["model_calls"] == second["model_calls"]

    # Paged from the newest: two, then the two before them, then nothing more.
    newest = (await stack.client.get("/v1/messages?limit=2", headers=stack.headers(user))).json()
    assert [m["id"] for m in newest["messages"]] == [m["id"] for m in messages[2:]]
    assert newest["before"] == messages[2]["id"]
    older = (
        await stack.client.get(f"/v1/messages?limit=2&before={newest['before']}", headers=stack.headers(user))
    ).json()
    assert [m["id"] for m in older["messages"]] == [m["id"] for m in messages[:2]]
    assert older["before"] is None

    # Nobody else's, and another conversation of the same user is another conversation.
    other = (await stack.client.get("/v1/messages", headers=stack.headers(f"{user}-other"))).json()
    assert other["messages"] == []
    elsewhere = await stack.client.get("/v1/messages?conversation_id=work", headers=stack.headers(user))
    assert elsewhere.json()["messages"] == []
    assert (await stack.client.get("/v1/messages?limit=0", headers=stack.headers(user))).status_code == 422
    assert (await stack.client.get("/v1/messages?before=x", headers=stack.headers(user))).status_code == 422
    assert (await stack.client.get("/v1/messages")).status_code == 401


async def test_a_command_without_the_model_is_held_like_chat_and_runs_only_on_the_users_word(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(on_user("和张三开会", tool_calls=[create("和张三开会", "D+1", "15:00")])))
    assert (await stack.chat(user, "明天下午三点和张三开会")).json()["outcome"] == "created"
    [meeting] = await read_events(stack, user)
    asked = len(scripted.requests)

    async def command(tool: str, **arguments: object) -> dict[str, object]:
        response = await stack.client.post(
            "/v1/commands", json={"tool": tool, "arguments": arguments}, headers=stack.headers(user)
        )
        assert response.status_code == 200, response.text
        body: dict[str, object] = response.json()
        return body

    move = await command("update_schedule", event_id=meeting["id"], date="2026-09-26", time="16:00")
    assert (move["outcome"], move["model_calls"]) == ("held", 0)
    held = move["command"]
    assert (
        isinstance(held, dict) and held["status"] == "held" and held["hold_reason"] == "change_confirmation"
    )
    assert [(e["id"], e["start"]) for e in await read_events(stack, user)] == [
        (meeting["id"], meeting["start"])
    ]

    confirmed = await command("confirm_command", command_id=held["id"])
    assert (confirmed["outcome"], confirmed["model_calls"]) == ("updated", 0)
    assert [(e["id"], e["start"]) for e in await read_events(stack, user)] == [
        (meeting["id"], "2026-09-26T16:00:00+08:00")
    ]

    removal = await command("delete_schedule", event_id=meeting["id"])
    assert removal["outcome"] == "held"
    dropped = await command("cancel_schedule_command")
    assert (dropped["outcome"], dropped["model_calls"]) == ("cancelled", 0)
    assert [e["id"] for e in await read_events(stack, user)] == [meeting["id"]]
    assert len(scripted.requests) == asked

    # Another user's event is one that does not exist; nothing is held, nothing changes.
    stranger = await stack.client.post(
        "/v1/commands",
        json={"tool": "delete_schedule", "arguments": {"event_id": meeting["id"]}},
        headers=stack.headers(f"{user}-stranger"),
    )
    assert stranger.status_code == 200
    assert (stranger.json()["outcome"], stranger.json()["command"]) == ("rejected", None)
    assert [e["id"] for e in await read_events(stack, user)] == [meeting["id"]]
    # Arguments are the tool's own argument model: a date nothing reads one way is refused, never guessed.
    bad = await command("prepare_or_create_schedule", title="x", date="whenever suits")
    assert bad["outcome"] == "rejected" and len(await read_events(stack, user)) == 1
    for body in (
        {"tool": "query_schedule_range", "arguments": {}},
        {"tool": "update_schedule", "arguments": []},
    ):
        refused = await stack.client.post("/v1/commands", json=body, headers=stack.headers(user))
        assert refused.status_code == 422
    assert len(scripted.requests) == asked


async def calendar_names(db: AsyncEngine, user: str) -> list[str]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text("select name from commands.calendars where user_id = :u order by position"), {"u": user}
        )
        return [str(r[0]) for r in rows]


async def test_a_new_users_calendars_are_named_in_their_language(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(default="OK."))
    assert (await stack.chat(user, "hello there")).status_code == 200
    assert await calendar_names(db, user) == ["Work", "Family", "Personal"]
    assert "Work" in scripted.requests[-1].messages[0]["content"]
    chinese = f"{user}-zh"
    assert (await stack.chat(chinese, "你好")).status_code == 200
    assert await calendar_names(db, chinese) == ["工作", "家庭", "个人"]
    # Named once: a later message in the other language renames nothing.
    assert (await stack.chat(user, "你好")).status_code == 200
    assert await calendar_names(db, user) == ["Work", "Family", "Personal"]
