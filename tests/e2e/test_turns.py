"""One turn end to end: HTTP → gateway → JetStream → agent → scripted model (real HTTP, real SDK)
→ commands → timeparse → PostgreSQL, with every invariant of architecture.md asserted as facts."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.asyncapi import document
from calagent.cli.stack import Stack
from calagent.contracts import subjects
from calagent.contracts.turns import TurnEvent, turn_key
from calagent.runtime.streams import STREAM_CONFIGS
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, count_events, event_rows, on_user, script

pytestmark = pytest.mark.e2e


CREATE_ZHANG = on_user(
    "和张三开会",
    tool_calls=[
        call("prepare_or_create_schedule", title="和张三开会", date="D+1", time="15:00", calendar="工作")
    ],
)


async def test_create_takes_one_model_call_and_writes_one_row(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(CREATE_ZHANG))
    scripted.clear_requests()
    response = await stack.chat(user, "明天下午三点和张三开会")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["outcome"] == "created"
    assert answer["intent"] == "schedule.create"
    assert answer["model_calls"] == 1
    assert len(scripted.requests) == 1
    rows = await event_rows(db, user)
    assert len(rows) == 1
    assert rows[0]["title"] == "和张三开会"
    start = rows[0]["start_at"]
    assert isinstance(start, datetime)
    assert start.isoformat().startswith("2026-09-25T07:00:00")  # 15:00 in Asia/Shanghai
    assert answer["events"][0]["start"].startswith("2026-09-25T15:00:00+08:00")
    # Receipts carry the weekday; the zone only when it is not the user's own (contract §18).
    assert "周五" in answer["reply"] and "Asia/Shanghai" not in answer["reply"]
    # The model saw the tools without any identity field, and the prompt carried the weekday.
    request = scripted.requests[0]
    for tool in request.tools:
        properties = tool["function"]["parameters"]["properties"]
        assert not {"user", "user_id", "email", "userId"} & set(properties)
    assert request.parallel_tool_calls is False
    system = request.messages[0]["content"]
    assert "周四" in system and "Asia/Shanghai" in system and "工作" in system


async def test_query_reads_and_writes_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            CREATE_ZHANG,
            on_user(
                "有什么安排", tool_calls=[call("query_schedule_range", start="D+1T12:00", end="D+1T18:00")]
            ),
        )
    )
    await stack.chat(user, "明天下午三点和张三开会")
    answer = (await stack.chat(user, "明天下午有什么安排")).json()
    assert answer["outcome"] == "queried"
    assert answer["intent"] == "schedule.query_range"
    assert [e["title"] for e in answer["events"]] == ["和张三开会"]
    assert await count_events(db, user) == 1


async def test_chit_chat_about_the_past_touches_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(on_user("好累", text="辛苦了，好好休息一下吧。")))
    answer = (await stack.chat(user, "昨天下午开了个会，好累")).json()
    assert answer["outcome"] == "answered"
    assert answer["intent"] == "general.chat"
    assert answer["tool_calls"] == []
    assert await count_events(db, user) == 0


WEEKEND = on_user(
    "修汽车轮毂", tool_calls=[call("prepare_or_create_schedule", title="修汽车轮毂", date="WE")]
)


async def test_weekend_clarification_is_merged_by_code_with_zero_model_calls(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(WEEKEND))
    first = (await stack.chat(user, "这个周末去修汽车轮毂")).json()
    assert first["outcome"] == "needs_date"
    assert first["command"]["status"] == "needs_date"
    assert first["command"]["candidates"] == ["2026-09-26", "2026-09-27"]
    assert await count_events(db, user) == 0
    active = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert active["id"] == first["command"]["id"]

    scripted.clear_requests()
    second = (await stack.chat(user, "周日下午2点", active_command_id=first["command"]["id"])).json()
    assert second["outcome"] == "created"
    assert second["model_calls"] == 0
    assert second["intent"] == "schedule.clarification_reply"
    assert scripted.requests == []
    rows = await event_rows(db, user)
    assert len(rows) == 1 and rows[0]["title"] == "修汽车轮毂"
    assert second["events"][0]["start"].startswith("2026-09-27T14:00:00+08:00")
    assert second["command"] is None
    assert (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json() is None


async def test_conflict_then_override_needs_both_facts(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "休假",
                tool_calls=[call("prepare_or_create_schedule", title="休假", date="D+5", all_day=True)],
            ),
            on_user(
                "体育公园",
                tool_calls=[call("prepare_or_create_schedule", title="去体育公园", date="D+5", time="09:00")],
            ),
            on_user(
                "直接创建",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="去体育公园",
                        date="D+5",
                        time="09:00",
                        allow_conflict=True,
                    )
                ],
            ),
        )
    )
    assert (await stack.chat(user, "9月29日全天休假")).json()["outcome"] == "created"
    conflict = (await stack.chat(user, "9月29日去体育公园")).json()
    assert conflict["outcome"] == "conflict"
    assert "休假" in conflict["reply"]
    assert await count_events(db, user) == 1
    override = (await stack.chat(user, "不用换，直接创建")).json()
    assert override["outcome"] == "created", override
    assert await count_events(db, user) == 2


async def test_first_round_allow_conflict_does_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            CREATE_ZHANG,
            on_user(
                "和李四",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="和李四吃饭",
                        date="D+1",
                        time="15:00",
                        allow_conflict=True,
                    )
                ],
            ),
        )
    )
    await stack.chat(user, "明天下午三点和张三开会")
    answer = (await stack.chat(user, "明天下午三点和李四吃饭")).json()
    assert answer["outcome"] == "conflict"
    assert await count_events(db, user) == 1


async def test_fabricated_create_claim_is_replaced_and_recorded(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    claim = "已创建日程「修汽车轮毂」，时间为北京时间周六下午两点。"
    scripted.set_script(script(on_user("轮毂", text=claim)))
    answer = (await stack.chat(user, "周六下午修轮毂")).json()
    assert answer["outcome"] == "claim_replaced"
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
    assert archived == [answer["reply"]]  # replaced, never appended
    record = await wait_for_record(db, answer["turn_id"])
    assert "unverified_create_claim" in record["flags"]


async def test_fabricated_read_claim_is_replaced(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(on_user("忙吗", text="你明天没有任何安排，很空闲。")))
    answer = (await stack.chat(user, "我明天忙吗")).json()
    assert answer["outcome"] == "claim_replaced"
    record = await wait_for_record(db, answer["turn_id"])
    assert "unverified_read_claim" in record["flags"]


async def test_past_time_create_is_held_then_confirmed(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "开了个会",
                tool_calls=[call("prepare_or_create_schedule", title="开会", date="D-1", time="15:00")],
            ),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    held = (await stack.chat(user, "昨天下午三点开了个会")).json()
    assert held["outcome"] == "held"
    assert held["command"]["status"] == "held"
    assert await count_events(db, user) == 0
    confirmed = (await stack.chat(user, "确认，记下来")).json()
    assert confirmed["outcome"] == "created", confirmed
    assert await count_events(db, user) == 1


async def test_forwarded_content_is_held_not_written(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "评审会",
                tool_calls=[call("prepare_or_create_schedule", title="评审会", date="D+1", time="10:00")],
            )
        )
    )
    message = "帮我看看\n---------- Forwarded message ---------\nFrom: boss@example.com\n明天上午10点评审会，请准时参加"
    answer = (await stack.chat(user, message, channel="email")).json()
    assert answer["outcome"] == "held", answer
    assert await count_events(db, user) == 0


async def test_invalid_symbol_goes_back_to_the_model(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            {
                "when": {"last_role": "tool", "tool_result_contains": "error"},
                "respond": {
                    "tool_calls": [call("prepare_or_create_schedule", title="看牙", date="D+1", time="09:00")]
                },
            },
            on_user(
                "看牙", tool_calls=[call("prepare_or_create_schedule", title="看牙", date="天", time="09:00")]
            ),
        )
    )
    scripted.clear_requests()
    answer = (await stack.chat(user, "明天上午九点看牙")).json()
    assert answer["outcome"] == "created", answer
    assert answer["model_calls"] == 2
    assert [c["result"] for c in answer["tool_calls"]] == ["error:invalid_arguments", "created"]
    tool_messages = [m for m in scripted.requests[1].messages if m["role"] == "tool"]
    assert "error" in tool_messages[0]["content"]
    assert await count_events(db, user) == 1


async def test_repeated_invalid_symbols_end_by_asking_the_user(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    # Not a symbol, and no date the time service can read either (a natural date with one reading,
    # like "next wed", would be repaired).
    bad = [call("prepare_or_create_schedule", title="看牙", date="sometime soon")]
    scripted.set_script(
        script(
            {"when": {"last_role": "tool"}, "respond": {"tool_calls": bad}},
            on_user("看牙", tool_calls=bad),
        )
    )
    answer = (await stack.chat(user, "下周三看牙")).json()
    assert answer["outcome"] == "rejected"
    assert answer["model_calls"] == 3
    assert await count_events(db, user) == 0


async def test_cancel_ends_the_stub(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(WEEKEND, on_user("不建了", tool_calls=[call("cancel_schedule_command")])))
    first = (await stack.chat(user, "这个周末去修汽车轮毂")).json()
    answer = (await stack.chat(user, "算了，不建了")).json()
    assert answer["outcome"] == "cancelled"
    assert answer["command"] is None
    async with db.connect() as conn:
        status = await conn.scalar(
            text("select status from commands.stubs where id = :i"), {"i": first["command"]["id"]}
        )
    assert status == "cancelled"


async def test_memory_search_feeds_a_create(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("请记住", tool_calls=[call("save_memory", content="妈妈的生日是10月3日")]),
            on_user("妈妈生日", tool_calls=[call("search_memory", query="妈妈生日")]),
            {
                "when": {
                    "last_role": "tool",
                    "last_tool": "search_memory",
                    "tool_result_contains": "10月3日",
                },
                "respond": {
                    "tool_calls": [
                        call(
                            "prepare_or_create_schedule",
                            title="请妈妈吃饭",
                            date="--10-03",
                            time="18:00",
                            calendar="家庭",
                        )
                    ]
                },
            },
        )
    )
    saved = (await stack.chat(user, "请记住妈妈的生日是10月3日")).json()
    assert saved["outcome"] == "memory_saved"
    scripted.clear_requests()
    answer = (await stack.chat(user, "妈妈生日那天晚上六点请她吃饭")).json()
    assert answer["outcome"] == "created", answer
    assert answer["model_calls"] == 2
    assert [c["name"] for c in answer["tool_calls"]] == ["search_memory", "prepare_or_create_schedule"]
    rows = await event_rows(db, user)
    assert rows[0]["calendar"] == "家庭"
    assert answer["events"][0]["start"].startswith("2026-10-03T18:00:00+08:00")


async def test_two_users_are_isolated(stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine) -> None:
    scripted.set_script(
        script(
            CREATE_ZHANG,
            on_user("有什么安排", tool_calls=[call("query_schedule_range", start="D", end="D+7")]),
        )
    )
    await stack.chat("iso-a", "明天下午三点和张三开会")
    answer = (await stack.chat("iso-b", "这周有什么安排")).json()
    assert answer["events"] == []
    listed = await stack.client.get(
        "/v1/events",
        params={"start": "2026-09-20T00:00:00+08:00", "end": "2026-10-01T00:00:00+08:00"},
        headers=stack.headers("iso-b"),
    )
    assert listed.json()["events"] == []
    mine = await stack.client.get(
        "/v1/events",
        params={"start": "2026-09-20T00:00:00+08:00", "end": "2026-10-01T00:00:00+08:00"},
        headers=stack.headers("iso-a"),
    )
    assert [e["title"] for e in mine.json()["events"]] == ["和张三开会"]


async def test_client_retries_are_idempotent(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(CREATE_ZHANG))
    scripted.clear_requests()
    first = (await stack.chat(user, "明天下午三点和张三开会", client_message_id="m-1")).json()
    again = (await stack.chat(user, "明天下午三点和张三开会", client_message_id="m-1")).json()
    assert again == first
    concurrent = await asyncio.gather(
        *[stack.chat(user, "明天下午三点和张三开会", client_message_id="m-2") for _ in range(5)]
    )
    bodies = [r.json() for r in concurrent]
    assert all(b == bodies[0] for b in bodies)
    assert len(scripted.requests) == 2  # one model call per distinct client message
    # m-2 met the event m-1 created: a conflict stub, not a second row.
    assert await count_events(db, user) == 1


async def test_a_keyed_turn_has_one_key_from_the_request_to_the_database(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    """The key derived once from (user, client_message_id) is the turn's id, the agent's claim and
    the prefix of the write's idempotency key in commands: no layer keys the turn by anything else."""
    scripted.set_script(script(CREATE_ZHANG))
    answer = (await stack.chat(user, "明天下午三点和张三开会", client_message_id="one-key")).json()
    key = turn_key(user, "one-key")
    assert answer["turn_id"] == key
    async with db.connect() as conn:
        claims = (
            (await conn.execute(text("SELECT turn_key FROM agent.turns WHERE user_id = :u"), {"u": user}))
            .scalars()
            .all()
        )
        writes = (
            (await conn.execute(text("SELECT key FROM commands.idempotency WHERE user_id = :u"), {"u": user}))
            .scalars()
            .all()
        )
    assert list(claims) == [key]
    assert writes and all(k.startswith(f"{key}:") for k in writes)


async def test_second_write_in_one_response_is_refused(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "两个会",
                tool_calls=[
                    call("prepare_or_create_schedule", title="会一", date="D+1", time="09:00"),
                    call("prepare_or_create_schedule", title="会二", date="D+1", time="11:00"),
                ],
            )
        )
    )
    answer = (await stack.chat(user, "明天两个会，九点和十一点")).json()
    # The second write is not executed; the model is told why and may issue it next (it does not
    # here), and the reply still names the write that happened.
    assert [c["result"] for c in answer["tool_calls"]] == ["created", "refused:one_write_per_response"]
    assert answer["model_calls"] == 2
    assert "会一" in answer["reply"]
    assert [r["title"] for r in await event_rows(db, user)] == ["会一"]


async def test_envelopes_do_not_change_the_decision(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(WEEKEND))
    await stack.chat(user, "这个周末去修汽车轮毂", channel="telegram")
    scripted.clear_requests()
    wrapped = (
        '<untrusted_channel_message channel="telegram" from="@me">\n周日下午2点\n</untrusted_channel_message>'
    )
    answer = (await stack.chat(user, wrapped, channel="telegram")).json()
    assert answer["outcome"] == "created", answer
    assert answer["model_calls"] == 0
    assert scripted.requests == []


async def test_model_down_says_so_and_writes_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(CREATE_ZHANG))
    scripted.down()
    try:
        answer = (await stack.chat(user, "明天下午三点和张三开会")).json()
    finally:
        scripted.up()
    assert answer["outcome"] == "model_unavailable"
    assert answer["tool_calls"] == []
    assert await count_events(db, user) == 0


async def test_bad_input_is_refused_with_a_message(stack: Stack, user: str) -> None:
    empty = await stack.client.post("/v1/chat", json={"message": "   "}, headers=stack.headers(user))
    assert empty.status_code == 422
    long = await stack.client.post("/v1/chat", json={"message": "x" * 4001}, headers=stack.headers(user))
    assert long.status_code == 422
    not_json = await stack.client.post(
        "/v1/chat", content=b"{nope", headers={**stack.headers(user), "Content-Type": "application/json"}
    )
    assert not_json.status_code == 422
    unauthenticated = await stack.client.post("/v1/chat", json={"message": "hi"})
    assert unauthenticated.status_code == 401
    forged = await stack.client.post(
        "/v1/chat", json={"message": "hi"}, headers={"Authorization": "Bearer not.a.token"}
    )
    assert forged.status_code == 401


async def test_healthz_names_all_five(stack: Stack) -> None:
    health = await stack.client.get("/healthz")
    assert health.status_code == 200
    assert set(health.json()["services"]) == {"gateway", "agent", "commands", "timeparse", "evalrec"}


async def test_timeline_has_the_segments(
    stack: Stack, scripted: ScriptedModelServer, user: str, db: AsyncEngine
) -> None:
    scripted.set_script(script(CREATE_ZHANG))
    answer = (await stack.chat(user, "明天下午三点和张三开会")).json()
    await wait_for_record(db, answer["turn_id"])
    timeline = await stack.client.get(f"/v1/turns/{answer['turn_id']}/timeline", headers=stack.headers(user))
    assert timeline.status_code == 200
    found = timeline.json()
    segments = found["segments"]
    names = [s["name"] for s in segments]
    # It starts where the user's wait did, at the gateway's receipt, and the total counts from there:
    # the agent's record carries the gateway's receive segment, no second record is needed.
    assert names[0] == "gateway.receive" and segments[0]["start_ms"] == 0
    bus_wait = segments[names.index("bus.wait")]
    assert bus_wait["start_ms"] == pytest.approx(segments[0]["ms"], abs=0.01)
    assert found["total_ms"] >= max(s["start_ms"] + s["ms"] for s in segments)
    for expected in (
        "bus.wait",
        "context.build",
        "model.request",
        "model.ttft",
        "tool.prepare_or_create_schedule",
    ):
        assert expected in names
    other = await stack.client.get(
        f"/v1/turns/{answer['turn_id']}/timeline", headers=stack.headers("someone-else")
    )
    assert other.status_code == 404


async def wait_for_record(db: AsyncEngine, turn_id: str) -> dict[str, Any]:
    for _ in range(100):
        async with db.connect() as conn:
            row = (
                await conn.execute(text("select * from evalrec.turns where turn_id = :t"), {"t": turn_id})
            ).first()
        if row is not None:
            record = dict(row._mapping)
            flags = record.get("flags")
            if isinstance(flags, str):
                record["flags"] = json.loads(flags)
            return record
        await asyncio.sleep(0.05)
    raise AssertionError(f"no eval record for turn {turn_id}")


async def test_a_turn_nobody_streams_sends_only_its_answer(
    stack: Stack, scripted: ScriptedModelServer, user: str, nats_url: str
) -> None:
    scripted.set_script(script(CREATE_ZHANG))
    seen: list[TurnEvent] = []

    async def on_event(msg: Msg) -> None:
        seen.append(TurnEvent.model_validate_json(msg.data))

    listener = await nats.connect(nats_url)
    try:
        await listener.subscribe(f"{subjects.TURN_EVENTS_PREFIX}.>", cb=on_event)
        await listener.flush()
        answer = (await stack.chat(user, "明天下午三点和张三开会")).json()
        # The turn started and called a tool: progress a streaming client would have been sent.
        assert answer["outcome"] == "created" and answer["tool_calls"]
        # One publisher, one subscriber: whatever came before `turn.done` has arrived with it.
        for _ in range(100):
            if any(e.turn_id == answer["turn_id"] and e.type == "turn.done" for e in seen):
                break
            await asyncio.sleep(0.02)
    finally:
        await listener.close()
    assert [e.type for e in seen if e.turn_id == answer["turn_id"]] == ["turn.done"]


def test_no_second_record_of_a_turn_travels() -> None:
    """The gateway's share of a turn rides in the agent's record; nothing else goes to evalrec."""
    records = next(c for c in STREAM_CONFIGS if c.name == subjects.RECORDS_STREAM)
    assert records.subjects == [subjects.TURN_RECORDED]
    assert "calagent.turn.delivered" not in json.dumps(document())


async def test_sse_streams_the_turn_events_in_order(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(CREATE_ZHANG))
    headers = {**stack.headers(user), "Accept": "text/event-stream"}
    async with stack.client.stream(
        "POST", "/v1/chat", json={"message": "明天下午三点和张三开会"}, headers=headers
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        body = (await response.aread()).decode()
    names = [line.split(":", 1)[1].strip() for line in body.splitlines() if line.startswith("event:")]
    assert names[0] == "turn.started"
    assert "tool.called" in names
    assert names[-1] == "turn.done"
    done = json.loads(
        next(line.split(":", 1)[1] for line in reversed(body.splitlines()) if line.startswith("data:"))
    )
    assert done["outcome"] == "created"


async def test_archive_search_reaches_older_conversation(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("装修", text="好的，记下了你们在讨论装修预算。"),
            on_user("上次", tool_calls=[call("search_chat_archive", query="装修预算")]),
            {
                "when": {
                    "last_role": "tool",
                    "last_tool": "search_chat_archive",
                    "tool_result_contains": "装修",
                },
                "respond": {"text": "上次你提到装修预算是十万。"},
            },
        )
    )
    await stack.chat(user, "我们在讨论装修预算，大概十万")
    scripted.clear_requests()
    answer = (await stack.chat(user, "上次我们聊的那个是多少来着")).json()
    assert answer["intent"] == "archive.search"
    assert answer["model_calls"] == 2
    tool_message = next(m for m in scripted.requests[1].messages if m["role"] == "tool")
    assert "装修预算" in tool_message["content"]
    assert await count_events(db, user) == 0


async def test_an_older_session_stays_out_of_the_prompt(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(on_user("你好", text="你好！")))
    start = stack.clock.now()
    try:
        await stack.chat(user, "你好，明天去开会的事先放一放")
        stack.clock.advance(timedelta(minutes=stack.settings.session_gap_minutes + 1))
        scripted.clear_requests()
        await stack.chat(user, "你好")
    finally:
        stack.clock.set(start)
    messages = scripted.requests[0].messages
    assert all("明天去开会" not in str(m.get("content")) for m in messages)
    assert "search_chat_archive" in messages[0]["content"]  # the one-line marker for older history
    assert [m["role"] for m in messages] == ["system", "user"]


async def test_an_expired_stub_is_never_merged(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(script(WEEKEND))
    start = stack.clock.now()
    try:
        first = (await stack.chat(user, "这个周末去修汽车轮毂")).json()
        stack.clock.advance(timedelta(minutes=stack.settings.stub_ttl_minutes + 1))
        scripted.clear_requests()
        answer = (await stack.chat(user, "周日下午2点", active_command_id=first["command"]["id"])).json()
    finally:
        stack.clock.set(start)
    assert answer["outcome"] != "created"
    assert answer["model_calls"] == 1  # no fast path: the stub it answered is gone
    assert await count_events(db, user) == 0
