"""Pending state never does damage (contract §8, §11), across turns, through HTTP, with the facts
read back from `GET /v1/events` and the database. Each test is one failure the system once had:
a held write executed by an unrelated create, a stub capturing the next request, the zero-model
fast path turning a sentence into a write, claims the exit check let through, a second write that
vanished, time words that wrote the wrong moment, and receipts that could not be read."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.contracts import wire
from calagent.contracts.time import ParseReplyRequest
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import count_events, event_rows, on_user, read_events, script

pytestmark = pytest.mark.e2e


def create(title: str, date: str, time: str | None = None, **more: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"title": title, "date": date, **more}
    if time is not None:
        arguments["time"] = time
    return {"name": "prepare_or_create_schedule", "arguments": arguments}


async def events(stack: Stack, user: str) -> list[dict[str, Any]]:
    return await read_events(stack, user)


async def active(stack: Stack, user: str) -> Any:
    return (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()


async def stub_statuses(db: AsyncEngine, user: str) -> dict[str, str]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text("select title, status from commands.stubs where user_id = :u"), {"u": user}
        )
        return {r.title: r.status for r in rows}


# ---- 1. a held write is never executed by an unrelated create ------------------------------------


async def test_a_held_past_write_is_not_executed_by_the_next_unrelated_create(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("开了个会", tool_calls=[create("开会", "D-1", "15:00")]),
            on_user("游泳", tool_calls=[create("游泳", "W6+0", "10:00")]),
            on_user("谢谢", text="不客气！"),
        )
    )
    held = (await stack.chat(user, "昨天下午三点开了个会")).json()
    assert held["outcome"] == "held"
    swim = (await stack.chat(user, "周六上午十点去游泳")).json()
    assert swim["outcome"] == "created", swim
    assert [(e["title"], e["start"]) for e in await events(stack, user)] == [
        ("游泳", "2026-09-26T10:00:00+08:00")
    ]
    assert await stub_statuses(db, user) == {"开会": "superseded"}
    assert await active(stack, user) is None
    # The next, unrelated message changes nothing either.
    thanks = (await stack.chat(user, "谢谢")).json()
    assert thanks["outcome"] == "answered"
    assert [e["title"] for e in await events(stack, user)] == ["游泳"]


async def test_a_held_forwarded_write_is_not_executed_by_the_users_own_request(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("Quarterly review", tool_calls=[create("Quarterly review", "D+1", "10:00")]),
            on_user("dentist", tool_calls=[create("Dentist", "W5+0", "09:00")]),
        )
    )
    forwarded = (
        "fyi\n---------- Forwarded message ---------\nFrom: boss@example.com\n"
        "Quarterly review tomorrow at 10am, please attend"
    )
    held = (await stack.chat(user, forwarded, channel="email")).json()
    assert held["outcome"] == "held", held
    own = (await stack.chat(user, "book my dentist on Friday at 9am")).json()
    assert own["outcome"] == "created", own
    assert [(e["title"], e["start"]) for e in await events(stack, user)] == [
        ("Dentist", "2026-09-25T09:00:00+08:00")
    ]


# ---- 2. a pending stub does not capture the next request -----------------------------------------


async def test_an_open_weekend_stub_does_not_capture_a_new_request(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("修汽车轮毂", tool_calls=[create("修汽车轮毂", "WE")]),
            on_user("和张三开会", tool_calls=[create("和张三开会", "D+1", "15:00")]),
        )
    )
    weekend = (await stack.chat(user, "这个周末去修汽车轮毂")).json()
    assert weekend["outcome"] == "needs_date"
    meeting = (await stack.chat(user, "明天下午三点和张三开会")).json()
    assert meeting["outcome"] == "created", meeting
    assert "修汽车轮毂" in meeting["reply"]  # one clause: the pending request was dropped
    assert meeting["command"] is None
    assert [(e["title"], e["start"]) for e in await events(stack, user)] == [
        ("和张三开会", "2026-09-25T15:00:00+08:00")
    ]
    assert await stub_statuses(db, user) == {"修汽车轮毂": "superseded"}
    # The next message, a short reply that would have answered the old stub, answers nothing.
    scripted.clear_requests()
    later = (await stack.chat(user, "周日下午2点")).json()
    assert later["model_calls"] == 1
    assert [e["title"] for e in await events(stack, user)] == ["和张三开会"]


# ---- 3. the fast path takes only what its grammar consumed whole ---------------------------------


async def test_a_sentence_with_a_time_in_it_is_not_merged_into_an_open_conflict(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("评审", tool_calls=[create("评审", "D+1", "16:00")]),
            on_user("和李四开会", tool_calls=[create("和李四开会", "D+1", "16:00")]),
            on_user("删除", text="删除功能马上就来，现在我还不能删除日程。"),
        )
    )
    await stack.chat(user, "明天下午四点评审")
    clash = (await stack.chat(user, "明天下午四点和李四开会")).json()
    assert clash["outcome"] == "conflict"
    before = await count_events(db, user)
    scripted.clear_requests()
    delete = (await stack.chat(user, "删除明天下午四点的会")).json()
    assert delete["model_calls"] == 1  # the model decides, not the reply grammar
    assert "fast_path" not in {c["name"] for c in delete["tool_calls"]}
    assert await count_events(db, user) == before
    # The next bare "好" does not answer the conflict: the last assistant message was not the offer.
    scripted.clear_requests()
    ok = (await stack.chat(user, "好")).json()
    assert ok["model_calls"] == 1
    assert await count_events(db, user) == before
    assert [e["title"] for e in await events(stack, user)] == ["评审"]


async def test_a_bare_yes_inside_the_window_confirms_the_offer_with_zero_model_calls(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(on_user("开了个会", tool_calls=[create("开会", "D-1", "15:00")])))
    held = (await stack.chat(user, "昨天下午三点开了个会")).json()
    assert held["outcome"] == "held"
    scripted.clear_requests()
    yes = (await stack.chat(user, "好的")).json()
    assert yes["outcome"] == "created", yes
    assert yes["model_calls"] == 0 and scripted.requests == []
    assert [(e["title"], e["start"]) for e in await events(stack, user)] == [
        ("开会", "2026-09-23T15:00:00+08:00")
    ]
    # And the next "好" is ordinary chat: there is no offer left to accept.
    again = (await stack.chat(user, "好")).json()
    assert again["model_calls"] == 1
    assert await count_events(db, user) == 1


async def test_a_bare_no_inside_the_window_cancels_the_offer(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(on_user("开了个会", tool_calls=[create("开会", "D-1", "15:00")])))
    await stack.chat(user, "昨天下午三点开了个会")
    no = (await stack.chat(user, "算了")).json()
    assert (no["outcome"], no["model_calls"]) == ("cancelled", 0)
    assert await stub_statuses(db, user) == {"开会": "cancelled"}
    assert await count_events(db, user) == 0


async def test_a_bare_yes_after_the_window_goes_to_the_model(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(on_user("开了个会", tool_calls=[create("开会", "D-1", "15:00")])))
    await stack.chat(user, "昨天下午三点开了个会")
    start = stack.clock.now()
    window = stack.settings.offer_window_minutes
    stack.clock.advance(timedelta(minutes=window + 1))
    try:
        scripted.clear_requests()
        late = (await stack.chat(user, "好")).json()
    finally:
        stack.clock.set(start)
    assert late["model_calls"] == 1
    assert await count_events(db, user) == 0


# ---- 4. claims that generalise, checked against the turn's facts ---------------------------------


@pytest.mark.parametrize(
    "claim",
    [
        "好嘞，帮你记在日历上了",
        "没问题，周五的会议我已经取消了",
        "已删除明天和张三的会",
        "I've rescheduled your meeting to Friday at 3pm.",
        "Your Friday meeting has been cancelled.",
        "You're free all day tomorrow.",
        "明天你有三个会：9点站会、11点客户会、下午3点评审。",
    ],
)
async def test_a_fabricated_change_or_contents_claim_is_replaced(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, claim: str
) -> None:
    scripted.set_script(script(on_user("帮个忙", text=claim)))
    answer = (await stack.chat(user, "帮个忙 please")).json()
    assert answer["outcome"] == "claim_replaced", answer
    assert claim not in answer["reply"]
    assert await count_events(db, user) == 0
    async with db.connect() as conn:
        archived = (
            (
                await conn.execute(
                    text("select content from agent.messages where user_id = :u and role = 'assistant'"),
                    {"u": user},
                )
            )
            .scalars()
            .all()
        )
    assert archived == [answer["reply"]]


async def test_an_honest_capability_description_passes_unchanged(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    honest = "我可以帮你创建日程、查询安排、找空闲时间。"
    scripted.set_script(script(on_user("你能做什么", text=honest)))
    answer = (await stack.chat(user, "你能做什么")).json()
    assert (answer["outcome"], answer["reply"]) == ("answered", honest)


# ---- 5. a second write in one response is refused back to the model and issued next --------------


async def test_two_writes_in_one_response_both_land_one_per_model_step(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            {
                "when": {"last_role": "tool", "tool_result_contains": "one_write_per_response"},
                "respond": {"tool_calls": [create("看牙医", "D+1", "15:00")]},
            },
            on_user("看牙医", tool_calls=[create("开会", "D+1", "10:00"), create("看牙医", "D+1", "15:00")]),
        )
    )
    answer = (await stack.chat(user, "明天上午十点开会，下午三点看牙医")).json()
    assert [c["result"] for c in answer["tool_calls"]] == [
        "created",
        "refused:one_write_per_response",
        "created",
    ]
    assert answer["model_calls"] == 2
    assert "开会" in answer["reply"] and "看牙医" in answer["reply"]
    assert [(e["title"], e["start"]) for e in await events(stack, user)] == [
        ("开会", "2026-09-25T10:00:00+08:00"),
        ("看牙医", "2026-09-25T15:00:00+08:00"),
    ]


# ---- 6. time words that wrote the wrong moment ---------------------------------------------------


async def test_an_hour_without_a_period_is_never_fast_pathed_as_morning(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(on_user("开会", tool_calls=[create("开会", "D+1")])))
    asked = (await stack.chat(user, "明天开会")).json()
    assert asked["outcome"] == "needs_time"
    scripted.clear_requests()
    reply = (await stack.chat(user, "3点一刻")).json()
    assert reply["model_calls"] == 1  # ambiguous: the model reads it, code does not write 03:15
    assert all(not e["start"].endswith("03:15:00+08:00") for e in await events(stack, user))


async def test_an_hour_without_a_period_follows_the_stubs_afternoon(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("评审", tool_calls=[create("评审", "D+1", "15:00")]),
            on_user("和王五", tool_calls=[create("和王五开会", "D+1", "15:00")]),
        )
    )
    await stack.chat(user, "明天下午三点评审")
    assert (await stack.chat(user, "明天下午三点和王五开会")).json()["outcome"] == "conflict"
    moved = (await stack.chat(user, "4点")).json()
    assert (moved["outcome"], moved["model_calls"]) == ("created", 0)
    assert ("和王五开会", "2026-09-25T16:00:00+08:00") in [
        (e["title"], e["start"]) for e in await events(stack, user)
    ]


async def test_da_qian_tian_is_three_days_back_in_the_running_time_service(stack: Stack) -> None:
    assert stack.probe is not None
    parsed = await stack.probe.request(
        wire.TIME_PARSE_REPLY, ParseReplyRequest(text="大前天下午三点"), timeout=5
    )
    assert (parsed.patch.date, parsed.patch.time) == ("D-3", "15:00")


# ---- 7. receipts a person can act on --------------------------------------------------------------


async def test_a_receipt_across_a_dst_change_shows_both_offsets(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(on_user("standup", tool_calls=[create("Standup", "2026-11-01", "01:30")])))
    answer = (await stack.chat(user, "standup on Nov 1 at 1:30am", tz="America/New_York")).json()
    assert answer["outcome"] == "created", answer
    assert "01:30 (UTC-04:00)–01:30 (UTC-05:00)" in answer["reply"]


async def test_a_receipt_for_another_year_names_the_year(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(on_user("年会", tool_calls=[create("年会", "2027-01-08", "15:00")])))
    answer = (await stack.chat(user, "明年1月8号下午三点年会")).json()
    assert answer["outcome"] == "created", answer
    assert "2027年1月8日" in answer["reply"]
    this_year = (await stack.chat(user, "明天下午三点和张三开会")).json()
    assert "2026" not in this_year["reply"]


# ---- contract §11: one client_message_id names one message ---------------------------------------


async def test_a_reused_client_message_id_with_another_message_is_409_and_writes_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("和张三开会", tool_calls=[create("和张三开会", "D+1", "15:00")]),
            on_user("游泳", tool_calls=[create("游泳", "W6+0", "10:00")]),
        )
    )
    first = await stack.chat(user, "明天下午三点和张三开会", client_message_id="m-1")
    assert first.status_code == 200
    reused = await stack.chat(user, "周六上午十点去游泳", client_message_id="m-1")
    assert reused.status_code == 409
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    assert [e["title"] for e in await events(stack, user)] == ["和张三开会"]
    assert [r["title"] for r in await event_rows(db, user)] == ["和张三开会"]


async def test_two_users_whose_ids_and_keys_spell_the_same_pair_both_get_their_turn(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(on_user("开会", tool_calls=[create("开会", "D+1", "15:00")])))
    first = await stack.chat(f"{user}:x", "明天下午三点开会", client_message_id="y")
    second = await stack.chat(user, "明天下午三点开会", client_message_id="x:y")
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.json()["turn_id"] != second.json()["turn_id"]
    assert await count_events(db, f"{user}:x") == 1
    assert await count_events(db, user) == 1
