"""Which event, chosen by code (contract §20), through `POST /v1/chat` with a scripted model that
picks the wrong one first: the held change offers every event found for the same words, "确认"
alone runs nothing, the user's "五点那个" picks the right one with no model call, and "确认" then
moves exactly that one. Each step's facts are read back through `GET /v1/events`, and the next,
unrelated message changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script

pytestmark = pytest.mark.e2e

TOMORROW_3PM = "2026-09-25T15:00:00+08:00"
TOMORROW_5PM = "2026-09-25T17:00:00+08:00"


def spans(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((e["title"], e["start"]) for e in found)


async def two_meetings_tomorrow(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> list[dict[str, Any]]:
    for clock, words in (("15:00", "明天下午三点和张三的会"), ("17:00", "明天下午五点和张三的会")):
        scripted.set_script(
            script(
                on_user(
                    words,
                    tool_calls=[
                        call("prepare_or_create_schedule", title="和张三的会", date="D+1", time=clock)
                    ],
                )
            )
        )
        made = (await stack.chat(user, words)).json()
        assert made["outcome"] == "created", made
    found = await read_events(stack, user)
    assert spans(found) == [("和张三的会", TOMORROW_3PM), ("和张三的会", TOMORROW_5PM)]
    return found


def wrong_first(wrong_id: str) -> Any:
    """A model that finds both and picks the one the user did not mean."""
    return script(
        on_user("改到后天", tool_calls=[call("find_events", start="D+1", end="D+2", text="张三")]),
        {
            "when": {"last_role": "tool", "last_tool": "find_events"},
            "respond": {"tool_calls": [call("update_schedule", event_id=wrong_id, date="D+2")]},
        },
        on_user("天气", text="我查不了天气。"),
    )


async def unrelated(stack: Stack, user: str) -> None:
    answer = (await stack.chat(user, "明天天气怎么样")).json()
    assert answer["outcome"] == "answered", answer


async def test_the_wrong_pick_is_asked_about_and_the_users_words_pick_the_right_one_with_no_model(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    found = await two_meetings_tomorrow(stack, scripted, user)
    three = next(e for e in found if e["start"] == TOMORROW_3PM)
    five = next(e for e in found if e["start"] == TOMORROW_5PM)
    before = spans(found)
    scripted.set_script(wrong_first(three["id"]))

    held = (await stack.chat(user, "把明天和张三的会改到后天")).json()
    assert (held["outcome"], held["command"]["hold_reason"]) == ("held", "which_event"), held
    offered = held["command"]["event_candidates"]
    assert [(c["event_id"], c["start"]) for c in offered] == [
        (three["id"], TOMORROW_3PM),  # the model's pick first
        (five["id"], TOMORROW_5PM),
    ]
    assert {c["title"] for c in offered} == {"和张三的会"} and {c["calendar"] for c in offered} == {"工作"}
    assert spans(await read_events(stack, user)) == before

    # "确认" alone runs nothing: the question is asked again, with no model call.
    again = (await stack.chat(user, "确认")).json()
    assert (again["outcome"], again["model_calls"]) == ("held", 0), again
    assert len(again["command"]["event_candidates"]) == 2
    assert spans(await read_events(stack, user)) == before
    await unrelated(stack, user)
    assert spans(await read_events(stack, user)) == before

    # The user names the one they meant: picked by code, no model request at all.
    asked = len(scripted.requests)
    picked = (await stack.chat(user, "五点那个")).json()
    assert (picked["outcome"], picked["model_calls"]) == ("held", 0), picked
    assert len(scripted.requests) == asked
    assert [c["name"] for c in picked["tool_calls"]] == ["merge_stub"]
    command = picked["command"]
    assert command["id"] == held["command"]["id"]
    assert "event_candidates" not in command
    assert (command["change"]["before"]["id"], command["change"]["after"]["start"]) == (
        five["id"],
        "2026-09-26T17:00:00+08:00",
    )
    assert spans(await read_events(stack, user)) == before

    done = (await stack.chat(user, "确认")).json()
    assert (done["outcome"], done["model_calls"]) == ("updated", 0), done
    after = await read_events(stack, user)
    assert spans(after) == [("和张三的会", TOMORROW_3PM), ("和张三的会", "2026-09-26T17:00:00+08:00")]
    assert next(e for e in after if e["start"] == TOMORROW_3PM)["id"] == three["id"]
    await unrelated(stack, user)
    assert spans(await read_events(stack, user)) == spans(after)


async def test_a_reply_naming_neither_asks_again_and_one_meeting_is_not_asked_about(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    found = await two_meetings_tomorrow(stack, scripted, user)
    three = next(e for e in found if e["start"] == TOMORROW_3PM)
    before = spans(found)
    scripted.set_script(wrong_first(three["id"]))
    held = (await stack.chat(user, "把明天和张三的会改到后天")).json()
    assert held["command"]["hold_reason"] == "which_event", held
    # "九点那个" names neither, "第三个" is past the list: asked again, nothing sent, no model.
    for words in ("九点那个", "第三个"):
        again = (await stack.chat(user, words)).json()
        assert (again["outcome"], again["model_calls"], again["tool_calls"]) == ("held", 0, []), again
        assert len(again["command"]["event_candidates"]) == 2
    assert spans(await read_events(stack, user)) == before
    # The page's button sends the ordinal with the card's id.
    picked = (await stack.chat(user, "1", active_command_id=held["command"]["id"])).json()
    assert (picked["model_calls"], picked["command"]["change"]["before"]["id"]) == (0, three["id"]), picked
    cancelled = (await stack.chat(user, "算了")).json()
    assert cancelled["outcome"] == "cancelled"
    await unrelated(stack, user)
    assert spans(await read_events(stack, user)) == before


async def test_one_meeting_found_is_held_for_the_users_word_alone(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "和张三的会",
                tool_calls=[call("prepare_or_create_schedule", title="和张三的会", date="D+1", time="15:00")],
            )
        )
    )
    await stack.chat(user, "明天下午三点和张三的会")
    [meeting] = await read_events(stack, user)
    scripted.set_script(wrong_first(meeting["id"]))
    held = (await stack.chat(user, "把明天和张三的会改到后天")).json()
    assert (held["outcome"], held["command"]["hold_reason"]) == ("held", "change_confirmation"), held
    assert "event_candidates" not in held["command"]
    done = (await stack.chat(user, "确认")).json()
    assert (done["outcome"], done["model_calls"]) == ("updated", 0), done
    await unrelated(stack, user)
    assert spans(await read_events(stack, user)) == [("和张三的会", "2026-09-26T15:00:00+08:00")]
