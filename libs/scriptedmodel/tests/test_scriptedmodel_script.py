"""Rule matching, templates and loading, without a server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from calagent.scriptedmodel.script import Conversation, Match, Response, Script, ToolCallSpec

pytestmark = pytest.mark.unit


def conv(*messages: dict[str, Any], model: str = "m") -> Conversation:
    return Conversation.from_request({"model": model, "messages": list(messages)})


TOOL_CONVERSATION = conv(
    {"role": "system", "content": "You are a calendar assistant. Now: 2026-09-24"},
    {"role": "user", "content": "我喝咖啡加糖吗"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "search_chat_archive", "arguments": "{}"},
            },
            {"id": "call_b", "type": "function", "function": {"name": "search_memory", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_b", "content": "咖啡不加糖"},
)


def test_last_user_and_system_text() -> None:
    c = conv(
        {"role": "system", "content": "rules here"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "second "}, {"type": "text", "text": "part"}]},
    )
    assert c.last_user == "second part"
    assert c.system == "rules here"
    assert c.last_role == "user"
    assert c.last_tool_name is None


def test_last_tool_is_found_through_tool_call_id() -> None:
    assert TOOL_CONVERSATION.last_role == "tool"
    assert TOOL_CONVERSATION.last_tool_name == "search_memory"
    assert Match(last_tool="search_memory").matches(TOOL_CONVERSATION)
    assert not Match(last_tool="search_chat_archive").matches(TOOL_CONVERSATION)
    assert Match(tool_result_contains="不加糖", last_role="tool").matches(TOOL_CONVERSATION)
    assert not Match(tool_result_contains="加奶").matches(TOOL_CONVERSATION)
    assert not Match(last_role="user").matches(TOOL_CONVERSATION)


def test_all_given_conditions_must_hold() -> None:
    c = conv(
        {"role": "system", "content": "Asia/Shanghai"}, {"role": "user", "content": "明天下午三点和张三开会"}
    )
    assert Match().matches(c)
    assert Match(user_contains=["明天", "张三"], system_contains="Shanghai", model="m").matches(c)
    assert not Match(user_contains=["明天", "李四"]).matches(c)
    assert not Match(user_contains="明天", model="other").matches(c)
    assert Match(user_regex=r"下午.点").matches(c)
    assert Match(user_equals=" 明天下午三点和张三开会 ").matches(c)
    assert not Match(user_equals="明天").matches(c)
    assert not Match(system_contains="Tokyo").matches(c)
    assert not Match(tool_result_contains="x").matches(c)


def test_ignore_case() -> None:
    c = conv({"role": "user", "content": "Never Mind"})
    assert not Match(user_contains="never mind").matches(c)
    assert Match(user_contains="never mind", ignore_case=True).matches(c)
    assert Match(user_regex="^never", ignore_case=True).matches(c)


def test_times_limit_then_next_rule() -> None:
    script = Script.model_validate(
        {
            "rules": [
                {"name": "once", "when": {"user_contains": "hi"}, "respond": {"text": "first"}, "times": 1},
                {"name": "always", "when": {"user_contains": "hi"}, "respond": {"text": "later"}},
            ],
            "default": {"text": "default"},
        }
    )
    c = conv({"role": "user", "content": "hi"})
    assert script.select(c, {}) == (0, script.rules[0].respond)
    assert script.select(c, {0: 1}) == (1, script.rules[1].respond)
    assert script.select(conv({"role": "user", "content": "bye"}), {})[0] is None


def test_template_substitution_in_tool_arguments() -> None:
    c = conv({"role": "user", "content": '请记住我咖啡"不加糖"'})
    spec = ToolCallSpec(name="save_memory", arguments={"content": "{{user}}", "nested": ["<{{user}}>", 3]})
    decoded = json.loads(spec.render_arguments(c))
    assert decoded == {"content": '请记住我咖啡"不加糖"', "nested": ['<请记住我咖啡"不加糖">', 3]}
    raw = ToolCallSpec(name="x", arguments='{"broken": ')
    assert raw.render_arguments(c) == '{"broken": '


FOUND = {
    "events": [
        {"id": "ev_1", "title": "周会", "start": "2026-09-28T10:00:00+08:00", "series_id": "s_1"},
        {"id": "ev_2", "title": "周会", "start": "2026-10-05T10:00:00+08:00", "all_day": False},
    ],
    "count": 2,
    "note": None,
}


def after_find(content: str) -> Conversation:
    return conv(
        {"role": "user", "content": "把下周的周会改到十一点"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "find_events", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": content},
    )


def test_tool_result_path_picks_keys_and_indexes() -> None:
    c = after_find(json.dumps(FOUND, ensure_ascii=False))
    assert c.substitute("{{tool_result.events.0.id}}") == "ev_1"
    assert c.substitute("{{tool_result.events.1.id}}") == "ev_2"
    assert c.substitute("{{tool_result.events.-1.title}}") == "周会"
    assert c.substitute("{{tool_result.events.0.series_id}}/{{tool}}") == "s_1/find_events"
    # Non-strings render as compact JSON.
    assert c.substitute("{{tool_result.count}}") == "2"
    assert c.substitute("{{tool_result.events.1.all_day}}") == "false"
    assert json.loads(c.substitute("{{tool_result.events.0}}"))["id"] == "ev_1"
    # The whole result is still `{{tool_result}}`.
    assert json.loads(c.substitute("{{tool_result}}")) == FOUND


@pytest.mark.parametrize(
    "path",
    [
        "events.2.id",  # index out of range
        "events.-3.id",
        "events.0.series",  # missing key
        "events.1.series_id",  # present on another event only
        "events.x.id",  # a key into a list
        "count.0",  # into a scalar
        "note",  # null
        "",  # no path at all
        "events..id",
    ],
)
def test_a_missing_path_renders_empty(path: str) -> None:
    c = after_find(json.dumps(FOUND))
    assert c.substitute("<{{tool_result." + path + "}}>") == "<>"


def test_tool_result_path_without_a_json_tool_result_renders_empty() -> None:
    assert after_find("not json").substitute("{{tool_result.events.0.id}}") == ""
    # The last message is the user's: there is no tool result to read.
    assert (
        conv({"role": "user", "content": '{"events": [{"id": "x"}]}'}).substitute(
            "{{tool_result.events.0.id}}"
        )
        == ""
    )


def test_tool_result_path_in_dict_arguments_and_text() -> None:
    c = after_find(json.dumps(FOUND))
    spec = ToolCallSpec(
        name="update_schedule",
        arguments={"event_id": "{{tool_result.events.1.id}}", "scope": "this", "time": "11:00", "n": 1},
    )
    assert json.loads(spec.render_arguments(c)) == {
        "event_id": "ev_2",
        "scope": "this",
        "time": "11:00",
        "n": 1,
    }
    missing = ToolCallSpec(name="delete_schedule", arguments={"event_id": "{{tool_result.events.5.id}}"})
    assert json.loads(missing.render_arguments(c)) == {"event_id": ""}
    # A string argument is verbatim: no templates there.
    raw = ToolCallSpec(name="x", arguments='{"event_id": "{{tool_result.events.0.id}}"}')
    assert raw.render_arguments(c) == '{"event_id": "{{tool_result.events.0.id}}"}'


def test_substitution_is_one_pass_and_leaves_unknown_templates() -> None:
    # A user message or tool result that itself looks like a template is inserted as text.
    c = conv({"role": "user", "content": "{{tool}} {{tool_result.a}}"})
    assert c.substitute("[{{user}}]") == "[{{tool}} {{tool_result.a}}]"
    tool = after_find(json.dumps({"a": "{{user}}"}))
    assert tool.substitute("{{tool_result.a}}") == "{{user}}"
    assert tool.substitute("{{unknown}} {{user.x}} {{tool.x}}") == "{{unknown}} {{user.x}} {{tool.x}}"


def test_a_two_step_script_moves_the_event_found() -> None:
    """The eval's shape: step one finds, step two updates with the id found (rules `times: 1`)."""
    script = Script.model_validate(
        {
            "rules": [
                {
                    "respond": {
                        "tool_calls": [{"name": "find_events", "arguments": {"start": "D+1", "end": "D+2"}}]
                    },
                    "times": 1,
                },
                {
                    "respond": {
                        "tool_calls": [
                            {
                                "name": "update_schedule",
                                "arguments": {"event_id": "{{tool_result.events.0.id}}", "date": "D+2"},
                            }
                        ]
                    },
                    "times": 1,
                },
            ]
        }
    )
    first = conv({"role": "user", "content": "把明天和张三的会改到后天"})
    index, response = script.select(first, {})
    assert index == 0
    second = after_find(json.dumps(FOUND))
    index, response = script.select(second, {0: 1})
    assert index == 1 and response.tool_calls is not None
    assert json.loads(response.tool_calls[0].render_arguments(second)) == {"event_id": "ev_1", "date": "D+2"}


def test_response_must_say_something() -> None:
    with pytest.raises(ValidationError):
        Response()
    with pytest.raises(ValidationError):
        Response.model_validate({"text": "a", "error": {"status": 500, "message": "x"}})
    with pytest.raises(ValidationError):
        Script.model_validate({"rules": [{"when": {"user_contain": "typo"}, "respond": {"text": "x"}}]})
    with pytest.raises(ValidationError):
        Match(user_regex="(")


YAML_SCRIPT = """
rules:
  - name: create
    when: {user_contains: ["明天", "开会"], last_role: user}
    respond:
      tool_calls:
        - name: prepare_or_create_schedule
          arguments: {title: 和张三开会, date: D+1, time: "15:00"}
  - name: broken
    when: {user_equals: broken}
    respond:
      tool_calls: [{name: save_memory, arguments: '{"content": '}]
    times: 2
  - name: boom
    when: {user_regex: "^boom"}
    respond: {error: {status: 500, message: kaboom}}
default:
  text: "You said: {{user}}"
"""


def test_from_yaml_text_and_file(tmp_path: Path) -> None:
    script = Script.from_yaml(YAML_SCRIPT)
    assert [r.name for r in script.rules] == ["create", "broken", "boom"]
    first = script.rules[0].respond.tool_calls
    assert first is not None
    assert first[0].arguments == {"title": "和张三开会", "date": "D+1", "time": "15:00"}
    assert script.rules[1].times == 2
    error = script.rules[2].respond.error
    assert error is not None
    assert error.body()["error"]["type"] == "server_error"

    path = tmp_path / "script.yaml"
    path.write_text(YAML_SCRIPT, encoding="utf-8")
    assert Script.from_yaml(path) == script
    assert Script.from_yaml(str(path)) == script
    assert Script.from_file(path) == script
    json_path = tmp_path / "script.json"
    json_path.write_text(script.model_dump_json(), encoding="utf-8")
    assert Script.from_file(json_path) == script


def test_read_contains_looks_at_every_message_whatever_its_role() -> None:
    assert Match(read_contains="不加糖").matches(TOOL_CONVERSATION)
    assert Match(read_contains=["calendar assistant", "加糖吗"]).matches(TOOL_CONVERSATION)
    assert not Match(read_contains="加奶").matches(TOOL_CONVERSATION)
    assert not Match(user_contains="不加糖").matches(TOOL_CONVERSATION)
