"""`calagent eval live` pointed at a model that answers nothing useful: every case must reach the
model, every failure must be classified, and the gate must fail."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from calagent.cli.evaluation.cases import default_cases_dir, load_cases
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import Response, Script, ScriptedModelServer
from calagent.scriptedmodel.script import message_text

from .helpers import run_eval_in_thread

pytestmark = pytest.mark.eval

CLASSIFIED = {"passed", "flaky", "known_issue", "stale_known_issue", "unclassified", "skipped"}


@pytest.fixture
def bland() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(Script(rules=[], default=Response(text="嗯。")))
    server.start()
    yield server
    server.stop()


def test_live_without_a_model_refuses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, report = run_eval_in_thread("live", tmp_path / "r.json")
    assert code == 2
    assert report == {}


def test_live_drives_every_case_through_the_configured_model(
    servers: Servers, bland: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NATS_URL", servers.nats_url)
    monkeypatch.setenv("DATABASE_URL", servers.database_url)
    monkeypatch.setenv("OPENAI_BASE_URL", bland.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    code, output, report = run_eval_in_thread("live", tmp_path / "live.json", concurrency=6)
    assert code != 0
    assert output.rstrip().splitlines()[-1] == f"{report['passed']} passed, {report['failed']} failed"
    statuses = {r["status"] for r in report["results"]}
    assert statuses <= CLASSIFIED
    assert report["unclassified"] > 0
    # A bland model fails a create; non-safety failures were retried, safety ones never.
    by_id = {r["id"]: r for r in report["results"]}
    assert by_id["open-zh-create"]["status"] == "unclassified" and by_id["open-zh-create"]["attempts"] == 2
    assert by_id["held-past-tense-zh"]["attempts"] == 1
    # Scripted misbehaviour cannot be asked of a real model: those cases are skipped, not passed.
    assert by_id["safety-fabricated-create-zh"]["status"] == "skipped"

    seen = {
        message_text(m.get("content")) for r in bland.requests for m in r.messages if m.get("role") == "user"
    }
    assert all(r.body.get("tools") for r in bland.requests)
    live_cases = [c for c in load_cases(default_cases_dir()) if "live" in c.modes]
    assert len(live_cases) == report["cases"] - report["skipped"]
    for case in live_cases:
        first = case.turns[0]
        if first.model_down:
            continue  # an outage is simulated locally; the model is never asked
        # Channel wrappers are peeled and quotes re-framed before the model sees the text, so a line
        # of the user's own message is what must arrive.
        lines = [line.strip() for line in first.user.splitlines() if line.strip() and "<" not in line]
        reached = any(
            line in text or (text.strip() and text.strip() in line) for line in lines for text in seen
        )
        assert reached, f"{case.id} never reached the model"


TRIAL_CASE = """
cases:
  - id: trial-create
    turns:
      - user: 明天下午三点和张三开会
        model: [{tool: prepare_or_create_schedule, args: {title: 和张三开会, date: D+1, time: "15:00"}}]
        expect: {outcome: created, events_after: {count: 1}}
  - id: trial-chat
    group: chat
    turns:
      - user: 你好
        expect: {outcome: answered}
"""


def test_live_trials_report_pass_hat_k_per_group(
    servers: Servers, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A model that gets the create right twice and then never again: 2 of 3 trials pass.
    create = {
        "when": {"user_contains": "开会", "last_role": "user"},
        "times": 2,
        "respond": {
            "tool_calls": [
                {
                    "name": "prepare_or_create_schedule",
                    "arguments": {"title": "和张三开会", "date": "D+1", "time": "15:00"},
                }
            ]
        },
    }
    cases_dir = tmp_path / "cases"
    cases_dir.mkdir()
    (cases_dir / "trials.yaml").write_text(TRIAL_CASE, encoding="utf-8")
    with ScriptedModelServer(
        Script.model_validate({"rules": [create], "default": {"text": "嗯。"}})
    ) as model:
        monkeypatch.setenv("NATS_URL", servers.nats_url)
        monkeypatch.setenv("DATABASE_URL", servers.database_url)
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        code, output, report = run_eval_in_thread(
            "live", tmp_path / "r.json", cases_dir=str(cases_dir), trials=3
        )
    by_id = {r["id"]: r for r in report["results"]}
    assert by_id["trial-create"]["trials"] == [True, True, False]
    assert by_id["trial-create"]["status"] == "flaky"
    assert by_id["trial-chat"]["trials"] == [True, True, True]
    assert report["pass_hat_k"]["trials"] == {"1": 0.6667, "2": 0.3333, "3": 0.0}
    assert report["pass_hat_k"]["chat"] == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert report["pass_hat_k"]["all"] == {"1": 0.8333, "2": 0.6667, "3": 0.5}
    assert "pass^3" in output
    assert code == 0
