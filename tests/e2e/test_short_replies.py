"""Short replies never drop what the user said (contract §7, §8, §14), through HTTP, with the facts
read back from `GET /v1/events` and the database.

A day named in a reply to a stub that has no candidates (`needs_time`, `conflict`) moves the stub to
that day with zero model calls, the conflict check runs again for the new day, and the receipt
names the day the row says; a day that cannot be placed exactly goes to the model. A reply-quote of
an earlier message is transport: the user's own words under it decide exactly as they would alone,
while a quote or a forward with nothing of the user's own never answers a held stub.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.contracts.display import format_day
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, count_events, on_user, read_events, script

pytestmark = pytest.mark.e2e


def create(title: str, date: str, time: str | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"title": title, "date": date}
    if time is not None:
        arguments["time"] = time
    return {"name": "prepare_or_create_schedule", "arguments": arguments}


async def chat(stack: Stack, user: str, message: str, channel: str = "web") -> dict[str, Any]:
    response = await stack.chat(user, message, channel=channel)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def starts(stack: Stack, user: str) -> list[tuple[str, str]]:
    return [(e["title"], e["start"]) for e in await read_events(stack, user)]


def names_the_day_of(reply: str, start: str, lang: str) -> bool:
    """The receipt names the local day of the row it was rendered from."""
    return format_day(datetime.fromisoformat(start).date(), "zh" if lang == "zh" else "en") in reply


# ---- a day named in a reply to a stub without candidates moves the stub ----------------------------


@pytest.mark.parametrize(
    ("request_text", "title", "symbol", "reply", "lang", "written"),
    [
        pytest.param(
            "call with Ann on friday", "Call with Ann", "W5+0", "Saturday 3pm", "en",
            "2026-09-26T15:00:00+08:00", id="english",
        ),
        pytest.param(
            "明天和老李吃饭", "和老李吃饭", "D+1", "周六晚上七点", "zh",
            "2026-09-26T19:00:00+08:00", id="chinese",
        ),
        pytest.param(
            "明天和老李吃饭", "和老李吃饭", "D+1", "周四晚上七点", "zh",
            "2026-09-24T19:00:00+08:00", id="today-is-the-next-such-day",
        ),
    ],
)  # fmt: skip
async def test_a_day_named_in_the_answer_to_what_time_moves_the_stub_there(
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    request_text: str,
    title: str,
    symbol: str,
    reply: str,
    lang: str,
    written: str,
) -> None:
    scripted.set_script(script(on_user(request_text, tool_calls=[create(title, symbol)])))
    asked = await chat(stack, user, request_text)
    assert asked["outcome"] == "needs_time", asked
    scripted.clear_requests()
    answer = await chat(stack, user, reply)
    assert (answer["outcome"], answer["model_calls"]) == ("created", 0), answer
    assert scripted.requests == []
    assert await starts(stack, user) == [(title, written)]
    assert names_the_day_of(answer["reply"], written, lang), answer["reply"]


async def test_a_conflict_answered_with_another_day_moves_there_and_checks_that_day(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("评审", tool_calls=[create("评审", "D+1", "15:00")]),
            on_user("和李四开会", tool_calls=[create("和李四开会", "D+1", "15:00")]),
        )
    )
    await chat(stack, user, "明天下午三点评审")
    clash = await chat(stack, user, "明天下午三点和李四开会")
    assert clash["outcome"] == "conflict", clash
    answer = await chat(stack, user, "周六下午三点")
    assert (answer["outcome"], answer["model_calls"]) == ("created", 0), answer
    assert await starts(stack, user) == [
        ("评审", "2026-09-25T15:00:00+08:00"),
        ("和李四开会", "2026-09-26T15:00:00+08:00"),
    ]
    assert names_the_day_of(answer["reply"], "2026-09-26T15:00:00+08:00", "zh"), answer["reply"]


async def test_a_conflict_moved_to_a_day_with_its_own_conflict_asks_again_for_that_day(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    scripted.set_script(
        script(
            on_user("评审", tool_calls=[create("评审", "D+1", "15:00")]),
            on_user("游泳", tool_calls=[create("游泳", "W6+0", "15:00")]),
            on_user("和李四开会", tool_calls=[create("和李四开会", "D+1", "15:00")]),
        )
    )
    await chat(stack, user, "明天下午三点评审")
    await chat(stack, user, "周六下午三点游泳")
    assert (await chat(stack, user, "明天下午三点和李四开会"))["outcome"] == "conflict"
    answer = await chat(stack, user, "周六下午三点")
    assert (answer["outcome"], answer["model_calls"]) == ("conflict", 0), answer
    assert answer["command"]["proposed_start"] == "2026-09-26T15:00:00+08:00"
    assert "游泳" in answer["reply"]  # the question is about Saturday's clash, not Friday's
    assert await count_events(db, user) == 2
    # The next, unrelated message leaves the calendar as it is.
    await chat(stack, user, "谢谢")
    assert [t for t, _ in await starts(stack, user)] == ["评审", "游泳"]


async def test_a_weekday_outside_the_weekend_candidates_is_not_dropped(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(on_user("修汽车轮毂", tool_calls=[create("修汽车轮毂", "WE")])))
    asked = await chat(stack, user, "这个周末去修汽车轮毂")
    assert asked["outcome"] == "needs_date", asked
    answer = await chat(stack, user, "周一下午三点")
    assert (answer["outcome"], answer["model_calls"]) == ("created", 0), answer
    assert await starts(stack, user) == [("修汽车轮毂", "2026-09-28T15:00:00+08:00")]
    assert names_the_day_of(answer["reply"], "2026-09-28T15:00:00+08:00", "zh"), answer["reply"]


async def test_a_weekday_for_a_stub_weeks_away_goes_to_the_model(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    """Two weeks out, "周六" could be this Saturday or the one after that day: not code's guess."""
    scripted.set_script(
        script(
            on_user("十月九号开会", tool_calls=[create("开会", "2026-10-09")]),
            on_user("周六下午三点", tool_calls=[create("开会", "2026-10-10", "15:00")]),
        )
    )
    assert (await chat(stack, user, "十月九号开会"))["outcome"] == "needs_time"
    answer = await chat(stack, user, "周六下午三点")
    assert (answer["outcome"], answer["model_calls"]) == ("created", 1), answer
    assert await starts(stack, user) == [("开会", "2026-10-10T15:00:00+08:00")]


# ---- a reply-quote is transport ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "quoted",
    [
        pytest.param("> 这个周末去买菜\n周日下午5点", id="angle-quote"),
        pytest.param("＞ 这个周末去买菜\n\n周日下午5点", id="full-width-quote"),
        pytest.param(
            "On Thu, Sep 24, 2026 at 10:00 AM calagent wrote:\n> 这个周末去买菜\n周日下午5点", id="mail-quote"
        ),
        pytest.param(
            "「calagent：这个周末去买菜」\n- - - - - - - - - - - - - - -\n周日下午5点", id="wechat-quote"
        ),
    ],
)
async def test_a_reply_quote_merges_exactly_as_the_words_alone(
    stack: Stack, scripted: ScriptedModelServer, user: str, quoted: str
) -> None:
    scripted.set_script(script(on_user("买菜", tool_calls=[create("买菜", "WE")])))
    results: list[tuple[str, int, list[tuple[str, str]]]] = []
    for who, message in ((f"{user}-plain", "周日下午5点"), (user, quoted)):
        assert (await chat(stack, who, "这个周末去买菜"))["outcome"] == "needs_date"
        answer = await chat(stack, who, message)
        results.append((answer["outcome"], answer["model_calls"], await starts(stack, who)))
    plain, with_quote = results
    assert with_quote == plain == ("created", 0, [("买菜", "2026-09-27T17:00:00+08:00")])


# ---- quoted or forwarded words never answer a held stub --------------------------------------------


@pytest.mark.parametrize(
    "not_own",
    [
        pytest.param("> 确认", id="quoted-confirm"),
        pytest.param("> 好", id="quoted-ok"),
        pytest.param("＞ 好的", id="full-width-quoted-ok"),
        pytest.param("「王五：确认」\n- - - - - - - - - - - - - - -", id="wechat-quote-only"),
        pytest.param("---------- Forwarded message ---------\nFrom: bob@example.com\n\n确认", id="forward"),
        pytest.param(
            "好\n---------- Forwarded message ---------\nFrom: bob@example.com\n\n确认", id="forward-with-ok"
        ),
    ],
)
async def test_quoted_or_forwarded_words_never_confirm_a_held_stub(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, not_own: str
) -> None:
    scripted.set_script(
        script(
            on_user("开了个会", tool_calls=[create("开会", "D-1", "15:00")]),
            # The worst the model can do with someone else's yes: confirm the held write.
            {
                "when": {"user_regex": "确认|好", "last_role": "user"},
                "respond": {"tool_calls": [call("confirm_command")]},
            },
        )
    )
    held = await chat(stack, user, "昨天下午三点开了个会")
    assert held["outcome"] == "held", held
    answer = await chat(stack, user, not_own)
    assert answer["model_calls"] == 1, answer  # never the timed gate
    assert [c["result"] for c in answer["tool_calls"]] == ["refused:third_party"]
    assert await count_events(db, user) == 0
    # The next, unrelated message leaves the calendar unchanged too.
    thanks = await chat(stack, user, "谢谢")
    assert thanks["outcome"] == "answered", thanks
    assert await count_events(db, user) == 0
    # And the user's own word still does what it says.
    own = await chat(stack, user, "确认")
    assert own["outcome"] == "created", own
    assert await starts(stack, user) == [("开会", "2026-09-23T15:00:00+08:00")]


async def test_the_users_own_yes_under_a_quote_answers_the_offer_as_it_would_alone(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(on_user("开了个会", tool_calls=[create("开会", "D-1", "15:00")])))
    assert (await chat(stack, user, "昨天下午三点开了个会"))["outcome"] == "held"
    answer = await chat(stack, user, "> 昨天下午三点开了个会\n好的")
    assert (answer["outcome"], answer["model_calls"]) == ("created", 0), answer
    assert await starts(stack, user) == [("开会", "2026-09-23T15:00:00+08:00")]


async def test_a_quoted_short_reply_alone_does_not_answer_an_open_stub(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(script(on_user("买菜", tool_calls=[create("买菜", "WE")])))
    assert (await chat(stack, user, "这个周末去买菜"))["outcome"] == "needs_date"
    answer = await chat(stack, user, "> 周日下午5点")
    assert answer["model_calls"] == 1, answer
    assert await read_events(stack, user) == []
    await chat(stack, user, "谢谢")
    assert await read_events(stack, user) == []
