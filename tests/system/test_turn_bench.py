"""`calagent bench turns` runs end to end on a real `calagent up` and reports every figure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_the_turn_bench_reports_every_figure_in_one_run() -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "calagent.cli.main", "bench", "turns", "--json",
            "--n", "6", "--seconds", "1", "--clients", "2", "--in-flight", "12", "--slow-ms", "200",
            "--compare-ms", "50", "--compare-n", "2",
            # The path's bus counts are exact at once; only its transaction count needs PostgreSQL's
            # 10 s idle flush, and nothing here asserts that figure's size.
            "--stats-flush-s", "1.5",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["floor"]["p50"] > 0
    assert report["create"]["p50"] > 0 and report["merge"]["p50"] > 0
    assert {"gateway", "agent", "commands", "timeparse", "evalrec", "nats-server", "postgres"} <= set(
        report["cpu_ms_per_turn"]
    )
    # PostgreSQL's work is in its backends (children of the postmaster): they are counted.
    assert report["cpu_ms_per_turn"]["postgres"] > 0
    assert report["throughput"]["errors"] == 0
    assert (report["in_flight"]["created"], report["in_flight"]["errors"]) == (12, 0)
    # Each turn in flight waited at least for the slow model.
    assert 200 <= report["in_flight"]["p50_ms"] <= report["in_flight"]["p99_ms"]
    assert {"gateway", "agent"} <= set(report["in_flight"]["kib_per_turn_in_flight"])
    assert report["versus_pydantic_ai"]["ratio"] is not None
    # A merge at the compared model's latency makes no model call: faster than a create there.
    versus = report["versus_pydantic_ai"]
    assert 0 < versus["merge_p50"] < versus["ours_p50"]
    # The path of a create and of a merge: each goes over the bus in requests with replies.
    assert set(report["path"]) == {"create turn", "clarification merge"}
    for path in report["path"].values():
        assert path["messages_per_turn"] > 0 and path["round_trips_per_turn"] > 0
        assert path["messages_by_subject"]["calagent.turn.requested"] >= 1
        assert path["messages_by_subject"]["calagent.command.execute"] >= 1
