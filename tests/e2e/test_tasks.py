"""Tasks through the HTTP API (contract §21), over the whole stack with PostgreSQL: kept, changed,
completed and removed, the caller's only; a task whose minutes do not fit before its due in the
user's working hours is at risk by the minutes missing; a body that is not a task is 422; the next,
unrelated chat message is answered as usual."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, script

pytestmark = pytest.mark.e2e

# The stack's clock: Thursday 2026-09-24 10:00 in Shanghai; the deployment works 09:00–18:00.
FRIDAY_EVENING = "2026-09-25T18:00:00+08:00"


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def tasks_of(stack: Stack, user: str, **params: Any) -> list[dict[str, Any]]:
    response = await stack.client.get("/v1/tasks", params=params, headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["tasks"]
    return found


async def add(stack: Stack, user: str, **body: Any) -> Any:
    return await stack.client.post("/v1/tasks", json=body, headers=stack.headers(user))


async def test_tasks_are_kept_completed_and_removed_and_the_next_message_is_ordinary(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    report = await add(stack, user, title="季度报告", duration_minutes=240, due=FRIDAY_EVENING)
    assert report.status_code == 201, report.text
    made = report.json()
    assert (made["status"], made["at_risk"], made["missing_minutes"]) == ("open", False, 0)
    async with db.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT title, duration_minutes, status FROM commands.tasks WHERE user_id = :u"),
                {"u": user},
            )
        ).one()
    assert tuple(row) == ("季度报告", 240, "open")

    # Thursday 10:00–18:00 and Friday 09:00–18:00 hold 17 hours; 20 more cannot fit.
    huge = (await add(stack, user, title="翻译", duration_minutes=1200, due=FRIDAY_EVENING)).json()
    assert huge["at_risk"] is True and huge["missing_minutes"] >= 180, huge
    listed = {t["title"]: t for t in await tasks_of(stack, user)}
    assert listed["翻译"]["at_risk"] and not listed["季度报告"]["at_risk"]

    done = await stack.client.patch(
        f"/v1/tasks/{made['id']}", json={"done": True}, headers=stack.headers(user)
    )
    assert done.status_code == 200, done.text
    assert (done.json()["status"], done.json()["percent"]) == ("done", 100)
    assert done.json()["completed_at"] is not None
    assert [t["title"] for t in await tasks_of(stack, user, incomplete_only="true")] == ["翻译"]

    gone = await stack.client.delete(f"/v1/tasks/{huge['id']}", headers=stack.headers(user))
    assert gone.status_code == 204
    again = await stack.client.delete(f"/v1/tasks/{huge['id']}", headers=stack.headers(user))
    assert again.status_code == 404
    assert [t["title"] for t in await tasks_of(stack, user)] == ["季度报告"]

    scripted.set_script(script(default="你好！"))
    hello = (await stack.chat(user, "你好")).json()
    assert hello["outcome"] == "answered", hello


async def test_a_body_that_is_not_a_task_is_422_and_another_users_task_is_404(
    stack: Stack, user: str
) -> None:
    for body in (
        {"title": "x", "duration_minutes": 0},
        {"title": "", "duration_minutes": 60},
        {"title": "x", "duration_minutes": 60, "chunk_minutes": 90, "max_chunk_minutes": 60},
        {"title": "x", "duration_minutes": 60, "due": "2026-09-25T18:00:00"},
        {"title": "x", "duration_minutes": 60, "priority": 9},
        # PostgreSQL cannot store a NUL, and a lone surrogate has no UTF-8 (a fuzzed 502 before).
        {"title": "a\u0000b", "duration_minutes": 60},
    ):
        refused = await add(stack, user, **body)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["error"]["message"], refused.text
    # A lone surrogate, as JSON lets a client spell it, has no UTF-8 to store.
    lone = await stack.client.post(
        "/v1/tasks",
        content=b'{"title": "a\\ud8dbb", "duration_minutes": 60}',
        headers={**stack.headers(user), "Content-Type": "application/json"},
    )
    assert lone.status_code == 422, lone.text
    mine = (await add(stack, user, title="读书", duration_minutes=60)).json()
    other = f"{user}-other"
    patched = await stack.client.patch(
        f"/v1/tasks/{mine['id']}", json={"done": True}, headers=stack.headers(other)
    )
    assert patched.status_code == 404
    assert (await tasks_of(stack, user))[0]["status"] == "open"
    assert await tasks_of(stack, other) == []
    renamed = await stack.client.patch(
        f"/v1/tasks/{mine['id']}", json={"title": "x\u0000"}, headers=stack.headers(user)
    )
    assert renamed.status_code == 422, renamed.text
    assert [t["title"] for t in await tasks_of(stack, user)] == ["读书"]


THURSDAY_TEN = "2026-09-24T10:00:00+08:00"
THURSDAY_ELEVEN = "2026-09-24T11:00:00+08:00"
THURSDAY_NOON = "2026-09-24T12:00:00+08:00"


async def block_rows(db: AsyncEngine, user: str) -> dict[str, tuple[str, datetime, datetime]]:
    """Each task block of the user by task title: its id, start and end as stored."""
    async with db.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT t.title, e.id, e.start_at, e.end_at FROM commands.events e "
                "JOIN commands.tasks t ON t.id = e.task_id WHERE e.user_id = :u"
            ),
            {"u": user},
        )
        return {r.title: (r.id, r.start_at, r.end_at) for r in rows}


async def test_a_task_placed_by_moving_another_tasks_block_says_so_to_the_client(
    stack: Stack, db: AsyncEngine, user: str
) -> None:
    # "周报" takes Thursday 10:00–11:00, the only hour a task due at 11:00 has (contract §21).
    weekly = await add(stack, user, title="周报", duration_minutes=60, due=FRIDAY_EVENING)
    assert weekly.status_code == 201 and weekly.json()["moved_blocks"] == [], weekly.text
    urgent = await add(stack, user, title="急事", duration_minutes=60, due=THURSDAY_ELEVEN)
    assert urgent.status_code == 201, urgent.text
    [move] = urgent.json()["moved_blocks"]
    rows = await block_rows(db, user)
    block_id, start, end = rows["周报"]
    assert (move["task_id"], move["title"], move["block_id"]) == (weekly.json()["id"], "周报", block_id)
    assert (at(move["old_start"]), at(move["old_end"])) == (at(THURSDAY_TEN), at(THURSDAY_ELEVEN))
    assert (
        (at(move["new_start"]), at(move["new_end"]))
        == (start, end)
        == (at(THURSDAY_ELEVEN), at(THURSDAY_NOON))
    )
    assert rows["急事"][1:] == (at(THURSDAY_TEN), at(THURSDAY_ELEVEN))

    # Two hours by noon, changed on PATCH: "周报" moves on to 12:00, and the answer says so too.
    longer = await stack.client.patch(
        f"/v1/tasks/{urgent.json()['id']}",
        json={"duration_minutes": 120, "due": THURSDAY_NOON},
        headers=stack.headers(user),
    )
    assert longer.status_code == 200, longer.text
    [move] = longer.json()["moved_blocks"]
    _, start, end = (await block_rows(db, user))["周报"]
    assert (move["block_id"], at(move["old_start"]), at(move["new_start"])) == (
        block_id,
        at(THURSDAY_ELEVEN),
        start,
    )
    assert (start, end) == (at(THURSDAY_NOON), at(THURSDAY_NOON) + timedelta(hours=1))


async def test_a_task_added_in_chat_that_moved_another_tasks_block_names_it_in_the_reply(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    assert (await add(stack, user, title="周报", duration_minutes=60, due=FRIDAY_EVENING)).status_code == 201
    scripted.set_script(
        script(
            on_user(
                "急事",
                tool_calls=[call("add_task", title="急事", duration_minutes=60, due="D", due_time="11:00")],
            )
        )
    )
    added = (await stack.chat(user, "11点前要处理一个小时的急事")).json()
    assert added["outcome"] == "created", added
    rows = await block_rows(db, user)
    assert rows["周报"][1:] == (at(THURSDAY_ELEVEN), at(THURSDAY_NOON))
    assert rows["急事"][1:] == (at(THURSDAY_TEN), at(THURSDAY_ELEVEN))
    # The reply names the moved block with its old and new time, weekday included.
    assert "「周报」周四 9月24日 10:00–11:00 → 周四 9月24日 11:00–12:00" in added["reply"], added
