"""Tasks placed as blocks (contract §21), through chat (the scripted model's `add_task`,
`complete_task`, `confirm_command`) and the API, over the whole stack with PostgreSQL: a task's
blocks are events of kind `task_block` naming it, inside working hours and before its due; a
meeting written over a block is created as asked while the blocks' re-plan waits as one held
offer listing each block's old and new time — nothing moves until "确认", and the next unrelated
message writes nothing; completing a task frees its later blocks. Facts are read back from the API
and the rows."""

from __future__ import annotations

from datetime import datetime, time
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script

pytestmark = pytest.mark.e2e

# The stack's clock: Thursday 2026-09-24 10:00 in Shanghai; the deployment works 09:00–18:00.
SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 24, 10, 0, tzinfo=SHANGHAI)
FRIDAY_EVENING = datetime(2026, 9, 25, 18, 0, tzinfo=SHANGHAI)


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


def blocks_in(events: list[dict[str, Any]], task_id: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in events if e.get("kind") == "task_block" and (task_id is None or e["task_id"] == task_id)
    ]


def minutes(events: list[dict[str, Any]]) -> int:
    return sum(int((at(e["end"]) - at(e["start"])).total_seconds() // 60) for e in events)


def in_working_hours(event: dict[str, Any]) -> bool:
    start, end = at(event["start"]).astimezone(SHANGHAI), at(event["end"]).astimezone(SHANGHAI)
    return (
        start.date() == end.date()
        and start.isoweekday() <= 5
        and start.time() >= time(9)
        and end.time() <= time(18)
    )


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return at(a["start"]) < at(b["end"]) and at(b["start"]) < at(a["end"])


async def tasks_of(stack: Stack, user: str) -> list[dict[str, Any]]:
    response = await stack.client.get("/v1/tasks", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["tasks"]
    return found


async def active(stack: Stack, user: str) -> dict[str, Any] | None:
    response = await stack.client.get("/v1/commands/active", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: dict[str, Any] | None = response.json()
    return found


async def direct(stack: Stack, user: str, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call sent as the client's own (`POST /v1/commands`): no model in between."""
    response = await stack.client.post(
        "/v1/commands", json={"tool": tool, "arguments": arguments}, headers=stack.headers(user)
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def event_count(db: AsyncEngine, user: str) -> int:
    async with db.connect() as conn:
        value = await conn.scalar(
            text("SELECT count(*) FROM commands.events WHERE user_id = :u"), {"u": user}
        )
    return int(value or 0)


async def test_a_task_from_chat_is_placed_and_a_meeting_on_its_block_moves_it_only_on_confirm(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "季度报告",
                tool_calls=[
                    call("add_task", title="季度报告", duration_minutes=240, due="D+1", due_time="18:00")
                ],
            ),
            on_user(
                "开会", tool_calls=[call("prepare_or_create_schedule", title="开会", date="D", time="11:00")]
            ),
            on_user("确认", tool_calls=[call("confirm_command")]),
            default="今天天气我查不到，不过日历这边一切照旧。",
        )
    )
    added = (await stack.chat(user, "周五下班前要写四个小时的季度报告")).json()
    assert added["outcome"] == "created", added
    [task] = await tasks_of(stack, user)
    assert (task["title"], task["duration_minutes"], task["at_risk"]) == ("季度报告", 240, False)
    assert at(task["due"]) == FRIDAY_EVENING

    placed = blocks_in(await read_events(stack, user), task["id"])
    assert minutes(placed) == 240
    assert all(at(b["start"]) >= NOW and at(b["end"]) <= FRIDAY_EVENING for b in placed), placed
    assert all(in_working_hours(b) for b in placed), placed
    assert not any(overlap(a, b) for a in placed for b in placed if a is not b)
    # Friday still has room for the whole task: the blocks show free, so a meeting is no conflict.
    async with db.connect() as conn:
        shown = (
            await conn.execute(
                text("SELECT bool_and(transparent) FROM commands.events WHERE task_id = :t"),
                {"t": task["id"]},
            )
        ).scalar()
    assert shown is True
    landed_on = next(b for b in placed if at(b["start"]) <= NOW.replace(hour=11) < at(b["end"]))

    meeting = (await stack.chat(user, "今天上午十一点开会")).json()
    assert meeting["outcome"] == "created", meeting
    offer = await active(stack, user)
    assert offer is not None and (offer["kind"], offer["status"]) == ("replan", "held"), offer
    moves = offer["replan"]["moves"]
    assert landed_on["id"] in {m["block_id"] for m in moves}
    for move in moves:
        if move["block_id"] is not None:
            old = next(b for b in placed if b["id"] == move["block_id"])
            assert (at(move["old_start"]), at(move["old_end"])) == (at(old["start"]), at(old["end"]))
    # Created as asked; the blocks have not moved.
    after_meeting = await read_events(stack, user)
    [created] = [e for e in after_meeting if e.get("kind", "event") == "event"]
    assert (created["title"], at(created["start"])) == ("开会", NOW.replace(hour=11))
    assert blocks_in(after_meeting, task["id"]) == placed

    # The next, unrelated message writes nothing and leaves the offer as it is.
    count = await event_count(db, user)
    weather = (await stack.chat(user, "今天天气怎么样")).json()
    assert weather["outcome"] == "answered", weather
    assert await event_count(db, user) == count
    assert blocks_in(await read_events(stack, user), task["id"]) == placed
    assert (await active(stack, user) or {}).get("id") == offer["id"]

    confirmed = (await stack.chat(user, "确认")).json()
    assert confirmed["outcome"] == "updated", confirmed
    assert await active(stack, user) is None
    moved = await read_events(stack, user)
    now_placed = blocks_in(moved, task["id"])
    expected = {
        (at(b["start"]), at(b["end"])) for b in placed if b["id"] not in {m["block_id"] for m in moves}
    }
    expected |= {(at(m["new_start"]), at(m["new_end"])) for m in moves if m["new_start"] is not None}
    assert {(at(b["start"]), at(b["end"])) for b in now_placed} == expected
    assert minutes(now_placed) == 240
    assert not any(overlap(b, created) for b in now_placed)
    assert all(in_working_hours(b) and at(b["end"]) <= FRIDAY_EVENING for b in now_placed)
    # The meeting itself never moved.
    [still] = [e for e in moved if e.get("kind", "event") == "event"]
    assert (still["id"], still["start"], still["end"]) == (created["id"], created["start"], created["end"])


async def test_refusing_a_replan_leaves_the_blocks_and_the_task_at_risk_by_what_they_lost(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "开会", tool_calls=[call("prepare_or_create_schedule", title="评审", date="D", time="10:00")]
            ),
            on_user("不用了", tool_calls=[call("cancel_schedule_command")]),
        )
    )
    # Due today at 12:00: two hours, exactly the time left, so its block must show busy.
    response = await stack.client.post(
        "/v1/tasks",
        json={"title": "周报", "duration_minutes": 120, "due": "2026-09-24T12:00:00+08:00"},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    task = response.json()
    [block] = blocks_in(await read_events(stack, user), task["id"])
    assert (at(block["start"]), at(block["end"])) == (NOW, NOW.replace(hour=12))

    # A busy block is a conflict like any event: created only when the user keeps the time.
    held = (await stack.chat(user, "十点开会")).json()
    assert held["outcome"] == "conflict", held
    asked = await active(stack, user)
    assert asked is not None and asked["status"] == "conflict", asked
    kept = await stack.client.post(
        "/v1/commands",
        json={"tool": "confirm_command", "arguments": {"command_id": asked["id"]}},
        headers=stack.headers(user),
    )
    assert kept.json()["outcome"] == "created", kept.text
    offer = await active(stack, user)
    assert offer is not None and offer["kind"] == "replan", offer
    refused = (await stack.chat(user, "不用了")).json()
    assert refused["outcome"] == "cancelled", refused
    [still] = blocks_in(await read_events(stack, user), task["id"])
    assert still == block
    [listed] = await tasks_of(stack, user)
    assert listed["at_risk"] is True and listed["missing_minutes"] > 0, listed


async def test_an_at_risk_task_is_never_placed_after_its_due_and_completing_frees_later_blocks(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "翻译",
                tool_calls=[
                    call("add_task", title="翻译", duration_minutes=1200, due="D+1", due_time="18:00")
                ],
            ),
        )
    )
    added = (await stack.chat(user, "周五前要翻译二十个小时")).json()
    assert added["outcome"] == "created", added
    [task] = await tasks_of(stack, user)
    assert task["at_risk"] is True and task["missing_minutes"] >= 180, task
    placed = blocks_in(await read_events(stack, user), task["id"])
    assert placed and all(at(b["end"]) <= FRIDAY_EVENING for b in placed)
    assert minutes(placed) == 1200 - task["missing_minutes"]
    # Nothing else could go there before the due: every block shows busy.
    async with db.connect() as conn:
        opaque = (
            await conn.execute(
                text("SELECT bool_and(NOT transparent) FROM commands.events WHERE task_id = :t"),
                {"t": task["id"]},
            )
        ).scalar()
    assert opaque is True

    scripted.set_script(script(on_user("翻译做完", tool_calls=[call("complete_task", task_id=task["id"])])))
    done = (await stack.chat(user, "翻译做完了")).json()
    assert done["outcome"] == "updated", done
    assert blocks_in(await read_events(stack, user), task["id"]) == []
    [finished] = await tasks_of(stack, user)
    assert (finished["status"], finished["percent"]) == ("done", 100)

    # Through the API: a task marked done frees its later blocks the same way.
    other = (
        await stack.client.post(
            "/v1/tasks", json={"title": "读书", "duration_minutes": 60}, headers=stack.headers(user)
        )
    ).json()
    assert blocks_in(await read_events(stack, user), other["id"])
    patched = await stack.client.patch(
        f"/v1/tasks/{other['id']}", json={"done": True}, headers=stack.headers(user)
    )
    assert patched.status_code == 200, patched.text
    assert blocks_in(await read_events(stack, user), other["id"]) == []


async def test_a_meeting_moved_onto_a_block_is_moved_and_the_replan_waits_for_confirm(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(default="好的。"))

    created = await direct(
        stack, user, "prepare_or_create_schedule", title="客户电话", date="D+1", time="16:00"
    )
    assert created["outcome"] == "created", created
    task = (
        await stack.client.post(
            "/v1/tasks",
            json={"title": "方案", "duration_minutes": 60, "due": "2026-09-25T18:00:00+08:00"},
            headers=stack.headers(user),
        )
    ).json()
    [block] = blocks_in(await read_events(stack, user), task["id"])
    assert (at(block["start"]), at(block["end"])) == (NOW, NOW.replace(hour=11))
    [call_event] = [e for e in await read_events(stack, user) if e.get("kind", "event") == "event"]

    held = await direct(stack, user, "update_schedule", event_id=call_event["id"], date="D", time="10:00")
    assert held["outcome"] == "held", held
    change = await active(stack, user)
    assert change is not None
    moved = await direct(stack, user, "confirm_command", command_id=change["id"])
    assert moved["outcome"] == "updated", moved
    offer = await active(stack, user)
    assert offer is not None and (offer["kind"], offer["status"]) == ("replan", "held"), offer
    assert [m["block_id"] for m in offer["replan"]["moves"]] == [block["id"]]
    # The meeting moved as asked; the block waits for the user's word.
    events = await read_events(stack, user)
    [meeting] = [e for e in events if e.get("kind", "event") == "event"]
    assert at(meeting["start"]) == NOW
    assert blocks_in(events, task["id"]) == [block]


async def test_a_replan_whose_new_time_was_taken_since_moves_nothing_on_confirm(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(default="好的。"))

    async def add_task(**body: Any) -> dict[str, Any]:
        response = await stack.client.post("/v1/tasks", json=body, headers=stack.headers(user))
        assert response.status_code == 201, response.text
        made: dict[str, Any] = response.json()
        return made

    report = await add_task(title="报告", duration_minutes=240, due=FRIDAY_EVENING.isoformat())
    assert (await direct(stack, user, "prepare_or_create_schedule", title="开会", date="D", time="11:00"))[
        "outcome"
    ] == "created"
    offer = await active(stack, user)
    assert offer is not None and offer["kind"] == "replan", offer
    before = blocks_in(await read_events(stack, user), report["id"])

    # Another task placed meanwhile takes the time the re-plan offered (the offer is no block yet).
    other = await add_task(title="邮件", duration_minutes=60, due="2026-09-24T18:00:00+08:00")
    [taken] = blocks_in(await read_events(stack, user), other["id"])
    offered = [m for m in offer["replan"]["moves"] if m["new_start"] is not None]
    assert any(overlap({"start": m["new_start"], "end": m["new_end"]}, taken) for m in offered), (
        offered,
        taken,
    )

    count = await event_count(db, user)
    refused = await direct(stack, user, "confirm_command", command_id=offer["id"])
    assert refused["outcome"] != "updated", refused
    assert await event_count(db, user) == count
    assert blocks_in(await read_events(stack, user), report["id"]) == before
    assert blocks_in(await read_events(stack, user), other["id"]) == [taken]


async def test_a_meeting_brought_back_by_an_undo_onto_a_block_offers_the_replan_and_moves_it_on_confirm(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(on_user("确认", tool_calls=[call("confirm_command")]), default="不客气。"))

    made = await direct(stack, user, "prepare_or_create_schedule", title="评审", date="D", time="11:00")
    assert made["outcome"] == "created", made
    [meeting] = await read_events(stack, user)
    held = await direct(stack, user, "delete_schedule", event_id=meeting["id"])
    assert held["outcome"] == "held", held
    change = await active(stack, user)
    assert change is not None
    gone = await direct(stack, user, "confirm_command", command_id=change["id"])
    assert gone["outcome"] == "deleted", gone
    # The meeting's hour is free again: a task that may start at 11:00 is placed there.
    response = await stack.client.post(
        "/v1/tasks",
        json={
            "title": "方案",
            "duration_minutes": 60,
            "earliest": NOW.replace(hour=11).isoformat(),
            "due": FRIDAY_EVENING.isoformat(),
        },
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    task = response.json()
    [block] = blocks_in(await read_events(stack, user), task["id"])
    assert (at(block["start"]), at(block["end"])) == (NOW.replace(hour=11), NOW.replace(hour=12))

    listed = await stack.client.get("/v1/changes", headers=stack.headers(user))
    deleted = next(c for c in listed.json()["changes"] if c["kind"] == "deleted")
    undone = await stack.client.post(f"/v1/changes/{deleted['id']}/undo", headers=stack.headers(user))
    assert undone.status_code == 200 and undone.json()["outcome"] == "created", undone.text
    # The meeting is back where it was, on the block; the block waits for the user's word.
    offer = await active(stack, user)
    assert offer is not None and (offer["kind"], offer["status"]) == ("replan", "held"), offer
    assert [m["block_id"] for m in offer["replan"]["moves"]] == [block["id"]]
    events = await read_events(stack, user)
    [back] = [e for e in events if e.get("kind", "event") == "event"]
    assert (back["id"], back["start"]) == (meeting["id"], meeting["start"])
    assert blocks_in(events, task["id"]) == [block]

    # The next, unrelated message writes nothing and leaves the offer as it is.
    count = await event_count(db, user)
    thanks = (await stack.chat(user, "谢谢")).json()
    assert thanks["outcome"] == "answered", thanks
    assert await event_count(db, user) == count
    assert blocks_in(await read_events(stack, user), task["id"]) == [block]
    assert (await active(stack, user) or {}).get("id") == offer["id"]

    confirmed = (await stack.chat(user, "确认")).json()
    assert confirmed["outcome"] == "updated", confirmed
    [move] = offer["replan"]["moves"]
    [moved] = blocks_in(await read_events(stack, user), task["id"])
    assert (at(moved["start"]), at(moved["end"])) == (at(move["new_start"]), at(move["new_end"]))
    assert not overlap(moved, back) and in_working_hours(moved) and at(moved["end"]) <= FRIDAY_EVENING
    [still] = [e for e in await read_events(stack, user) if e.get("kind", "event") == "event"]
    assert (still["start"], still["end"]) == (back["start"], back["end"])
