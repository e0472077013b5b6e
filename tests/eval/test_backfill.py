"""Backfill: a skeleton from `calagent report --cases`, once a human fills its TODOs, is a case."""

from __future__ import annotations

import pytest

from calagent.cli.evaluation.cases import CaseError, parse_cases
from calagent.cli.render import candidates_to_cases

pytestmark = pytest.mark.eval

REPORT = {
    "candidates": [
        {
            "turn_id": "0123456789abcdef0123",
            "reasons": ["unverified_create_claim"],
            "tools": [],
            "outcome": "claim_replaced",
            "occurred_at": "2026-09-24T10:00:00+08:00",
            "tz": "Asia/Shanghai",
            "text": '周六下午修轮毂: "快"',
        }
    ]
}


def test_an_unfilled_skeleton_is_refused() -> None:
    with pytest.raises(CaseError, match="TODO"):
        parse_cases(candidates_to_cases(REPORT), "online.yaml", "online")


def test_a_filled_skeleton_loads_as_a_case() -> None:
    skeleton = candidates_to_cases(REPORT)
    filled = skeleton.replace("tools: TODO  # observed: []", "tools: [prepare_or_create_schedule]").replace(
        "outcome: TODO  # observed: claim_replaced", "outcome: created"
    )
    filled += (
        "        model:\n"
        '          - {tool: prepare_or_create_schedule, args: {title: 修轮毂, date: W6+0, time: "14:00"}}\n'
    )
    [case] = parse_cases(filled, "online.yaml", "online")
    assert case.id == "online-0123456789ab"
    assert case.group == "online"
    assert case.safety is True
    assert case.source_turn_id == "0123456789abcdef0123"
    assert case.now == "2026-09-24T10:00:00+08:00"
    turn = case.turns[0]
    assert turn.user == '周六下午修轮毂: "快"'
    assert turn.expect.tools == ["prepare_or_create_schedule"]
    assert turn.expect.outcome == "created"
    assert turn.scripted().rules[0].respond.tool_calls is not None


def test_an_empty_skeleton_is_no_cases() -> None:
    assert parse_cases(candidates_to_cases({"candidates": []}), "online.yaml", "online") == []
