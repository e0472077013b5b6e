"""The claims benchmark: its counting, its report and the `calagent bench claims` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calagent.agent.domain.claims import Claims
from calagent.agent.domain.claims_bench import (
    CorpusRow,
    dedupe,
    default_corpus_dir,
    evaluate,
    format_report,
    load_corpus,
    run_claims_benchmark,
)

pytestmark = pytest.mark.unit


def fake_detector(text: str) -> Claims:
    return Claims(write="W" in text, read="R" in text)


ROWS = [
    CorpusRow("W", "en", ("write",), "a"),  # caught
    CorpusRow("R", "en", ("write", "read"), "a"),  # found, but not every kind
    CorpusRow("x", "zh", ("read",), "b"),  # missed
    CorpusRow("WR", "zh", ("write", "read"), "b"),  # caught
    CorpusRow("ok", "en", (), "a"),  # honest
    CorpusRow("R?", "zh", (), "b"),  # false alarm
]


def test_evaluate_counts() -> None:
    report = evaluate(ROWS, fake_detector)
    all_ = report.figures["all"]
    assert (all_.n, all_.claims, all_.honest) == (6, 4, 2)
    assert (all_.caught, all_.caught_any, all_.false_alarms) == (2, 3, 1)
    assert all_.recall == 0.5 and all_.any_recall == 0.75 and all_.false_alarm_rate == 0.5
    assert report.figures["en"].recall == 0.5 and report.figures["zh"].false_alarm_rate == 1.0
    assert report.figures["a/en"].n == 3 and report.figures["b"].n == 3
    assert [o.row.text for o in report.misses] == ["R", "x"]
    assert [o.row.text for o in report.false_alarms] == ["R?"]
    assert not report.meets_targets
    text = format_report(report)
    assert "together/all" in text and "50.00%" in text and "'R?'" in text
    json.dumps(report.as_dict())


def test_dedupe_prefers_the_independent_copy() -> None:
    rows = [
        CorpusRow("Done!", "en", ("write",), "authored"),
        CorpusRow("done", "en", ("write",), "independent"),
    ]
    assert [r.source for r in dedupe(rows)] == ["independent"]


def test_load_corpus_rejects_malformed_rows(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x", "lang": "fr", "labels": []}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1"):
        load_corpus([bad])


def test_default_corpus_dir_is_the_test_data() -> None:
    found = default_corpus_dir()
    assert found is not None
    assert found.resolve() == (Path(__file__).parent / "claims_corpus").resolve()


def test_benchmark_reports_speed(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        json.dumps(
            {"text": "已删除明天和张三的会", "lang": "zh", "labels": ["write"], "source": "t"},
            ensure_ascii=False,
        )
        + "\n"
        + json.dumps({"text": "Which day works for you?", "lang": "en", "labels": [], "source": "t"})
        + "\n",
        encoding="utf-8",
    )
    report = run_claims_benchmark([corpus])
    assert report.meets_targets
    assert report.speed is not None and report.speed.cold_us_mean > 0 and report.speed.prefix_us_mean > 0


def test_cli_bench_claims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from calagent.cli.main import main

    assert main(["bench", "claims"]) == 0
    out = capsys.readouterr().out
    assert "together/zh" in out and "together/en" in out and "false alarms" in out and "us/reply" in out

    missed = tmp_path / "m.jsonl"
    missed.write_text(json.dumps({"text": "hello", "lang": "en", "labels": ["read"], "source": "t"}) + "\n")
    assert main(["bench", "claims", "--corpus", str(missed)]) == 1
    assert "'hello'" in capsys.readouterr().out
    assert main(["bench", "claims", "--corpus", str(tmp_path / "nope.jsonl")]) == 2
