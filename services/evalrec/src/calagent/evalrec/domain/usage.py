"""Tokens summed per day, user or model (contract §17); pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

from calagent.contracts.evalrec import UsageRow


@dataclass(frozen=True)
class UsageFact:
    day: date
    user_id: str
    model: str
    turns: int
    model_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    unreported_calls: int


def first_day(today: date, days: int) -> date:
    """The first of the last `days` days, today included."""
    return today - timedelta(days=days - 1)


def _row(key: str, facts: Sequence[UsageFact]) -> UsageRow:
    return UsageRow(
        key=key,
        # A turn that called two models counts once per model: turns are summed per model only.
        turns=sum(f.turns for f in facts),
        model_calls=sum(f.model_calls for f in facts),
        prompt_tokens=sum(f.prompt_tokens for f in facts),
        completion_tokens=sum(f.completion_tokens for f in facts),
        cached_tokens=sum(f.cached_tokens for f in facts),
        unreported_calls=sum(f.unreported_calls for f in facts),
    )


def summarize_usage(
    facts: Sequence[UsageFact], by: Literal["day", "user", "model"]
) -> tuple[list[UsageRow], UsageRow]:
    groups: dict[str, list[UsageFact]] = {}
    for fact in facts:
        key = fact.day.isoformat() if by == "day" else fact.user_id if by == "user" else fact.model
        groups.setdefault(key, []).append(fact)
    rows = [_row(key, groups[key]) for key in sorted(groups)]
    return rows, _row("total", facts)
