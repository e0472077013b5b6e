"""The model client's request on the wire: the body a server receives, and the tool schemas,
the same list on every call, encoded once per client rather than once per call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from calagent.agent.adapters.model import OpenAIModelClient
from calagent.contracts.tools import tool_schemas
from calagent.scriptedmodel import Response, Script, ScriptedModelServer

pytestmark = pytest.mark.integration


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    scripted = ScriptedModelServer(Script(rules=[], default=Response(text="好的。")))
    scripted.start()
    yield scripted
    scripted.stop()


async def test_two_calls_send_the_whole_request_and_encode_the_tools_once(
    server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tool_schemas()
    encoded: list[Any] = []
    dumps = json.dumps

    def counting(obj: Any, **kwargs: Any) -> str:
        encoded.append(obj)
        return dumps(obj, **kwargs)

    monkeypatch.setattr(json, "dumps", counting)
    client = OpenAIModelClient(server.base_url, "x", "m", 5.0)
    try:
        for words in ("你好", "明天呢"):
            response = await client.complete([{"role": "user", "content": words}], tools, None)
            assert response.text == "好的。"
    finally:
        await client.close()
    assert [r.messages for r in server.requests] == [
        [{"role": "user", "content": "你好"}],
        [{"role": "user", "content": "明天呢"}],
    ]
    for request in server.requests:
        assert request.body["tools"] == tools
        assert request.body["model"] == "m"
        assert request.body["stream"] is True
        assert request.body["parallel_tool_calls"] is False
    # Encoded on their own or inside a body: once for both calls.
    assert sum(obj is tools or (isinstance(obj, dict) and obj.get("tools") is tools) for obj in encoded) == 1
