"""Tool calls as real models write them: what is repaired, and what is left for the model."""

from __future__ import annotations

import json

import pytest

from calagent.agent.domain.repair import calls_in_text, loads_lenient

pytestmark = pytest.mark.unit

TOOLS = frozenset({"prepare_or_create_schedule", "query_schedule_range"})


def test_valid_json_is_not_a_repair() -> None:
    assert loads_lenient('{"a": 1}') == ({"a": 1}, False)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('{"title": "会", "date": "D+1",}', {"title": "会", "date": "D+1"}),
        ("{'title': '会', 'date': 'D+1'}", {"title": "会", "date": "D+1"}),
        (
            "{'title': 'Bob\\'s \"party\"', 'all_day': True, 'x': None,}",
            {"title": 'Bob\'s "party"', "all_day": True, "x": None},
        ),
        ("{'steps': ['a', 'b',],}", {"steps": ["a", "b"]}),
        ('{"title": "a, }b"}', {"title": "a, }b"}),
    ],
)
def test_almost_json_is_repaired(raw: str, value: dict[str, object]) -> None:
    parsed = loads_lenient(raw)
    assert parsed is not None
    assert parsed[0] == value


@pytest.mark.parametrize("raw", ["{'title': 'unterminated}", "[1, 2]", "title: 会", "{'a': 1} {'b': 2}"])
def test_what_cannot_be_read_without_guessing_is_not_repaired(raw: str) -> None:
    assert loads_lenient(raw) is None


def test_a_tagged_call_in_the_text_is_a_call() -> None:
    text = '好的。\n<tool_call>\n{"name": "prepare_or_create_schedule", "arguments": {"title": "会", "date": "D+1"}}\n</tool_call>'
    calls, rest = calls_in_text(text, TOOLS)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("prepare_or_create_schedule", {"title": "会", "date": "D+1"})
    ]
    assert rest == "好的。"


def test_a_fenced_block_naming_a_tool_is_a_call_with_its_arguments_repaired() -> None:
    text = "```json\n{\"name\": \"query_schedule_range\", \"arguments\": {'start': 'D', 'end': 'D+1',}}\n```"
    calls, rest = calls_in_text(text, TOOLS)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("query_schedule_range", {"start": "D", "end": "D+1"})
    ]
    assert rest == ""


def test_arguments_as_a_json_string_are_read() -> None:
    body = json.dumps({"name": "query_schedule_range", "arguments": json.dumps({"start": "D", "end": "D+1"})})
    calls, _ = calls_in_text(f"<tool_call>{body}</tool_call>", TOOLS)
    assert json.loads(calls[0].arguments) == {"start": "D", "end": "D+1"}


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "delete_everything", "arguments": {}}\n```',  # not an offered tool
        '```json\n{"title": "会", "date": "D+1"}\n```',  # names no tool
        "```python\nprint('hi')\n```",
        "<tool_call>{not json at all</tool_call>",
        "I would call prepare_or_create_schedule for you.",
    ],
)
def test_text_that_is_not_an_unambiguous_call_stays_text(text: str) -> None:
    assert calls_in_text(text, TOOLS) == ([], text)
