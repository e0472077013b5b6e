"""Percentiles, candidate selection, report assembly and timeline ordering, without servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from calagent.contracts.turns import Segment
from calagent.evalrec.domain.report import (
    SegmentFact,
    ToolCallFact,
    TurnFacts,
    build_report,
    candidate_reasons,
    measured_total,
    select_candidates,
)
from calagent.evalrec.domain.stats import mean, percentile, summarize
from calagent.evalrec.domain.timeline import assemble_timeline

pytestmark = pytest.mark.unit

T0 = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)


def turn(turn_id: str, **overrides: object) -> TurnFacts:
    values: dict[str, object] = {
        "turn_id": turn_id,
        "text": f"text of {turn_id}",
        "outcome": "answered",
        "intent": "general.chat",
        "occurred_at": T0,
        "tz": "Asia/Shanghai",
        "total_ms": 1000.0,
    }
    values.update(overrides)
    return TurnFacts(**values)  # type: ignore[arg-type]


class TestPercentile:
    def test_empty_has_no_percentile(self) -> None:
        assert percentile([], 50) is None

    def test_single_value_is_every_percentile(self) -> None:
        assert percentile([7.0], 0) == 7.0
        assert percentile([7.0], 95) == 7.0

    def test_interpolates_between_ranks_like_percentile_cont(self) -> None:
        values = [float(v) for v in range(1, 11)]  # 1..10
        assert percentile(values, 50) == pytest.approx(5.5)
        assert percentile(values, 95) == pytest.approx(9.55)
        assert percentile(values, 0) == 1.0
        assert percentile(values, 100) == 10.0

    def test_order_of_input_does_not_matter(self) -> None:
        assert percentile([3.0, 1.0, 2.0], 50) == 2.0

    def test_rejects_out_of_range(self) -> None:
        with pytest.raises(ValueError, match=r"0\.\.100"):
            percentile([1.0], 101)

    def test_summary_rounds_and_counts(self) -> None:
        assert summarize([1.0, 2.0, 3.0, 4.0]) == {"count": 4, "p50": 2.5, "p95": 3.9}
        assert summarize([]) == {"count": 0, "p50": None, "p95": None}

    def test_mean(self) -> None:
        assert mean([]) is None
        assert mean([1.0, 2.0]) == 1.5


class TestMeasuredTotal:
    def test_the_records_total(self) -> None:
        assert measured_total(1200.0) == 1200.0

    def test_zero_means_unknown(self) -> None:
        assert measured_total(0.0) is None
        assert measured_total(None) is None


class TestCandidateReasons:
    def test_plain_fast_turn_is_not_a_candidate(self) -> None:
        assert candidate_reasons(turn("a"), slow_above_ms=5000.0) == []

    def test_replaced_claims_and_read_only_write_attempts_come_first(self) -> None:
        t = turn("a", flags=("held", "unverified_create_claim", "read_only_write_attempt"))
        assert candidate_reasons(t, None) == ["read_only_write_attempt", "unverified_create_claim", "held"]

    def test_unverified_read_claim(self) -> None:
        claim = turn("a", flags=("unverified_read_claim",))
        assert candidate_reasons(claim, None) == ["unverified_read_claim"]

    def test_held_and_model_unavailable_by_outcome_alone(self) -> None:
        assert candidate_reasons(turn("a", outcome="held"), None) == ["held"]
        assert candidate_reasons(turn("a", outcome="model_unavailable"), None) == ["model_unavailable"]

    def test_tool_error_by_flag_or_by_result(self) -> None:
        by_flag = turn("a", flags=("tool_error",))
        bad_call = ToolCallFact("prepare_or_create_schedule", "error:invalid_symbol")
        by_result = turn("b", tool_calls=(bad_call,))
        fine = turn("c", tool_calls=(ToolCallFact("prepare_or_create_schedule", "created"),))
        assert candidate_reasons(by_flag, None) == ["tool_error"]
        assert candidate_reasons(by_result, None) == ["tool_error"]
        assert candidate_reasons(fine, None) == []

    def test_slow_above_p95_or_above_ten_seconds(self) -> None:
        assert candidate_reasons(turn("a", total_ms=3000.0), slow_above_ms=2000.0) == ["slow"]
        assert candidate_reasons(turn("b", total_ms=10_001.0), slow_above_ms=None) == ["slow"]
        assert candidate_reasons(turn("c", total_ms=10_000.0), slow_above_ms=20_000.0) == []
        assert candidate_reasons(turn("d", total_ms=None), slow_above_ms=1.0) == []


class TestSelectCandidates:
    def test_orders_by_severity_then_newest_and_limits(self) -> None:
        turns = [
            turn("held-old", outcome="held", occurred_at=T0),
            turn("held-new", outcome="held", occurred_at=T0 + timedelta(minutes=5)),
            turn("claim", flags=("unverified_create_claim",), occurred_at=T0 - timedelta(days=1)),
            turn("ok"),
        ]
        entries, total = select_candidates(turns, limit=2)
        assert total == 3
        assert [e["turn_id"] for e in entries] == ["claim", "held-new"]
        assert entries[0]["safety"] is True
        assert entries[1]["safety"] is False

    def test_entry_carries_what_a_case_needs(self) -> None:
        t = turn(
            "x",
            text="明天没有安排吧",
            outcome="claim_replaced",
            intent="general.chat",
            flags=("unverified_read_claim",),
            tool_calls=(ToolCallFact("search_memory", "ok"),),
            replaced_reply="明天没有安排",
        )
        (entry,), _ = select_candidates([t], limit=10)
        assert entry["text"] == "明天没有安排吧"
        assert entry["tools"] == ["search_memory"]
        assert entry["outcome"] == "claim_replaced"
        assert entry["occurred_at"] == T0.isoformat()
        assert entry["tz"] == "Asia/Shanghai"
        assert entry["reasons"] == ["unverified_read_claim"]
        assert entry["replaced_reply"] == "明天没有安排"

    def test_the_slowest_of_a_population_is_slow(self) -> None:
        turns = [turn(f"t{i}", total_ms=1000.0 + i) for i in range(100)]
        entries, total = select_candidates(turns, limit=10)
        assert total == 5  # 1095..1099 exceed the interpolated p95 of 1094.05
        assert {e["turn_id"] for e in entries} == {"t95", "t96", "t97", "t98", "t99"}


class TestBuildReport:
    def test_empty_report(self) -> None:
        report = build_report([], candidates=True)
        assert report["turns"] == 0
        assert report["outcomes"] == {}
        assert report["total_ms"]["all"] == {"count": 0, "p50": None, "p95": None}
        assert report["model_calls"]["mean"] is None
        assert report["candidates"] == []
        assert report["candidates_total"] == 0

    def test_counts_latencies_and_model_calls(self) -> None:
        turns = [
            turn(
                "a",
                outcome="created",
                intent="schedule.create",
                model_calls=1,
                total_ms=1000.0,
                cold_start=True,
                flags=("fast_path",),
                segments=(SegmentFact("context.build", 5.0, 10.0), SegmentFact("model.request", 20.0, 800.0)),
            ),
            turn(
                "b",
                outcome="created",
                intent="schedule.create",
                model_calls=2,
                total_ms=2000.0,
                segments=(SegmentFact("context.build", 4.0, 20.0),),
            ),
            turn("c", outcome="queried", intent="schedule.query_range", model_calls=0, total_ms=3000.0),
        ]
        report = build_report(turns)
        assert report["turns"] == 3
        assert report["outcomes"] == {"created": 2, "queried": 1}
        assert report["intents"] == {"schedule.create": 2, "schedule.query_range": 1}
        assert report["flags"] == {"fast_path": 1}
        assert report["segments"] == {
            "context.build": {"count": 2, "p50": 15.0, "p95": 19.5},
            "model.request": {"count": 1, "p50": 800.0, "p95": 800.0},
        }
        assert list(report["segments"]) == ["context.build", "model.request"]
        assert report["total_ms"]["cold"] == {"count": 1, "p50": 1000.0, "p95": 1000.0}
        assert report["total_ms"]["warm"] == {"count": 2, "p50": 2500.0, "p95": 2950.0}
        assert report["model_calls"] == {"mean": 1.0, "by_outcome": {"created": 1.5, "queried": 0.0}}
        assert report["window"] == {"first": T0.isoformat(), "last": T0.isoformat()}
        assert "candidates" not in report


class TestAssembleTimeline:
    def test_nothing_recorded_is_none(self) -> None:
        assert assemble_timeline("t", total_ms=None, segments=[]) is None

    def test_merges_sources_sorted_by_start(self) -> None:
        # Turns recorded before the record carried the gateway's segment have them as their own source.
        timeline = assemble_timeline(
            "t",
            total_ms=1000.0,
            segments=[
                ("agent", Segment(name="model.request", start_ms=50.0, ms=700.0)),
                ("gateway", Segment(name="gateway.done", start_ms=960.0, ms=40.0)),
                ("agent", Segment(name="context.build", start_ms=20.0, ms=30.0)),
                ("gateway", Segment(name="gateway.receive", start_ms=0.0, ms=5.0)),
            ],
        )
        assert timeline is not None
        assert timeline.total_ms == 1000.0
        assert [s.name for s in timeline.segments] == [
            "gateway.receive",
            "context.build",
            "model.request",
            "gateway.done",
        ]

    def test_the_records_total(self) -> None:
        timeline = assemble_timeline("t", total_ms=900.0, segments=[])
        assert timeline is not None
        assert timeline.total_ms == 900.0
