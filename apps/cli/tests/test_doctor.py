"""`calagent doctor` against the scripted model in its quirk modes (loopback only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from calagent.cli.doctor import Check, run_doctor
from calagent.cli.main import main
from calagent.devtools.processes import free_port
from calagent.scriptedmodel import Script, ScriptedModelServer

pytestmark = pytest.mark.unit

PROBE = {
    "when": {"user_contains": "tomorrow"},
    "respond": {
        "tool_calls": [{"name": "doctor_probe", "arguments": {"title": "doctor check", "date": "D+1"}}]
    },
}


def doctor_script(**quirks: Any) -> Script:
    return Script.model_validate({"rules": [PROBE], "default": {"text": "pong"}, "quirks": quirks})


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(doctor_script()) as running:
        yield running


async def checks_for(
    server: ScriptedModelServer, model: str = "scripted", **quirks: Any
) -> tuple[dict[str, Check], bool]:
    server.set_script(doctor_script(**quirks))
    checks, can_call_tools = await run_doctor(server.base_url, "key", model)
    return {c.name: c for c in checks}, can_call_tools


def verdicts(checks: dict[str, Check]) -> dict[str, str]:
    return {name: c.verdict for name, c in checks.items()}


async def test_a_clean_endpoint_passes_every_check(server: ScriptedModelServer) -> None:
    checks, ok = await checks_for(server)
    assert ok
    assert verdicts(checks) == {
        "reachable": "ok",
        "model listed": "ok",
        "tool call": "ok",
        "streamed tool call": "ok",
        "schema pattern": "ok",
        "tool_choice": "ok",
        "usage": "ok",
    }


async def test_an_endpoint_without_tool_support_fails_and_names_the_fix(server: ScriptedModelServer) -> None:
    checks, ok = await checks_for(server, no_tools=True)
    assert not ok
    assert checks["tool call"].verdict == "fail"
    assert checks["streamed tool call"].verdict == "fail"
    assert "CALAGENT_MODEL" in (checks["tool call"].fix or "")


BOTH = ["tool call", "streamed tool call"]


@pytest.mark.parametrize(
    ("quirks", "warned"),
    [
        ({"tool_call_style": "tool_call_tag"}, BOTH),
        ({"tool_call_style": "fenced_json"}, BOTH),
        ({"omit_call_ids": True}, BOTH),
        ({"almost_json": True}, BOTH),
        ({"natural_dates": True}, ["schema pattern"]),
        ({"ignore_tool_choice": True}, ["tool_choice"]),
        ({"omit_usage": True}, ["usage"]),
    ],
)
async def test_each_quirk_is_a_warning_calagent_copes_with(
    server: ScriptedModelServer, quirks: dict[str, Any], warned: list[str]
) -> None:
    checks, ok = await checks_for(server, **quirks)
    assert ok
    assert {name: c.verdict for name, c in checks.items() if c.verdict != "ok"} == dict.fromkeys(
        warned, "warn"
    )


async def test_a_model_the_endpoint_does_not_list_is_named_with_the_setting(
    server: ScriptedModelServer,
) -> None:
    server.state.model_name = "qwen-plus"
    try:
        checks, _ = await checks_for(server, model="qwen-max")
    finally:
        server.state.model_name = "scripted"
    assert checks["model listed"].verdict == "warn"
    assert "CALAGENT_MODEL" in (checks["model listed"].fix or "")


async def test_an_unreachable_endpoint_fails() -> None:
    checks, ok = await run_doctor(f"http://127.0.0.1:{free_port()}/v1", "key", "m")
    assert not ok
    assert [(c.name, c.verdict) for c in checks] == [("reachable", "fail")]
    assert "OPENAI_BASE_URL" in (checks[0].fix or "")


def test_the_command_exits_1_when_the_endpoint_cannot_call_tools(
    server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("CALAGENT_MODEL", "scripted")
    server.set_script(doctor_script())
    assert main(["doctor"]) == 0
    server.set_script(doctor_script(no_tools=True))
    assert main(["doctor"]) == 1
    assert "FAIL" in capsys.readouterr().out
