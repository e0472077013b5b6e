"""Terminal rendering of timelines, reports and candidate turns, and the case-file skeleton."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from calagent.cli.render import (
    BAR,
    BAR_WIDTH,
    candidates_to_cases,
    render_candidates,
    render_report,
    render_timeline,
)

pytestmark = pytest.mark.unit

TIMELINE: dict[str, Any] = {
    "turn_id": "t-1",
    "total_ms": 1000.0,
    "segments": [
        {"name": "model.request", "start_ms": 100.0, "ms": 500.0},
        {"name": "gateway.receive", "start_ms": 0.0, "ms": 2.0},
        {"name": "gateway.done", "start_ms": 980.0, "ms": 20.0},
    ],
}


def bar_of(line: str) -> str:
    return line.split("|")[1]


class TestRenderTimeline:
    def test_one_line_per_segment_in_start_order_then_total(self) -> None:
        lines = render_timeline(TIMELINE).splitlines()
        assert lines[0] == "turn t-1  total 1000 ms"
        assert [line.split()[0] for line in lines[1:]] == [
            "gateway.receive",
            "model.request",
            "gateway.done",
            "total",
        ]

    def test_bars_are_placed_at_their_offset_and_scaled_to_fifty_columns(self) -> None:
        lines = render_timeline(TIMELINE).splitlines()
        model = bar_of(lines[2])
        assert len(model) == BAR_WIDTH
        assert model.index(BAR) == 5  # 100 ms of 1000 on 50 columns
        assert model.count(BAR) == 25
        assert bar_of(lines[-1]) == BAR * BAR_WIDTH

    def test_a_tiny_segment_still_shows_and_nothing_overflows(self) -> None:
        lines = render_timeline(TIMELINE).splitlines()
        assert bar_of(lines[1]).count(BAR) == 1
        done = bar_of(lines[3])
        assert len(done) == BAR_WIDTH
        assert done.endswith(BAR)

    def test_columns_show_offset_and_duration(self) -> None:
        line = render_timeline(TIMELINE).splitlines()[2]
        assert "100 ms" in line
        assert "+ 500 ms" in line or "+500 ms" in line

    def test_segments_past_the_total_stretch_the_axis(self) -> None:
        timeline = {
            "turn_id": "t",
            "total_ms": 50.0,
            "segments": [{"name": "x", "start_ms": 0.0, "ms": 100.0}],
        }
        lines = render_timeline(timeline).splitlines()
        assert bar_of(lines[1]) == BAR * BAR_WIDTH
        assert bar_of(lines[-1]).count(BAR) == 25

    def test_empty_timeline(self) -> None:
        text = render_timeline({"turn_id": "t", "total_ms": 0.0, "segments": []})
        assert "(no segments recorded)" in text


REPORT: dict[str, Any] = {
    "turns": 3,
    "window": {"first": "2026-09-24T02:00:00+00:00", "last": "2026-09-24T03:00:00+00:00"},
    "outcomes": {"created": 2, "queried": 1},
    "intents": {"schedule.create": 2, "schedule.query_range": 1},
    "flags": {"unverified_create_claim": 1},
    "segments": {
        "context.build": {"count": 2, "p50": 15.0, "p95": 19.5},
        "model.request": {"count": 2, "p50": 800.0, "p95": 1430.0},
    },
    "total_ms": {
        "all": {"count": 3, "p50": 2000.0, "p95": 2900.0},
        "cold": {"count": 1, "p50": 1000.0, "p95": 1000.0},
        "warm": {"count": 0, "p50": None, "p95": None},
    },
    "model_calls": {"mean": 1.0, "by_outcome": {"created": 1.5, "queried": 0.0}},
    "candidates": [
        {
            "turn_id": "0123456789abcdef0123",
            "reasons": ["unverified_create_claim", "slow"],
            "safety": True,
            "text": '明天下午三点和张三开会: "周会"\n# not a comment',
            "tools": ["prepare_or_create_schedule"],
            "outcome": "claim_replaced",
            "occurred_at": "2026-09-24T02:00:00+00:00",
            "tz": "Asia/Shanghai",
            "total_ms": 12000.0,
            "replaced_reply": "已为你创建",
        },
        {
            "turn_id": "held-1",
            "reasons": ["held"],
            "safety": False,
            "text": "昨天下午开了会",
            "tools": [],
            "outcome": "held",
            "occurred_at": "2026-09-24T02:30:00+00:00",
            "tz": "Europe/Berlin",
            "total_ms": 900.0,
        },
    ],
    "candidates_total": 7,
}


def row(text: str, first_cell: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.split()[:1] == [first_cell])


class TestRenderReport:
    def test_counts_with_shares(self) -> None:
        text = render_report(REPORT)
        assert text.startswith("3 turns recorded")
        assert row(text, "created") == ["created", "2", "66.7%"]
        assert row(text, "schedule.query_range") == ["schedule.query_range", "1", "33.3%"]
        assert row(text, "unverified_create_claim") == ["unverified_create_claim", "1", "33.3%"]

    def test_segment_percentiles_and_cold_vs_warm(self) -> None:
        text = render_report(REPORT)
        assert row(text, "context.build") == ["context.build", "2", "15.0", "19.5"]
        assert row(text, "model.request") == ["model.request", "2", "800", "1430"]
        assert row(text, "cold") == ["cold", "1", "1000", "1000"]
        assert row(text, "warm") == ["warm", "0", "-", "-"]

    def test_model_calls_and_candidate_count(self) -> None:
        text = render_report(REPORT)
        assert "model calls per turn: mean 1.00" in text
        assert "7 candidate turns" in text

    def test_empty_report(self) -> None:
        text = render_report({"turns": 0, "total_ms": {}})
        assert text.startswith("0 turns recorded")
        assert "(none)" in text


class TestRenderCandidates:
    def test_lists_each_candidate_with_reasons_text_tools_and_outcome(self) -> None:
        text = render_candidates(REPORT)
        assert text.splitlines()[0] == "7 candidate turns (showing 2)"
        assert "! 0123456789abcdef0123" in text  # safety marker
        assert "- held-1" in text
        assert "[unverified_create_claim, slow]" in text
        assert "prepare_or_create_schedule" in text
        assert "(no tool)" in text
        assert "claimed: 已为你创建" in text
        assert '明天下午三点和张三开会: "周会" # not a comment' in text  # one line per field

    def test_none(self) -> None:
        assert render_candidates({"candidates": [], "candidates_total": 0}) == "no candidate turns"


class TestCandidatesToCases:
    def test_is_valid_yaml_with_one_case_per_candidate(self) -> None:
        cases = yaml.safe_load(candidates_to_cases(REPORT))["cases"]
        assert len(cases) == 2
        first = cases[0]
        assert first["id"] == "online-0123456789ab"
        assert first["source_turn_id"] == "0123456789abcdef0123"
        assert first["now"] == "2026-09-24T02:00:00+00:00"
        assert first["tz"] == "Asia/Shanghai"
        assert first["known_issue"] is None
        assert first["turns"] == [
            {
                "user": '明天下午三点和张三开会: "周会"\n# not a comment',
                "expect": {"tools": "TODO", "outcome": "TODO"},
            }
        ]
        assert cases[1]["tz"] == "Europe/Berlin"

    def test_safety_is_guessed_from_the_reasons(self) -> None:
        cases = yaml.safe_load(candidates_to_cases(REPORT))["cases"]
        assert [c["safety"] for c in cases] == [True, False]
        only_write_attempt = {
            "candidates": [{**REPORT["candidates"][1], "reasons": ["read_only_write_attempt"]}]
        }
        assert yaml.safe_load(candidates_to_cases(only_write_attempt))["cases"][0]["safety"] is True
        read_claim = {"candidates": [{**REPORT["candidates"][1], "reasons": ["unverified_read_claim"]}]}
        assert yaml.safe_load(candidates_to_cases(read_claim))["cases"][0]["safety"] is True

    def test_observed_behaviour_is_left_as_a_comment_for_the_reviewer(self) -> None:
        text = candidates_to_cases(REPORT)
        assert "# observed: [prepare_or_create_schedule]" in text
        assert "# observed: claim_replaced" in text

    def test_no_candidates_is_an_empty_case_list(self) -> None:
        assert yaml.safe_load(candidates_to_cases({"candidates": []})) == {"cases": []}


def test_the_report_shows_repaired_tool_calls() -> None:
    text = render_report({**REPORT, "repairs": {"text_tool_call": 2, "natural_date:date": 1}})
    assert row(text, "text_tool_call") == ["text_tool_call", "2", "66.7%"]
    assert row(text, "natural_date:date") == ["natural_date:date", "1", "33.3%"]


def test_usage_is_a_table_with_a_total() -> None:
    from calagent.cli.render import render_usage

    usage = {
        "since": "2026-09-18",
        "rows": [
            {
                "key": "alice",
                "turns": 2,
                "model_calls": 3,
                "prompt_tokens": 900,
                "completion_tokens": 40,
                "cached_tokens": 300,
                "unreported_calls": 0,
            },
            {
                "key": "bob",
                "turns": 1,
                "model_calls": 1,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cached_tokens": 0,
                "unreported_calls": 1,
            },
        ],
        "total": {
            "key": "total",
            "turns": 3,
            "model_calls": 4,
            "prompt_tokens": 900,
            "completion_tokens": 40,
            "cached_tokens": 300,
            "unreported_calls": 1,
        },
    }
    text = render_usage(usage, "user")
    assert "since 2026-09-18" in text
    assert row(text, "alice") == ["alice", "2", "3", "900", "40", "300", "0"]
    assert row(text, "total") == ["total", "3", "4", "900", "40", "300", "1"]
