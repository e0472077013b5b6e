"""Every change can be seen and taken back (contract §15), through HTTP, with the facts read back:
`GET /v1/events`, `GET /v1/changes`, the feed and the database. Each case also sends the next,
unrelated message and checks that it changes nothing."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from icalendar import Calendar
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script

pytestmark = pytest.mark.e2e

MEETING = call("prepare_or_create_schedule", title="和张三开会", date="D+1", time="15:00")


async def events(stack: Stack, user: str) -> list[dict[str, Any]]:
    return await read_events(stack, user)


def spans(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["title"], e["start"]) for e in found]


async def changes(stack: Stack, user: str) -> list[dict[str, Any]]:
    response = await stack.client.get("/v1/changes", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["changes"]
    return found


async def chat(stack: Stack, user: str, message: str, **fields: Any) -> dict[str, Any]:
    response = await stack.chat(user, message, **fields)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def undo(stack: Stack, user: str, change_id: str) -> Any:
    return await stack.client.post(f"/v1/changes/{change_id}/undo", headers=stack.headers(user))


def refusal(response: Any) -> str:
    """The code of an error answer, which carries §11's body: `{"error": {"code", "message"}}`."""
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["message"], body
    code: str = body["error"]["code"]
    return code


async def unrelated_message_changes_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    """The next, unrelated message: no write, the calendar and the log as they were."""
    scripted.set_script(script(on_user("谢谢", text="不客气。")))
    before_events, before_log = await table(db, user), await changes(stack, user)
    thanks = await chat(stack, user, "谢谢")
    assert thanks["outcome"] == "answered" and thanks["tool_calls"] == []
    assert await table(db, user) == before_events
    assert await changes(stack, user) == before_log


async def table(db: AsyncEngine, user: str) -> list[Any]:
    """Every column of every row of the user's events but the time it was last written."""
    async with db.connect() as conn:
        rows = await conn.execute(
            text("select to_jsonb(e) - 'updated_at' from commands.events e where user_id = :u order by id"),
            {"u": user},
        )
        return [r[0] for r in rows]


async def created_meeting(
    stack: Stack, scripted: ScriptedModelServer, user: str, **more: Any
) -> dict[str, Any]:
    scripted.set_script(
        script(on_user("开会", tool_calls=[{**MEETING, "arguments": {**MEETING["arguments"], **more}}]))
    )
    answer = await chat(stack, user, "明天下午三点和张三开会")
    assert answer["outcome"] == "created", answer
    [meeting] = await events(stack, user)
    return meeting


async def confirmed(
    stack: Stack, scripted: ScriptedModelServer, user: str, tool: str, **arguments: Any
) -> None:
    scripted.set_script(script(on_user("改一下", tool_calls=[call(tool, **arguments)])))
    held = await chat(stack, user, "改一下")
    assert held["outcome"] in ("held", "conflict"), held
    done = await chat(stack, user, "确认")
    assert done["outcome"] in ("updated", "deleted") and done["model_calls"] == 0, done


# ---- the log ------------------------------------------------------------------------------------


async def test_a_bare_undo_right_after_a_create_removes_it_with_zero_model_calls(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    meeting = await created_meeting(stack, scripted, user)
    [made] = await changes(stack, user)
    assert (made["kind"], made["source"], made["event_id"], made["before"]) == (
        "created",
        "chat",
        meeting["id"],
        None,
    )
    assert made["after"]["uid"] == meeting["uid"] and made["turn_id"]
    scripted.clear_requests()
    undone = await chat(stack, user, "撤销")
    assert (undone["outcome"], undone["model_calls"]) == ("deleted", 0), undone
    assert scripted.requests == []
    assert await events(stack, user) == []
    log = await changes(stack, user)
    assert [c["kind"] for c in log] == ["deleted", "created"]
    assert log[0]["undoes"] == made["id"] and log[1]["undone_by"] == log[0]["id"]
    await unrelated_message_changes_nothing(stack, scripted, db, user)


async def test_a_move_is_undone_through_the_api_and_the_undo_itself_can_be_undone(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    meeting = await created_meeting(stack, scripted, user)
    await confirmed(
        stack, scripted, user, "update_schedule", event_id=meeting["id"], date="D+2", time="10:00"
    )
    moved = await table(db, user)
    assert spans(await events(stack, user)) == [("和张三开会", "2026-09-26T10:00:00+08:00")]
    move = (await changes(stack, user))[0]
    assert (move["kind"], move["before"]["start"], move["after"]["start"]) == (
        "updated",
        "2026-09-25T15:00:00+08:00",
        "2026-09-26T10:00:00+08:00",
    )
    response = await undo(stack, user, move["id"])
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "updated" and response.json()["model_calls"] == 0
    assert spans(await events(stack, user)) == [("和张三开会", "2026-09-25T15:00:00+08:00")]
    reverted = (await changes(stack, user))[0]
    assert (reverted["source"], reverted["undoes"]) == ("api", move["id"])
    # The undo is a change like any other: undoing it gives the move back exactly.
    again = await undo(stack, user, reverted["id"])
    assert again.status_code == 200, again.text
    assert await table(db, user) == moved
    await unrelated_message_changes_nothing(stack, scripted, db, user)


async def test_a_delete_undone_brings_back_the_event_with_its_id_uid_place_notes_and_reminder(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    meeting = await created_meeting(
        stack, scripted, user, location="中山路 1 号 3 楼", notes="带上季度报表", reminder_minutes=15
    )
    first = await table(db, user)
    await confirmed(stack, scripted, user, "delete_schedule", event_id=meeting["id"])
    assert await events(stack, user) == []
    scripted.clear_requests()
    back = await chat(stack, user, "撤回")
    assert (back["outcome"], back["model_calls"]) == ("created", 0), back
    assert await table(db, user) == first
    [restored] = await events(stack, user)
    assert {k: restored.get(k) for k in ("id", "uid", "location", "notes", "reminder_minutes")} == {
        "id": meeting["id"],
        "uid": meeting["uid"],
        "location": "中山路 1 号 3 楼",
        "notes": "带上季度报表",
        "reminder_minutes": 15,
    }
    feed = await stack.client.get("/v1/calendar.ics", headers=stack.headers(user))
    [component] = list(Calendar.from_ical(feed.content).walk("VEVENT"))
    assert str(component["UID"]) == meeting["uid"] and str(component["LOCATION"]) == "中山路 1 号 3 楼"
    assert [a.decoded("TRIGGER") for a in component.walk("VALARM")] == [-timedelta(minutes=15)]
    await unrelated_message_changes_nothing(stack, scripted, db, user)


async def test_a_scope_this_delete_of_a_series_is_undone_by_the_models_undo_change(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    weekly = call(
        "prepare_or_create_schedule",
        title="周会",
        date="2026-09-28",
        time="10:00",
        recurrence="FREQ=WEEKLY;BYDAY=MO;COUNT=4",
    )
    scripted.set_script(script(on_user("周会", tool_calls=[weekly])))
    assert (await chat(stack, user, "每周一上午十点周会"))["outcome"] == "held"
    assert (await chat(stack, user, "确认"))["outcome"] == "created"
    found = await events(stack, user)
    first = await table(db, user)
    await confirmed(stack, scripted, user, "delete_schedule", event_id=found[1]["id"], scope="this")
    assert len(await events(stack, user)) == 3
    deletion = (await changes(stack, user))[0]
    assert (deletion["kind"], deletion["scope"]) == ("updated", "this")  # the master gains an EXDATE
    scripted.set_script(script(on_user("撤销刚才的删除", tool_calls=[call("undo_change")])))
    answer = await chat(stack, user, "撤销刚才的删除")
    assert answer["model_calls"] == 1 and answer["tool_calls"][0]["name"] == "undo_change", answer
    assert spans(await events(stack, user)) == spans(found)
    assert await table(db, user) == first
    await unrelated_message_changes_nothing(stack, scripted, db, user)


# ---- when an undo does not run --------------------------------------------------------------------


async def test_a_bare_undo_after_the_window_goes_to_the_model(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    await created_meeting(stack, scripted, user)
    first = await table(db, user)
    start = stack.clock.now()
    stack.clock.advance(timedelta(minutes=stack.settings.offer_window_minutes + 1))
    try:
        scripted.set_script(script(on_user("撤销", text="要撤销哪一个修改？")))
        late = await chat(stack, user, "撤销")
    finally:
        stack.clock.set(start)
    assert late["model_calls"] == 1 and late["tool_calls"] == []
    assert await table(db, user) == first
    await unrelated_message_changes_nothing(stack, scripted, db, user)


async def test_a_forwarded_undo_does_not_undo(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    await created_meeting(stack, scripted, user)
    first = await table(db, user)
    scripted.set_script(script(on_user("撤销", tool_calls=[call("undo_change")])))
    quoted = await chat(stack, user, "> 撤销")
    assert quoted["outcome"] != "deleted", quoted
    forwarded = await chat(
        stack,
        user,
        "fyi\n---------- Forwarded message ---------\nFrom: boss@example.com\n\n撤销",
        channel="email",
    )
    assert forwarded["outcome"] != "deleted", forwarded
    assert await table(db, user) == first
    assert [c["kind"] for c in await changes(stack, user)] == ["created"]
    await unrelated_message_changes_nothing(stack, scripted, db, user)


async def test_an_undo_whose_event_changed_since_is_refused_and_writes_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    meeting = await created_meeting(stack, scripted, user)
    [create] = await changes(stack, user)
    await confirmed(stack, scripted, user, "update_schedule", event_id=meeting["id"], time="17:00")
    state, log = await table(db, user), await changes(stack, user)
    response = await undo(stack, user, create["id"])
    assert response.status_code == 409, response.text
    assert refusal(response) == "changed_since"
    assert await table(db, user) == state
    assert await changes(stack, user) == log
    await unrelated_message_changes_nothing(stack, scripted, db, user)


async def test_an_undo_of_a_change_undone_already_is_refused_and_writes_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    meeting = await created_meeting(stack, scripted, user)
    await confirmed(stack, scripted, user, "update_schedule", event_id=meeting["id"], time="17:00")
    move = (await changes(stack, user))[0]
    assert (await undo(stack, user, move["id"])).status_code == 200
    state, log = await table(db, user), await changes(stack, user)
    again = await undo(stack, user, move["id"])
    assert again.status_code == 409, again.text
    assert refusal(again) == "already_undone"
    assert await table(db, user) == state
    assert await changes(stack, user) == log
    # Chat is answered in words: the same refusal, with a reply and no error status.
    scripted.set_script(
        script(on_user("撤销那次修改", tool_calls=[call("undo_change", change_id=move["id"])]))
    )
    said = await chat(stack, user, "撤销那次修改")
    assert said["tool_calls"][0]["result"] == "error:already_undone" and said["reply"], said
    assert await table(db, user) == state
    await unrelated_message_changes_nothing(stack, scripted, db, user)


async def test_another_users_change_id_is_404_and_changes_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    await created_meeting(stack, scripted, user)
    [create] = await changes(stack, user)
    stranger = f"u-{uuid.uuid4().hex[:10]}"
    theirs = await undo(stack, stranger, create["id"])
    unknown = await undo(stack, user, uuid.uuid4().hex)
    assert (theirs.status_code, unknown.status_code) == (404, 404)
    assert theirs.json() == unknown.json() and refusal(unknown) == "not_found"
    assert await changes(stack, stranger) == []
    assert len(await events(stack, user)) == 1
    await unrelated_message_changes_nothing(stack, scripted, db, user)


# ---- a confirmation is bound to its offer ---------------------------------------------------------


async def meeting_held_to_move_to_five(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> dict[str, Any]:
    """Tomorrow's 15:00 meeting, with its move to 17:00 (then free) held for the user's word."""
    meeting = await created_meeting(stack, scripted, user)
    scripted.set_script(
        script(
            on_user("改到五点", tool_calls=[call("update_schedule", event_id=meeting["id"], time="17:00")])
        )
    )
    held = await chat(stack, user, "改到五点")
    assert held["outcome"] == "held", held
    return meeting


async def test_a_stale_confirmation_writes_nothing_and_offers_the_change_again(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    meeting = await meeting_held_to_move_to_five(stack, scripted, user)
    # Between the offer and the "确认", the event changes elsewhere (the user's calendar app).
    async with db.begin() as conn:
        await conn.execute(
            text("update commands.events set title = '和张三李四开会', location = '3 楼' where id = :i"),
            {"i": meeting["id"]},
        )
    changed = await table(db, user)
    stale = await chat(stack, user, "确认")
    assert (stale["outcome"], stale["model_calls"]) == ("held", 0), stale
    assert await table(db, user) == changed
    offer = stale["command"]["change"]
    assert (
        offer["before"]["title"] == "和张三李四开会"
        and offer["after"]["start"] == "2026-09-25T17:00:00+08:00"
    )
    done = await chat(stack, user, "确认")
    assert done["outcome"] == "updated", done
    [now] = await events(stack, user)
    assert (now["title"], now["location"], now["start"]) == (
        "和张三李四开会",
        "3 楼",
        "2026-09-25T17:00:00+08:00",
    )
    await unrelated_message_changes_nothing(stack, scripted, db, user)


async def test_a_confirmation_onto_an_event_added_since_writes_nothing_and_offers_the_conflict(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    meeting = await meeting_held_to_move_to_five(stack, scripted, user)
    # Between the offer of a free 17:00 and the "确认", an event arrives there (a sync, say).
    async with db.begin() as conn:
        await conn.execute(
            text(
                "insert into commands.events (id, user_id, title, start_at, end_at, calendar) values "
                "('dentist0000000000000000000000001', :u, '看牙医', "
                "'2026-09-25T17:30:00+08:00', '2026-09-25T18:30:00+08:00', '工作')"
            ),
            {"u": user},
        )
    before = await table(db, user)
    again = await chat(stack, user, "确认")
    # Offered again, held as every change is (contract §9), with the new conflict shown.
    assert (again["outcome"], again["model_calls"]) == ("held", 0), again
    assert again["command"]["kind"] == "change", again
    assert await table(db, user) == before
    done = await chat(stack, user, "确认")  # now the user has seen the double booking
    assert done["outcome"] == "updated", done
    moved = next(e for e in await events(stack, user) if e["id"] == meeting["id"])
    assert moved["start"] == "2026-09-25T17:00:00+08:00"
    await unrelated_message_changes_nothing(stack, scripted, db, user)


async def test_a_following_split_is_undone_as_a_whole(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    weekly = call(
        "prepare_or_create_schedule",
        title="周会",
        date="2026-09-28",
        time="10:00",
        recurrence="FREQ=WEEKLY;BYDAY=MO;COUNT=4",
    )
    scripted.set_script(script(on_user("周会", tool_calls=[weekly])))
    assert (await chat(stack, user, "每周一上午十点周会"))["outcome"] == "held"
    assert (await chat(stack, user, "确认"))["outcome"] == "created"
    found = await events(stack, user)
    first = await table(db, user)
    await confirmed(
        stack, scripted, user, "update_schedule", event_id=found[2]["id"], time="15:00", scope="following"
    )
    split = (await changes(stack, user))[0]
    assert (split["kind"], split["scope"], len(split["rows"])) == (
        "updated",
        "following",
        2,
    )  # master + new series
    assert [s for _, s in spans(await events(stack, user))][2:] == [
        "2026-10-12T15:00:00+08:00",
        "2026-10-19T15:00:00+08:00",
    ]
    undone = await chat(stack, user, "undo")
    assert (undone["outcome"], undone["model_calls"]) == ("updated", 0), undone
    assert await table(db, user) == first
    assert spans(await events(stack, user)) == spans(found)
    await unrelated_message_changes_nothing(stack, scripted, db, user)
