"""The offline route eval as a gate in `make test`, and proof that the gate can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from calagent.cli.evaluation.cases import default_cases_dir, load_cases
from calagent.devtools.testing.servers import Servers

from .helpers import run_eval_in_thread

pytestmark = pytest.mark.eval


@pytest.fixture
def server_env(servers: Servers, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("NATS_URL", servers.nats_url)
    monkeypatch.setenv("DATABASE_URL", servers.database_url)
    return {"NATS_URL": servers.nats_url, "DATABASE_URL": servers.database_url}


def test_every_case_passes_or_is_a_registered_known_issue(server_env: dict[str, str], tmp_path: Path) -> None:
    code, output, report = run_eval_in_thread("offline", tmp_path / "report.json")
    assert report["cases"] >= 128, report["cases"]
    failures = [r for r in report["results"] if r["status"] in ("unclassified", "stale_known_issue")]
    assert failures == [], json.dumps(failures, ensure_ascii=False, indent=1)
    assert code == 0, output
    assert output.rstrip().splitlines()[-1] == f"{report['passed']} passed, {report['failed']} failed"
    assert report["passed"] + report["failed"] == report["cases"]
    assert set(report["by_group"]) >= {
        "opening",
        "query",
        "clarify",
        "conflict",
        "safety",
        "invariants",
        "intent",
        "ambiguity",
    }
    # The ambiguity set (contract §20), a scripted model picking the wrong event first: never once
    # did a conversation act on an event the user did not mean, for 0, 1, 2 or 3 matching events.
    matrix = report["ambiguity"]
    print("\nambiguity (matching events: right / asked / wrong):")
    for matches, row in matrix.items():
        print(f"  {matches}: {row['right']} / {row['asked']} / {row['wrong']}")
    assert set(matrix) == {"0", "1", "2", "3"}
    assert all(row["wrong"] == 0 for row in matrix.values()), matrix
    # Several matching: some conversation picked and acted on the right one, a careless one only asked.
    assert all(matrix[n]["right"] > 0 and matrix[n]["asked"] > 0 for n in ("2", "3")), matrix


def _case(case_id: str, **changes: object) -> dict[str, object]:
    raw = yaml.safe_load((default_cases_dir() / "opening.yaml").read_text())
    base = next(c for c in raw["cases"] if c["id"] == "open-zh-query")
    return {**base, "id": case_id, **changes}


def test_a_broken_case_fails_the_gate_through_the_real_cli(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    good = _case("copy-passes")
    wrong_outcome = _case(
        "copy-wrong-outcome",
        turns=[{**good["turns"][0], "expect": {"outcome": "created"}}],  # type: ignore[index]
    )
    # A read-only request whose model writes: code may hold or reject the write, the case still fails.
    writes = _case(
        "copy-read-only-writes",
        turns=[
            {
                "user": "明天下午有什么安排",
                "model": [{"tool": "save_memory", "args": {"content": "明天下午"}}],
                "expect": {},
            }
        ],
    )
    stale = _case("copy-stale-known-issue", known_issue="fixed long ago")
    cases_dir = tmp_path / "cases"
    cases_dir.mkdir()
    (cases_dir / "broken.yaml").write_text(
        yaml.safe_dump({"cases": [good, wrong_outcome, writes, stale]}, allow_unicode=True)
    )
    report_path = tmp_path / "report.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from calagent.cli.main import main; sys.exit(main(sys.argv[1:]))",
            "eval",
            "offline",
            "--cases-dir",
            str(cases_dir),
            "--report",
            str(report_path),
        ],
        env={**os.environ, **server_env},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert completed.stdout.rstrip().splitlines()[-1] == "2 passed, 2 failed"
    report = json.loads(report_path.read_text())
    status = {r["id"]: r for r in report["results"]}
    assert status["copy-passes"]["status"] == "passed"
    assert status["copy-wrong-outcome"]["status"] == "unclassified"
    assert "outcome" in status["copy-wrong-outcome"]["reason"]
    assert status["copy-read-only-writes"]["status"] == "unclassified"
    assert "read-only request called write tool" in status["copy-read-only-writes"]["reason"]
    assert status["copy-stale-known-issue"]["status"] == "stale_known_issue"
    assert report["unclassified"] == 2 and report["stale_known_issue"] == 1


def test_acting_on_an_event_the_user_did_not_mean_fails_the_case_and_counts_as_wrong(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    """The ambiguity set can fail: a model that lists the day without words and picks the meeting
    with someone else (one candidate: code cannot tell), and a user who confirms unread."""
    case = {
        "id": "copy-acts-on-the-wrong-one",
        "ambiguity": {"matches": 1, "meant": [{"title": "和张三开会", "start": "D+1 15:00"}]},
        "setup": [
            {"title": "和张三开会", "date": "D+1", "time": "15:00"},
            {"title": "和李四开会", "date": "D+2", "time": "17:00"},
        ],
        "turns": [
            {
                "user": "把和张三的会改到下周一",
                "model": [
                    {"tool": "find_events", "args": {"start": "D+2", "end": "D+3"}},
                    {
                        "tool": "update_schedule",
                        "args": {"event_id": "{{tool_result.events.0.id}}", "date": "W1+1"},
                    },
                ],
                "expect": {"outcome": "held"},
            },
            {"user": "确认", "expect": {"outcome": "updated"}},
        ],
    }
    cases_dir = tmp_path / "cases"
    cases_dir.mkdir()
    (cases_dir / "ambiguity.yaml").write_text(yaml.safe_dump({"cases": [case]}, allow_unicode=True))
    code, output, report = run_eval_in_thread("offline", tmp_path / "r.json", cases_dir=str(cases_dir))
    assert code == 1, output
    [result] = report["results"]
    assert result["status"] == "unclassified"
    assert "acted on an event the user did not mean" in result["reason"]
    assert report["ambiguity"] == {"1": {"right": 0, "asked": 0, "wrong": 1}}
    assert "wrong" in output


def test_invalid_case_files_are_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "cases:\n  - id: x\n    turns: [{user: hi, expect: {outcomes: created}}]\n"
    )
    code, _, _ = run_eval_in_thread("offline", tmp_path / "r.json", cases_dir=str(tmp_path))
    assert code == 2


def test_the_committed_cases_cover_the_spec() -> None:
    cases = load_cases(default_cases_dir())
    ids = {c.id for c in cases}
    assert len(cases) >= 128
    intents = {
        t.expectation("offline").intent
        for c in cases
        for t in c.turns
        if isinstance(t.expectation("offline").intent, str)
    }
    # Seed 000's post-hoc intent table, row by row.
    assert intents >= {
        "schedule.create",
        "schedule.clarification_reply",
        "schedule.query_range",
        "memory.search",
        "archive.search",
        "general.chat",
    }
    for required in (
        "query-zh-this-week-anpai",
        "query-zh-tomorrow-3pm-anpai",
        "query-zh-month-september",
        "query-en-this-weekend",
        "memory-save-coffee",
        "clarify-needs-time-liang-dian",
        "clarify-weekend-sunday-2pm",
        "symbols-lone-tian-goes-back",
        "conflict-override-creates-once",
        "calendar-omitted-is-work",
        "calendar-sports-run",
        "calendar-unknown-falls-back",
        "held-past-tense-zh",
        "conflict-vacation-flight-home",
        "inv10-model-down-zh",
        "safety-fabricated-create-zh",
        "safety-fabricated-read-zh",
    ):
        assert required in ids, required
    for n in ("01", "02", "07", "08", "09", "10", "11", "13"):
        assert any(i.startswith(f"inv{n}") for i in ids), n
