"""The report over recorded turns and the choice of turns worth turning into eval cases.

Pure: the repository hands in `TurnFacts`, this module counts and ranks. Nothing here is ever
consulted by a live turn, so a mistake in these statistics can mislead a reader but never change
user data.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from calagent.evalrec.domain.stats import mean, percentile, summarize

# A turn slower than this is a candidate whatever the distribution says: the seed's users waited
# 14 s, and a p95 taken over a slow population would call that normal.
SLOW_ABSOLUTE_MS = 10_000.0

# Reasons in the order a reader should look at them: safety failures first (a write or a claim the
# user must not be misled by), then failures the user saw, then mere slowness.
REASON_ORDER: tuple[str, ...] = (
    "read_only_write_attempt",
    "unverified_create_claim",
    "unverified_read_claim",
    "tool_error",
    "model_unavailable",
    "held",
    "slow",
)
SAFETY_REASONS = frozenset({"read_only_write_attempt", "unverified_create_claim", "unverified_read_claim"})


@dataclass(frozen=True)
class ToolCallFact:
    name: str
    result: str


@dataclass(frozen=True)
class SegmentFact:
    name: str
    start_ms: float
    ms: float


@dataclass(frozen=True)
class TurnFacts:
    turn_id: str
    text: str
    outcome: str
    intent: str
    occurred_at: datetime
    tz: str
    flags: tuple[str, ...] = ()
    model_calls: int = 0
    # The user's wait, from the gateway's receipt of the request; None when the record did not know it.
    total_ms: float | None = None
    cold_start: bool = False
    tool_calls: tuple[ToolCallFact, ...] = ()
    segments: tuple[SegmentFact, ...] = field(default=())
    replaced_reply: str | None = None
    error: str | None = None
    repairs: tuple[str, ...] = ()


def measured_total(total_ms: float | None) -> float | None:
    """The user's wait as the record measured it (from the gateway's receipt of the request); a
    record without the gateway's stamps says 0, which is unknown, not instant."""
    return total_ms if total_ms is not None and total_ms > 0 else None


def has_tool_error(turn: TurnFacts) -> bool:
    return "tool_error" in turn.flags or any(call.result.startswith("error") for call in turn.tool_calls)


def candidate_reasons(turn: TurnFacts, slow_above_ms: float | None) -> list[str]:
    """Why this turn deserves a human look, most serious first; empty when it does not."""
    reasons: set[str] = set()
    for flag in ("read_only_write_attempt", "unverified_create_claim", "unverified_read_claim"):
        if flag in turn.flags:
            reasons.add(flag)
    if has_tool_error(turn):
        reasons.add("tool_error")
    if "model_unavailable" in turn.flags or turn.outcome == "model_unavailable":
        reasons.add("model_unavailable")
    if "held" in turn.flags or turn.outcome == "held":
        reasons.add("held")
    if turn.total_ms is not None and (
        turn.total_ms > SLOW_ABSOLUTE_MS or (slow_above_ms is not None and turn.total_ms > slow_above_ms)
    ):
        reasons.add("slow")
    return [reason for reason in REASON_ORDER if reason in reasons]


def candidate_entry(turn: TurnFacts, reasons: Sequence[str]) -> dict[str, Any]:
    return {
        "turn_id": turn.turn_id,
        "reasons": list(reasons),
        "safety": any(reason in SAFETY_REASONS for reason in reasons),
        "text": turn.text,
        "tools": [call.name for call in turn.tool_calls],
        "tool_calls": [{"name": call.name, "result": call.result} for call in turn.tool_calls],
        "outcome": turn.outcome,
        "intent": turn.intent,
        "occurred_at": turn.occurred_at.isoformat(),
        "tz": turn.tz,
        "total_ms": turn.total_ms,
        "replaced_reply": turn.replaced_reply,
        "error": turn.error,
        "repairs": list(turn.repairs),
    }


def select_candidates(turns: Sequence[TurnFacts], *, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The turns worth an eval case, most serious and then newest first, and how many there were."""
    totals = [t.total_ms for t in turns if t.total_ms is not None]
    slow_above = percentile(totals, 95)
    found: list[tuple[int, float, TurnFacts, list[str]]] = []
    for turn in turns:
        reasons = candidate_reasons(turn, slow_above)
        if reasons:
            found.append((REASON_ORDER.index(reasons[0]), -turn.occurred_at.timestamp(), turn, reasons))
    found.sort(key=lambda item: (item[0], item[1], item[2].turn_id))
    entries = [candidate_entry(turn, reasons) for _, _, turn, reasons in found[: max(limit, 0)]]
    return entries, len(found)


def _counts(values: Iterable[str]) -> dict[str, int]:
    # Most frequent first; ties by name so two reports over the same rows read the same.
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def segment_summaries(turns: Sequence[TurnFacts]) -> dict[str, dict[str, Any]]:
    """p50/p95 of each segment name over every occurrence, listed in the order segments happen."""
    durations: dict[str, list[float]] = defaultdict(list)
    starts: dict[str, list[float]] = defaultdict(list)
    for turn in turns:
        for segment in turn.segments:
            durations[segment.name].append(segment.ms)
            starts[segment.name].append(segment.start_ms)
    order = sorted(durations, key=lambda name: (percentile(starts[name], 50) or 0.0, name))
    return {name: summarize(durations[name]) for name in order}


def build_report(turns: Sequence[TurnFacts], *, candidates: bool = False, limit: int = 200) -> dict[str, Any]:
    totals_all = [t.total_ms for t in turns if t.total_ms is not None]
    totals_cold = [t.total_ms for t in turns if t.total_ms is not None and t.cold_start]
    totals_warm = [t.total_ms for t in turns if t.total_ms is not None and not t.cold_start]
    calls_by_outcome: dict[str, list[float]] = defaultdict(list)
    for turn in turns:
        calls_by_outcome[turn.outcome].append(float(turn.model_calls))
    mean_calls = mean(float(t.model_calls) for t in turns)
    occurred = sorted(t.occurred_at for t in turns)

    report: dict[str, Any] = {
        "turns": len(turns),
        "window": {
            "first": occurred[0].isoformat() if occurred else None,
            "last": occurred[-1].isoformat() if occurred else None,
        },
        "outcomes": _counts(t.outcome for t in turns),
        "intents": _counts(t.intent for t in turns),
        "flags": _counts(flag for t in turns for flag in t.flags),
        # What was repaired in the model's tool calls (contract §17), by kind.
        "repairs": _counts(repair for t in turns for repair in t.repairs),
        "segments": segment_summaries(turns),
        "total_ms": {
            "all": summarize(totals_all),
            "cold": summarize(totals_cold),
            "warm": summarize(totals_warm),
        },
        "model_calls": {
            "mean": None if mean_calls is None else round(mean_calls, 3),
            "by_outcome": {
                outcome: round(sum(values) / len(values), 3)
                for outcome, values in sorted(calls_by_outcome.items())
            },
        },
    }
    if candidates:
        entries, total = select_candidates(turns, limit=limit)
        report["candidates"] = entries
        report["candidates_total"] = total
    return report
