"""Turn latency end to end with the scripted model at zero latency: what the system itself costs.

Prints medians; asserts nothing about time (machines here are shared and noisy)."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import Script, ScriptedModelServer

pytestmark = pytest.mark.benchmark

SCRIPT = Script.model_validate(
    {
        "rules": [
            {
                "when": {"user_contains": "修汽车轮毂", "last_role": "user"},
                "respond": {
                    "tool_calls": [
                        {
                            "name": "prepare_or_create_schedule",
                            "arguments": {"title": "修汽车轮毂", "date": "WE"},
                        }
                    ]
                },
            },
            {
                "when": {"user_contains": "开了个会", "last_role": "user"},
                "respond": {
                    "tool_calls": [
                        {
                            "name": "prepare_or_create_schedule",
                            "arguments": {"title": "开会", "date": "D-1", "time": "15:00"},
                        }
                    ]
                },
            },
            {
                "when": {"user_contains": "开会", "last_role": "user"},
                "respond": {
                    "tool_calls": [
                        {
                            "name": "prepare_or_create_schedule",
                            "arguments": {"title": "开会", "date": "D+1", "time": "15:00"},
                        }
                    ]
                },
            },
        ],
        "default": {"text": "ok"},
    }
)


@pytest.fixture(scope="module")
async def bench_stack(
    servers: Servers, database_url: str
) -> AsyncIterator[tuple[Stack, ScriptedModelServer]]:
    with ScriptedModelServer(SCRIPT) as model:
        stack = await start_stack(
            nats_url=servers.nats_url, database_url=database_url, model_base_url=model.base_url
        )
        try:
            yield stack, model
        finally:
            await stack.stop()


async def test_create_and_clarification_merge_latency(bench_stack: tuple[Stack, ScriptedModelServer]) -> None:
    stack, _model = bench_stack
    creates: list[float] = []
    merges: list[float] = []
    confirms: list[float] = []
    create_calls: set[int] = set()
    merge_calls: set[int] = set()
    confirm_calls: set[int] = set()
    for _ in range(30):
        user = f"bench-{uuid.uuid4().hex[:8]}"
        began = time.perf_counter()
        created = (await stack.chat(user, "明天下午三点开会")).json()
        creates.append((time.perf_counter() - began) * 1000)
        assert created["outcome"] == "created"
        create_calls.add(created["model_calls"])

        stub = (await stack.chat(user, "这个周末去修汽车轮毂")).json()
        began = time.perf_counter()
        merged = (await stack.chat(user, "周日下午2点", active_command_id=stub["command"]["id"])).json()
        merges.append((time.perf_counter() - began) * 1000)
        assert merged["outcome"] == "created"
        merge_calls.add(merged["model_calls"])

        held = (await stack.chat(user, "昨天下午三点开了个会")).json()
        assert held["outcome"] == "held"
        began = time.perf_counter()
        confirmed = (await stack.chat(user, "好的")).json()  # the timed gate
        confirms.append((time.perf_counter() - began) * 1000)
        assert confirmed["outcome"] == "created"
        confirm_calls.add(confirmed["model_calls"])
    print(
        f"\ncreate turn: median {statistics.median(creates[5:]):.1f} ms, model calls {sorted(create_calls)}"
        f"\nclarification merge: median {statistics.median(merges[5:]):.1f} ms, model calls {sorted(merge_calls)}"
        f"\ntimed-gate confirm: median {statistics.median(confirms[5:]):.1f} ms, model calls {sorted(confirm_calls)}"
    )
    assert create_calls == {1}
    assert merge_calls == {0}
    assert confirm_calls == {0}
