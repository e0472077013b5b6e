"""Changing what is on the calendar (contract §9), through HTTP with the facts read back: every
update and delete is held and runs only on the user's word; series keep their wall-clock time
across DST and change exactly the occurrences their scope names; multi-day events block every day
they cover; an automation request is a plan that runs nothing; another user's id is nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, count_events, on_user, read_events, script

pytestmark = pytest.mark.e2e


async def events(
    stack: Stack,
    user: str,
    start: str = "2026-09-01T00:00:00+08:00",
    end: str = "2026-12-31T00:00:00+08:00",
    tz: str | None = None,
) -> list[dict[str, Any]]:
    return await read_events(stack, user, start, end, tz)


def spans(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["title"], e["start"]) for e in found]


async def create_series(
    stack: Stack, scripted: ScriptedModelServer, user: str, *, tz: str | None = None, **arguments: Any
) -> None:
    scripted.set_script(script(on_user("重复", tool_calls=[call("prepare_or_create_schedule", **arguments)])))
    plan = (await stack.chat(user, "重复的日程", tz=tz)).json()
    assert plan["outcome"] == "held", plan
    assert plan["command"]["status"] == "held"
    done = (await stack.chat(user, "确认", tz=tz)).json()
    assert (done["outcome"], done["model_calls"]) == ("created", 0), done


# ---- move and delete are held, then confirmed ----------------------------------------------------


async def test_a_move_is_held_then_confirmed_and_leaves_exactly_one_event(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "和张三开会",
                tool_calls=[call("prepare_or_create_schedule", title="和张三开会", date="D+1", time="15:00")],
            )
        )
    )
    await stack.chat(user, "明天下午三点和张三开会")
    [meeting] = await events(stack, user)
    scripted.set_script(
        script(
            on_user("改到后天", tool_calls=[call("find_events", start="D+1", end="D+2", text="张三")]),
            {
                "when": {"last_role": "tool", "last_tool": "find_events"},
                "respond": {"tool_calls": [call("update_schedule", event_id=meeting["id"], date="D+2")]},
            },
        )
    )
    held = (await stack.chat(user, "把明天和张三的会改到后天")).json()
    assert held["outcome"] == "held", held
    assert [c["name"] for c in held["tool_calls"]] == ["find_events", "update_schedule"]
    assert "周五" in held["reply"] and "周六" in held["reply"]  # before → after, with weekdays
    # The client gets the change as data too, to show it as a card.
    change = held["command"]["change"]
    assert (held["command"]["kind"], change["action"]) == ("change", "update")
    assert (change["before"]["start"], change["after"]["start"]) == (
        "2026-09-25T15:00:00+08:00",
        "2026-09-26T15:00:00+08:00",
    )
    assert spans(await events(stack, user)) == [("和张三开会", "2026-09-25T15:00:00+08:00")]
    done = (await stack.chat(user, "确认")).json()
    assert (done["outcome"], done["model_calls"]) == ("updated", 0), done
    assert spans(await events(stack, user)) == [("和张三开会", "2026-09-26T15:00:00+08:00")]
    assert await count_events(db, user) == 1
    # The next, unrelated message changes nothing.
    scripted.set_script(script(on_user("谢谢", text="不客气。")))
    await stack.chat(user, "谢谢")
    assert spans(await events(stack, user)) == [("和张三开会", "2026-09-26T15:00:00+08:00")]


async def test_a_delete_is_held_then_confirmed_and_the_event_is_gone(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "牙医",
                tool_calls=[call("prepare_or_create_schedule", title="看牙医", date="D+2", time="09:00")],
            )
        )
    )
    await stack.chat(user, "后天上午九点看牙医")
    [visit] = await events(stack, user)
    scripted.set_script(
        script(on_user("取消看牙医", tool_calls=[call("delete_schedule", event_id=visit["id"])]))
    )
    held = (await stack.chat(user, "取消看牙医吧")).json()
    assert held["outcome"] == "held", held
    assert await count_events(db, user) == 1
    done = (await stack.chat(user, "好的")).json()
    assert (done["outcome"], done["model_calls"]) == ("deleted", 0), done
    assert await events(stack, user) == []


async def test_a_delete_refused_with_no_keeps_the_event(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "健身",
                tool_calls=[call("prepare_or_create_schedule", title="健身", date="D+1", time="19:00")],
            )
        )
    )
    await stack.chat(user, "明晚七点健身")
    [gym] = await events(stack, user)
    scripted.set_script(script(on_user("删掉", tool_calls=[call("delete_schedule", event_id=gym["id"])])))
    assert (await stack.chat(user, "把健身删掉")).json()["outcome"] == "held"
    assert (await stack.chat(user, "算了")).json()["outcome"] == "cancelled"
    assert spans(await events(stack, user)) == [("健身", "2026-09-25T19:00:00+08:00")]


async def test_another_users_event_id_is_answered_like_one_that_does_not_exist(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    owner = f"{user}-owner"
    scripted.set_script(
        script(
            on_user(
                "机密",
                tool_calls=[call("prepare_or_create_schedule", title="机密会议", date="D+1", time="10:00")],
            )
        )
    )
    await stack.chat(owner, "明天十点机密会议")
    [secret] = await events(stack, owner)
    scripted.set_script(
        script(
            on_user("删", tool_calls=[call("delete_schedule", event_id=secret["id"])]),
            on_user("改", tool_calls=[call("update_schedule", event_id=secret["id"], time="11:00")]),
        )
    )
    for message in ("删了它", "改一下"):
        answer = (await stack.chat(user, message)).json()
        assert answer["command"] is None
        assert answer["tool_calls"][0]["result"] == "error:not_found"
    missing = (await stack.chat(user, "删了那个不存在的")).json()
    assert missing["tool_calls"][0]["result"] == "error:not_found"
    assert spans(await events(stack, owner)) == [("机密会议", "2026-09-25T10:00:00+08:00")]
    async with db.connect() as conn:
        stubs = await conn.scalar(text("select count(*) from commands.stubs where user_id = :u"), {"u": user})
    assert stubs == 0


# ---- series --------------------------------------------------------------------------------------


async def test_a_weekly_series_keeps_its_local_time_across_a_dst_change(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    tz = "America/New_York"
    await create_series(
        stack,
        scripted,
        user,
        tz=tz,
        title="Standup",
        date="2026-10-26",
        time="09:00",
        recurrence="FREQ=WEEKLY;BYDAY=MO",
    )
    found = await events(stack, user, "2026-10-20T00:00:00-04:00", "2026-11-20T00:00:00-05:00", tz=tz)
    assert {(e["series_id"], e["recurrence"]) for e in found} == {
        (found[0]["series_id"], "FREQ=WEEKLY;BYDAY=MO")
    }
    assert spans(found) == [
        ("Standup", "2026-10-26T09:00:00-04:00"),
        ("Standup", "2026-11-02T09:00:00-05:00"),
        ("Standup", "2026-11-09T09:00:00-05:00"),
        ("Standup", "2026-11-16T09:00:00-05:00"),
    ]


async def test_a_repeating_create_is_held_as_a_plan_with_the_rule_and_the_next_three(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "周会",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="周会",
                        date="W1+1",
                        time="10:00",
                        recurrence="FREQ=WEEKLY;BYDAY=MO",
                    )
                ],
            )
        )
    )
    plan = (await stack.chat(user, "每周一上午十点开周会")).json()
    assert plan["outcome"] == "held"
    assert "每周一" in plan["reply"]
    for day in ("9月28日", "10月5日", "10月12日"):
        assert day in plan["reply"]
    assert await count_events(db, user) == 0


async def _weekly(stack: Stack, scripted: ScriptedModelServer, user: str) -> list[dict[str, Any]]:
    await create_series(
        stack,
        scripted,
        user,
        title="周会",
        date="2026-09-28",
        time="10:00",
        recurrence="FREQ=WEEKLY;BYDAY=MO;COUNT=4",
    )
    found = await events(stack, user)
    assert spans(found) == [
        ("周会", "2026-09-28T10:00:00+08:00"),
        ("周会", "2026-10-05T10:00:00+08:00"),
        ("周会", "2026-10-12T10:00:00+08:00"),
        ("周会", "2026-10-19T10:00:00+08:00"),
    ]
    return found


async def _confirm_change(
    stack: Stack, scripted: ScriptedModelServer, user: str, name: str, **arguments: Any
) -> dict[str, Any]:
    scripted.set_script(script(on_user("改一下", tool_calls=[call(name, **arguments)])))
    held = (await stack.chat(user, "改一下")).json()
    assert held["outcome"] in ("held", "conflict"), held
    done = (await stack.chat(user, "确认")).json()
    assert done["model_calls"] == 0, done
    result: dict[str, Any] = done
    return result


async def test_scope_this_moves_exactly_one_occurrence(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    found = await _weekly(stack, scripted, user)
    done = await _confirm_change(
        stack, scripted, user, "update_schedule", event_id=found[1]["id"], time="11:00", scope="this"
    )
    assert done["outcome"] == "updated"
    assert spans(await events(stack, user)) == [
        ("周会", "2026-09-28T10:00:00+08:00"),
        ("周会", "2026-10-05T11:00:00+08:00"),
        ("周会", "2026-10-12T10:00:00+08:00"),
        ("周会", "2026-10-19T10:00:00+08:00"),
    ]


async def test_scope_following_changes_this_and_later_occurrences(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    found = await _weekly(stack, scripted, user)
    await _confirm_change(
        stack, scripted, user, "update_schedule", event_id=found[2]["id"], time="15:00", scope="following"
    )
    assert spans(await events(stack, user)) == [
        ("周会", "2026-09-28T10:00:00+08:00"),
        ("周会", "2026-10-05T10:00:00+08:00"),
        ("周会", "2026-10-12T15:00:00+08:00"),
        ("周会", "2026-10-19T15:00:00+08:00"),
    ]


async def test_scope_all_renames_every_occurrence(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    found = await _weekly(stack, scripted, user)
    await _confirm_change(
        stack, scripted, user, "update_schedule", event_id=found[3]["id"], title="部门例会", scope="all"
    )
    assert [t for t, _ in spans(await events(stack, user))] == ["部门例会"] * 4


async def test_delete_scopes_remove_exactly_their_occurrences(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    found = await _weekly(stack, scripted, user)
    await _confirm_change(stack, scripted, user, "delete_schedule", event_id=found[1]["id"], scope="this")
    assert [s for _, s in spans(await events(stack, user))] == [
        "2026-09-28T10:00:00+08:00",
        "2026-10-12T10:00:00+08:00",
        "2026-10-19T10:00:00+08:00",
    ]
    await _confirm_change(
        stack, scripted, user, "delete_schedule", event_id=found[2]["id"], scope="following"
    )
    assert [s for _, s in spans(await events(stack, user))] == ["2026-09-28T10:00:00+08:00"]
    await _confirm_change(stack, scripted, user, "delete_schedule", event_id=found[0]["id"], scope="all")
    assert await events(stack, user) == []


async def test_a_series_occurrence_is_a_conflict_for_a_new_event(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await _weekly(stack, scripted, user)
    scripted.set_script(
        script(
            on_user(
                "面试",
                tool_calls=[
                    call("prepare_or_create_schedule", title="面试", date="2026-10-12", time="10:30")
                ],
            )
        )
    )
    clash = (await stack.chat(user, "10月12日十点半面试")).json()
    assert clash["outcome"] == "conflict", clash
    assert "周会" in clash["reply"]


# ---- multi-day, reminders, automation ------------------------------------------------------------


async def test_a_multi_day_event_blocks_each_local_day_it_covers(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "出差",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule", title="出差", date="W1+1", end_date="W3+1", all_day=True
                    )
                ],
            ),
            on_user(
                "周二",
                tool_calls=[call("prepare_or_create_schedule", title="开会", date="W2+1", time="10:00")],
            ),
            on_user(
                "周四",
                tool_calls=[call("prepare_or_create_schedule", title="聚餐", date="W4+1", time="19:00")],
            ),
        )
    )
    trip = (await stack.chat(user, "下周一出差三天")).json()
    assert trip["outcome"] == "created", trip
    [event] = await events(stack, user)
    assert (event["start"], event["end"]) == ("2026-09-28T00:00:00+08:00", "2026-10-01T00:00:00+08:00")
    assert (await stack.chat(user, "下周二上午十点开会")).json()["outcome"] == "conflict"
    assert (await stack.chat(user, "下周四晚上聚餐")).json()["outcome"] == "created"


async def test_an_automation_request_is_planned_and_writes_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "总结",
                tool_calls=[
                    call(
                        "propose_automation", trigger="每天早上8点", steps=["读取当天日程", "发给我一段总结"]
                    )
                ],
            )
        )
    )
    answer = (await stack.chat(user, "每天早上帮我总结一下日程")).json()
    assert answer["outcome"] == "planned", answer
    assert await count_events(db, user) == 0
    async with db.connect() as conn:
        status = await conn.scalar(text("select status from commands.plans where user_id = :u"), {"u": user})
    assert status == "offered"
    saved = (await stack.chat(user, "确认")).json()
    assert (saved["outcome"], saved["model_calls"]) == ("planned", 0), saved
    async with db.connect() as conn:
        status = await conn.scalar(text("select status from commands.plans where user_id = :u"), {"u": user})
    assert status == "confirmed"
    assert await count_events(db, user) == 0
    # The plan is listed for its owner only, and its owner alone can delete it.
    listed = (await stack.client.get("/v1/plans", headers=stack.headers(user))).json()["plans"]
    assert [(p["trigger"], p["steps"], p["status"]) for p in listed] == [
        ("每天早上8点", ["读取当天日程", "发给我一段总结"], "confirmed")
    ]
    other = f"{user}-other"
    assert (await stack.client.get("/v1/plans", headers=stack.headers(other))).json() == {"plans": []}
    path = f"/v1/plans/{listed[0]['id']}"
    refused = await stack.client.delete(path, headers=stack.headers(other))
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    assert (await stack.client.delete(path, headers=stack.headers(user))).status_code == 204
    assert (await stack.client.get("/v1/plans", headers=stack.headers(user))).json() == {"plans": []}
    assert (await stack.client.delete(path, headers=stack.headers(user))).status_code == 404


# ---- the recurrence backstop -----------------------------------------------------------------------


async def test_a_one_off_from_words_that_say_every_day_is_held_then_made_a_series(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "吃药",
                tool_calls=[call("prepare_or_create_schedule", title="吃药", date="D+1", time="08:00")],
            ),
            on_user(
                "每天都要",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="吃药",
                        date="D+1",
                        time="08:00",
                        recurrence="FREQ=DAILY",
                    )
                ],
            ),
        )
    )
    held = (await stack.chat(user, "每天早上八点吃药")).json()
    assert held["outcome"] == "held", held
    assert await count_events(db, user) == 0
    plan = (await stack.chat(user, "对，每天都要")).json()
    assert plan["outcome"] == "held", plan
    assert "每天" in plan["reply"]
    done = (await stack.chat(user, "确认")).json()
    assert done["outcome"] == "created", done
    found = await events(stack, user, "2026-09-25T00:00:00+08:00", "2026-09-28T00:00:00+08:00")
    assert spans(found) == [
        ("吃药", "2026-09-25T08:00:00+08:00"),
        ("吃药", "2026-09-26T08:00:00+08:00"),
        ("吃药", "2026-09-27T08:00:00+08:00"),
    ]


async def test_words_without_a_marker_create_directly(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "吃药",
                tool_calls=[call("prepare_or_create_schedule", title="吃药", date="D+1", time="08:00")],
            )
        )
    )
    assert (await stack.chat(user, "明天早上八点吃药")).json()["outcome"] == "created"
