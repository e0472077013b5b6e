"""The demo script through the real SDK, and the `python -m calagent.scriptedmodel` entry point."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from calagent.contracts.symbols import DATE_SYMBOL_PATTERN, RANGE_SYMBOL_PATTERN, TIME_PATTERN
from calagent.scriptedmodel import DEMO_SENTENCES, ScriptedModelServer, demo_script

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def client() -> Iterator[openai.OpenAI]:
    with (
        ScriptedModelServer() as server,
        openai.OpenAI(base_url=server.base_url, api_key="demo", max_retries=0) as c,
    ):
        yield c


def ask(client: openai.OpenAI, *messages: ChatCompletionMessageParam) -> tuple[str, list[tuple[str, Any]]]:
    """One streamed turn the way the agent asks it; returns the text and the (name, arguments) calls."""
    with client.chat.completions.stream(
        model="qwen-max",
        messages=[{"role": "system", "content": "calendar"}, *messages],
        tool_choice="auto",
        parallel_tool_calls=False,
        stream_options={"include_usage": True},
    ) as stream:
        message = stream.get_final_completion().choices[0].message
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
    return message.content or "", calls


@pytest.mark.parametrize(
    ("sentence", "title"),
    [("明天下午三点和张三开会", "和张三开会"), ("Tomorrow 3pm, meet Zhang San", "Meet Zhang San")],
)
def test_create_sentence(client: openai.OpenAI, sentence: str, title: str) -> None:
    _, calls = ask(client, {"role": "user", "content": sentence})
    assert calls == [
        (
            "prepare_or_create_schedule",
            {"title": title, "date": "D+1", "time": "15:00", "calendar": "工作"},
        )
    ]


@pytest.mark.parametrize("sentence", ["明天下午有什么安排", "What's on tomorrow afternoon"])
def test_query_sentence(client: openai.OpenAI, sentence: str) -> None:
    _, calls = ask(client, {"role": "user", "content": sentence})
    assert calls == [("query_schedule_range", {"start": "D+1T12:00", "end": "D+1T18:00"})]


@pytest.mark.parametrize(
    "sentence", ["昨天下午开了个会，好累", "Had a meeting yesterday afternoon, so tired"]
)
def test_past_remark_touches_nothing(client: openai.OpenAI, sentence: str) -> None:
    text, calls = ask(client, {"role": "user", "content": sentence})
    assert calls == []
    assert text


@pytest.mark.parametrize("sentence", ["这个周末去修汽车轮毂", "Fix the car wheel this weekend"])
def test_weekend_create(client: openai.OpenAI, sentence: str) -> None:
    _, calls = ask(client, {"role": "user", "content": sentence})
    assert len(calls) == 1
    name, arguments = calls[0]
    assert name == "prepare_or_create_schedule"
    assert arguments["date"] == "WE"
    assert "time" not in arguments


def test_memory_cancel_and_tool_result(client: openai.OpenAI) -> None:
    assert ask(client, {"role": "user", "content": "请记住我咖啡不加糖"})[1] == [
        ("save_memory", {"content": "请记住我咖啡不加糖"})
    ]
    assert ask(client, {"role": "user", "content": "算了，不建了"})[1] == [("cancel_schedule_command", {})]
    assert ask(client, {"role": "user", "content": "never mind"})[1] == [("cancel_schedule_command", {})]
    question = "你还记得我喝咖啡的习惯吗"
    _, calls = ask(client, {"role": "user", "content": question})
    assert calls == [("search_memory", {"query": question})]
    text, calls = ask(
        client,
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "search_memory", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "咖啡不加糖"},
    )
    assert calls == []
    assert "咖啡不加糖" in text


def test_default_says_it_is_a_script(client: openai.OpenAI) -> None:
    text, calls = ask(client, {"role": "user", "content": "帮我订一张去上海的机票"})
    assert calls == []
    assert "scripted demo model" in text
    assert "不是真正的大模型" in text
    assert all(zh in text and en in text for zh, en in DEMO_SENTENCES)


def test_demo_arguments_follow_the_symbol_grammar() -> None:
    patterns = {"date": DATE_SYMBOL_PATTERN, "time": TIME_PATTERN}
    patterns |= {"start": RANGE_SYMBOL_PATTERN, "end": RANGE_SYMBOL_PATTERN}
    for rule in demo_script().rules:
        for call in rule.respond.tool_calls or []:
            assert isinstance(call.arguments, dict)
            for key, value in call.arguments.items():
                if key in patterns:
                    assert re.fullmatch(patterns[key], value), (rule.name, key, value)


def _run_module(*args: str) -> subprocess.Popen[str]:
    src = Path(__file__).resolve().parents[1] / "src"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-m", "calagent.scriptedmodel", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.timeout(60)
def test_module_entry_point_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("default:\n  text: from the file\n", encoding="utf-8")
    with _run_module("--script", str(script)) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            match = re.fullmatch(r"scripted model listening (http://127\.0\.0\.1:\d+/v1)", line)
            assert match, line
            with openai.OpenAI(base_url=match.group(1), api_key="t", max_retries=0) as c:
                answer = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            assert answer.choices[0].message.content == "from the file"
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=10)
            assert process.returncode == 0, stderr
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
