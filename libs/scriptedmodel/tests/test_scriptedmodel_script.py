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
