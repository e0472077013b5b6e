"""What the gateway spends on a chat turn besides the turn: one HTTP server span per request
(none per ASGI message, none twice), and no worker thread to end the turn's last span."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer
from tests.e2e.conftest import call, on_user, script

pytestmark = pytest.mark.e2e

CREATE = on_user(
    "开会", tool_calls=[call("prepare_or_create_schedule", title="开会", date="D+1", time="15:00")]
)


async def test_a_chat_request_has_one_server_span_and_no_span_per_message(
    stack: Stack, scripted: ScriptedModelServer, user: str, spans: InMemorySpanExporter
) -> None:
    scripted.set_script(script(CREATE))
    response = await stack.chat(user, "明天下午三点开会")
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "created"
    finished = spans.get_finished_spans()
    [receive] = [s for s in finished if s.name == "gateway.receive"]
    in_trace = [s for s in finished if s.context.trace_id == receive.context.trace_id]
    servers = [s for s in in_trace if s.kind == SpanKind.SERVER]
    assert len(servers) == 1, [s.name for s in servers]
    # Under the server span only the gateway's own: no span per ASGI message received or sent.
    server = servers[0].context.span_id
    children = {s.name for s in in_trace if s.parent is not None and s.parent.span_id == server}
    assert children == {"gateway.receive", "gateway.done"}, children


async def test_a_chat_answer_needs_no_worker_thread(
    stack: Stack, scripted: ScriptedModelServer, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted.set_script(script(CREATE))
    handed: list[Any] = []
    run_sync = anyio.to_thread.run_sync

    async def recording(func: Any, *args: Any, **kwargs: Any) -> Any:
        handed.append(func)
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", recording)
    response = await stack.chat(user, "明天下午三点开会")
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "created"
    assert handed == []
