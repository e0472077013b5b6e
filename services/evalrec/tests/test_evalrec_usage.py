"""Tokens summed per day, user or model, and repairs counted in the report: pure."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from calagent.evalrec.domain.report import TurnFacts, build_report
from calagent.evalrec.domain.usage import UsageFact, first_day, summarize_usage

pytestmark = pytest.mark.unit


def fact(day: int, user: str, model: str, prompt: int, unreported: int = 0) -> UsageFact:
    return UsageFact(
        day=date(2026, 9, day),
        user_id=user,
        model=model,
        turns=1,
        model_calls=2,
        prompt_tokens=prompt,
        completion_tokens=10,
        cached_tokens=5,
        unreported_calls=unreported,
    )


FACTS = [fact(23, "a", "qwen-max", 100), fact(24, "a", "qwen-plus", 50, 1), fact(24, "b", "qwen-max", 7)]


def test_the_last_seven_days_include_today() -> None:
    assert first_day(date(2026, 9, 24), 7) == date(2026, 9, 18)
    assert first_day(date(2026, 3, 1), 1) == date(2026, 3, 1)


@pytest.mark.parametrize(
    ("by", "keys", "prompts"),
    [
        ("day", ["2026-09-23", "2026-09-24"], [100, 57]),
        ("user", ["a", "b"], [150, 7]),
        ("model", ["qwen-max", "qwen-plus"], [107, 50]),
    ],
)
def test_usage_is_summed_by_the_asked_key(by: str, keys: list[str], prompts: list[int]) -> None:
    rows, total = summarize_usage(FACTS, by)  # type: ignore[arg-type]
    assert [r.key for r in rows] == keys
    assert [r.prompt_tokens for r in rows] == prompts
    assert (total.prompt_tokens, total.completion_tokens, total.cached_tokens) == (157, 30, 15)
    assert (total.model_calls, total.unreported_calls) == (6, 1)


def test_the_report_counts_repairs_by_kind() -> None:
    at = datetime(2026, 9, 24, tzinfo=UTC)
    turns = [
        TurnFacts(
            "t1", "x", "created", "schedule.create", at, "UTC", repairs=("text_tool_call", "almost_json")
        ),
        TurnFacts("t2", "y", "created", "schedule.create", at, "UTC", repairs=("text_tool_call",)),
        TurnFacts("t3", "z", "answered", "general.chat", at, "UTC"),
    ]
    assert build_report(turns)["repairs"] == {"text_tool_call": 2, "almost_json": 1}
