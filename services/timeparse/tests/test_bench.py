"""Throughput of the resolver and the short-reply parser next to dateparser (prints, never times out).

Run alone with `pytest services/timeparse -m benchmark -s` to see the table.
"""

from __future__ import annotations

import math

import pytest

from calagent.timeparse.bench import PHRASES, pipeline, run_benchmark

pytestmark = pytest.mark.benchmark


def test_benchmark_prints_rates_and_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    numbers = run_benchmark(seconds=0.6)
    with capsys.disabled():
        print()
        print(f"{'measure':<36}{'value':>14}")
        for key, value in numbers.items():
            shown = "not installed" if math.isnan(value) else f"{value:,.2f}"
            print(f"{key:<36}{shown:>14}")
    # Only correctness is asserted; speed depends on the machine.
    assert numbers["pipeline_accuracy"] == 1.0
    for phrase, expected in PHRASES:
        assert pipeline(phrase) == expected, phrase
    assert numbers["resolve_ops_per_s"] > 0
    assert numbers["parse_reply_ops_per_s"] > 0


def test_bench_cli_prints_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from calagent.timeparse.cli import bench_main

    assert bench_main(["--seconds", "0.05"]) == 0
    numbers = json.loads(capsys.readouterr().out)
    assert numbers["pipeline_accuracy"] == 1.0
    assert {"resolve_ops_per_s", "parse_reply_ops_per_s", "dateparser_ops_per_s"} <= set(numbers)
