"""The server over real HTTP, through the real openai SDK, the way the agent uses it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)

from calagent.scriptedmodel import Script, ScriptedModelServer

pytestmark = pytest.mark.unit

TOOLS: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "prepare_or_create_schedule",
            "parameters": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "date": {"type": "string"}},
                "required": ["title", "date"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_memory",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    },
]

CREATE_ARGS = {"title": "和张三开会", "date": "D+1", "time": "15:00", "calendar": "工作"}

SCRIPT = Script.model_validate(
    {
        "rules": [
            {
                "name": "after_memory",
                "when": {"last_role": "tool", "last_tool": "search_memory", "tool_result_contains": "不加糖"},
                "respond": {"text": "你的咖啡不加糖。"},
            },
            {
                "name": "after_other_tool",
                "when": {"last_role": "tool"},
                "respond": {"text": "some other tool answered"},
            },
            {
                "name": "create",
                "when": {"user_contains": ["明天", "张三"], "last_role": "user"},
                "respond": {
                    "tool_calls": [{"name": "prepare_or_create_schedule", "arguments": CREATE_ARGS}],
                    "chunk_chars": 3,
                },
            },
            {
                "name": "two_writes",
                "when": {"user_equals": "two"},
                "respond": {
                    "text": "Creating both.",
                    "tool_calls": [
                        {"name": "prepare_or_create_schedule", "arguments": {"title": "A", "date": "D+1"}},
                        {"name": "prepare_or_create_schedule", "arguments": {"title": "B", "date": "D+2"}},
                    ],
                },
            },
            {
                "name": "malformed",
                "when": {"user_equals": "malformed"},
                "respond": {"tool_calls": [{"name": "search_memory", "arguments": '{"query": "co'}]},
            },
            {"name": "boom", "when": {"user_equals": "boom"}, "respond": {"error": {"status": 500}}},
            {
                "name": "limited",
                "when": {"user_equals": "limited"},
                "respond": {"error": {"status": 429, "message": "slow down", "code": "rate_limit_exceeded"}},
            },
            {"name": "slow", "when": {"user_equals": "slow"}, "respond": {"text": "late", "delay_ms": 300}},
            {
                "name": "trickle",
                "when": {"user_equals": "trickle"},
                "respond": {"text": "abcdefgh", "chunk_chars": 2, "ttft_ms": 150, "inter_chunk_ms": 50},
            },
            {"name": "hangup", "when": {"user_equals": "hangup"}, "respond": {"drop_connection": True}},
            {
                "name": "cut",
                "when": {"user_equals": "cut"},
                "respond": {"text": "abcdefgh", "chunk_chars": 2, "drop_after_chunks": 2},
            },
            {"name": "once", "when": {"user_equals": "once"}, "respond": {"text": "first time"}, "times": 1},
            {"name": "echo", "when": {"user_regex": "^echo "}, "respond": {"text": "you said <{{user}}>"}},
            {"name": "model_b", "when": {"model": "model-b"}, "respond": {"text": "I am model b"}},
        ],
        "default": {"text": "Hello from the script, streamed in pieces.", "chunk_chars": 5},
    }
)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(SCRIPT) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: ScriptedModelServer) -> None:
    server.up()
    server.set_script(SCRIPT)
    server.clear_requests()


@pytest.fixture
def client(server: ScriptedModelServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=10) as c:
        yield c


def user(text: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "system", "content": "calendar assistant"}, {"role": "user", "content": text}]


def test_start_returns_v1_base_url_and_models(server: ScriptedModelServer, client: openai.OpenAI) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.base_url.endswith("/v1")
    assert [m.id for m in client.models.list()] == ["scripted"]


def test_text_non_stream(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="qwen-max", messages=user("hello"))
    assert completion.object == "chat.completion"
    assert completion.model == "qwen-max"
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == "Hello from the script, streamed in pieces."
    assert choice.message.tool_calls is None
    assert completion.usage is not None
    assert (
        completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert completion.usage.completion_tokens > 0


def test_text_stream_in_several_deltas(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(model="m", messages=user("hello"), stream=True)
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 3
    assert "".join(pieces) == "Hello from the script, streamed in pieces."
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks)


def test_tool_call_non_stream(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="m", messages=user("明天下午三点和张三开会"), tools=TOOLS, tool_choice="auto"
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None
    assert len(calls) == 1
    call = calls[0]
    assert call.type == "function"
    assert call.id.startswith("call_")
    assert call.function.name == "prepare_or_create_schedule"
    assert json.loads(call.function.arguments) == CREATE_ARGS


def test_tool_call_stream_reassembled_by_sdk(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model="m",
        messages=user("明天下午三点和张三开会"),
        tools=TOOLS,
        tool_choice="auto",
        parallel_tool_calls=False,
        stream_options={"include_usage": True},
    ) as stream:
        argument_deltas = [e for e in stream if e.type == "tool_calls.function.arguments.delta"]
        final = stream.get_final_completion()
    assert len(argument_deltas) > 3
    calls = final.choices[0].message.tool_calls
    assert calls is not None
    assert len(calls) == 1
    assert calls[0].function.name == "prepare_or_create_schedule"
    assert json.loads(calls[0].function.arguments) == CREATE_ARGS
    assert final.choices[0].finish_reason == "tool_calls"
    assert final.usage is not None
    assert final.usage.completion_tokens > 0


def test_tool_call_stream_wire_shape(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="m",
        messages=user("明天下午三点和张三开会"),
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    tool_deltas = [tc for d in deltas for tc in d.tool_calls or []]
    first, rest = tool_deltas[0], tool_deltas[1:]
    assert first.index == 0
    assert first.id is not None
    assert first.type == "function"
    assert first.function is not None
    assert first.function.name == "prepare_or_create_schedule"
    assert all(tc.id is None and tc.function is not None and tc.function.name is None for tc in rest)
    arguments = "".join(tc.function.arguments or "" for tc in tool_deltas if tc.function)
    assert json.loads(arguments) == CREATE_ARGS
    # The usage chunk comes last, with no choices; every other chunk has usage null.
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens > 0
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert all(c.usage is None for c in chunks[:-1])


def test_two_tool_calls_in_one_response_even_without_parallel(
    server: ScriptedModelServer, client: openai.OpenAI
) -> None:
    stream = client.chat.completions.create(
        model="m", messages=user("two"), tools=TOOLS, parallel_tool_calls=False, stream=True
    )
    content = ""
    calls: dict[int, dict[str, str]] = {}
    for chunk in stream:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += tc.id or ""
                if tc.function is not None:
                    entry["name"] += tc.function.name or ""
                    entry["arguments"] += tc.function.arguments or ""
    assert content == "Creating both."
    assert sorted(calls) == [0, 1]
    assert [json.loads(calls[i]["arguments"])["title"] for i in (0, 1)] == ["A", "B"]
    assert calls[0]["id"] != calls[1]["id"]
    assert server.requests[-1].parallel_tool_calls is False

    completion = client.chat.completions.create(model="m", messages=user("two"), tools=TOOLS)
    message = completion.choices[0].message
    assert message.content == "Creating both."
    assert message.tool_calls is not None
    assert len(message.tool_calls) == 2
    assert server.requests[-1].parallel_tool_calls is None


def test_malformed_arguments_go_out_verbatim(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="m", messages=user("malformed"), tools=TOOLS)
    calls = completion.choices[0].message.tool_calls
    assert calls is not None
    assert isinstance(calls[0], ChatCompletionMessageFunctionToolCall)
    assert calls[0].function.arguments == '{"query": "co'


def test_error_status_surfaces_in_sdk(client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="m", messages=user("boom"))
    assert info.value.status_code == 500
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="m", messages=user("limited"), stream=True)
    assert limited.value.status_code == 429
    assert limited.value.code == "rate_limit_exceeded"
    assert "slow down" in limited.value.message


def test_down_mode_answers_503_and_up_restores(server: ScriptedModelServer, client: openai.OpenAI) -> None:
    server.down()
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="m", messages=user("hello"), stream=True)
    assert info.value.status_code == 503
    server.up()
    assert client.chat.completions.create(model="m", messages=user("hello")).choices[0].message.content
    assert [r.status for r in server.requests] == [503, 200]
    assert server.requests[0].rule is None


def test_admin_endpoints(server: ScriptedModelServer, client: openai.OpenAI) -> None:
    with httpx.Client(base_url=server.url, timeout=5) as admin:
        admin.post("/_down").raise_for_status()
        with pytest.raises(openai.APIStatusError):
            client.chat.completions.create(model="m", messages=user("hello"))
        admin.post("/_up").raise_for_status()
        replaced = {"rules": [], "default": {"text": "replaced over HTTP"}}
        admin.put("/_script", json=replaced).raise_for_status()
        answer = client.chat.completions.create(model="m", messages=user("hello"))
        assert answer.choices[0].message.content == "replaced over HTTP"
        assert admin.put("/_script", json={"rules": [{"respond": {}}]}).status_code == 422
        recorded = admin.get("/_requests").json()
        assert [r["rule"] for r in recorded] == [None, "default"]
        assert recorded[1]["body"]["messages"][-1]["content"] == "hello"
        assert admin.delete("/_requests").status_code == 200
        assert admin.get("/_requests").json() == []


def test_delay_and_streaming_latency(client: openai.OpenAI) -> None:
    started = time.monotonic()
    completion = client.chat.completions.create(model="m", messages=user("slow"))
    assert time.monotonic() - started >= 0.3
    assert completion.choices[0].message.content == "late"

    started = time.monotonic()
    stream = client.chat.completions.create(model="m", messages=user("trickle"), stream=True)
    arrivals: list[float] = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic() - started)
    assert len(arrivals) == 4
    assert arrivals[0] >= 0.15
    assert arrivals[-1] - arrivals[0] >= 0.14


def test_dropped_connection(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=user("hangup"))
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=user("hangup"), stream=True)
    # Mid-stream: two content deltas arrive, then the connection is gone.
    received: list[str] = []

    def read_cut_stream() -> None:
        stream = client.chat.completions.create(model="m", messages=user("cut"), stream=True)
        received.extend(c.choices[0].delta.content or "" for c in stream if c.choices)

    with pytest.raises(openai.APIConnectionError):
        read_cut_stream()
    assert "".join(received) == "abcd"
    # The server is still fine afterwards.
    assert client.chat.completions.create(model="m", messages=user("hi")).choices[0].message.content


def test_requests_are_recorded(server: ScriptedModelServer, client: openai.OpenAI) -> None:
    client.chat.completions.create(
        model="qwen-max",
        messages=user("明天下午三点和张三开会"),
        tools=TOOLS,
        tool_choice="auto",
        parallel_tool_calls=False,
        temperature=0.1,
        stream=True,
        stream_options={"include_usage": True},
    ).close()
    client.chat.completions.create(model="m", messages=user("hello"))
    first, second = server.requests
    assert first.rule == "create"
    assert first.messages == [
        {"role": "system", "content": "calendar assistant"},
        {"role": "user", "content": "明天下午三点和张三开会"},
    ]
    assert first.tool_names == ["prepare_or_create_schedule", "search_memory"]
    assert first.parallel_tool_calls is False
    assert first.stream is True
    assert first.body["tool_choice"] == "auto"
    assert first.body["temperature"] == 0.1
    assert first.body["stream_options"] == {"include_usage": True}
    assert first.body["model"] == "qwen-max"
    assert second.rule == "default"
    assert first.timestamp <= second.timestamp


def test_last_tool_and_tool_result_matching(server: ScriptedModelServer, client: openai.OpenAI) -> None:
    def conversation(tool_name: str, result: str) -> list[ChatCompletionMessageParam]:
        return [
            *user("我喝咖啡加糖吗"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_x1", "type": "function", "function": {"name": tool_name, "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_x1", "content": result},
        ]

    answer = client.chat.completions.create(model="m", messages=conversation("search_memory", "咖啡不加糖"))
    assert answer.choices[0].message.content == "你的咖啡不加糖。"
    other = client.chat.completions.create(
        model="m", messages=conversation("search_chat_archive", "咖啡不加糖")
    )
    assert other.choices[0].message.content == "some other tool answered"
    missing = client.chat.completions.create(model="m", messages=conversation("search_memory", "nothing"))
    assert missing.choices[0].message.content == "some other tool answered"
    assert [r.rule for r in server.requests] == ["after_memory", "after_other_tool", "after_other_tool"]


def test_times_limit(server: ScriptedModelServer, client: openai.OpenAI) -> None:
    answers = [client.chat.completions.create(model="m", messages=user("once")) for _ in range(2)]
    assert [a.choices[0].message.content for a in answers] == [
        "first time",
        "Hello from the script, streamed in pieces.",
    ]
    server.set_script(SCRIPT)
    again = client.chat.completions.create(model="m", messages=user("once"))
    assert again.choices[0].message.content == "first time"


def test_template_and_model_matching(client: openai.OpenAI) -> None:
    echoed = client.chat.completions.create(model="m", messages=user("echo 你好"), stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in echoed if c.choices)
    assert text == "you said <echo 你好>"
    by_model = client.chat.completions.create(model="model-b", messages=user("anything"))
    assert by_model.choices[0].message.content == "I am model b"


async def test_async_client_stream_and_tool_call(server: ScriptedModelServer) -> None:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="m",
            messages=user("Tomorrow: meet 张三 明天"),
            tools=TOOLS,
            tool_choice="auto",
            parallel_tool_calls=False,
            stream=True,
            stream_options={"include_usage": True},
        )
        arguments = ""
        usage: Any = None
        async for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or []:
                    arguments += tc.function.arguments or "" if tc.function else ""
        assert json.loads(arguments) == CREATE_ARGS
        assert usage is not None
        text = await client.chat.completions.create(model="m", messages=user("hello"))
        assert text.choices[0].message.content == "Hello from the script, streamed in pieces."


def test_starts_fast_and_stops_cleanly() -> None:
    threads_before = set(threading.enumerate())
    started = time.monotonic()
    server = ScriptedModelServer(Script.model_validate({"default": {"text": "x"}}))
    url = server.start()
    assert time.monotonic() - started < 1.0
    port = server.port
    with openai.OpenAI(base_url=url, api_key="t", max_retries=0) as client:
        assert client.chat.completions.create(model="m", messages=user("a")).choices[0].message.content == "x"
    server.stop()
    assert not server.running
    assert set(threading.enumerate()) <= threads_before
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)
    # The same port can be taken again at once.
    with ScriptedModelServer(Script.model_validate({"default": {"text": "y"}}), port=port) as again:
        assert again.base_url == url


def test_bad_request_body(server: ScriptedModelServer) -> None:
    response = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": []})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    garbage = httpx.post(f"{server.base_url}/chat/completions", content=b"{not json")
    assert garbage.status_code == 400


def test_raw_sse_framing(server: ScriptedModelServer) -> None:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.read().decode()
    events = [block for block in raw.split("\n\n") if block]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    usage_chunk = json.loads(events[-2][len("data: ") :])
    assert usage_chunk["choices"] == []
    assert set(usage_chunk["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}


def test_the_listening_socket_is_tcp_so_answers_are_not_delayed() -> None:
    # Same trap as the gateway's: proto 0 leaves Nagle on for accepted connections (~40 ms a reply).
    import socket

    with ScriptedModelServer(Script(rules=[])) as server:
        assert server._socket is not None
        assert server._socket.proto == socket.IPPROTO_TCP
