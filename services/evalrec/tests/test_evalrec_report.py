"""The report over a few hundred synthetic turns, checked against independently computed numbers."""

from __future__ import annotations

import asyncio
import random
import statistics
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from calagent.contracts import wire
from calagent.contracts.evalrec import ReportRequest
from calagent.contracts.turns import Segment, ToolCallOut, TurnRecord

from .conftest import RECORDED_AT, Recorder, make_record

pytestmark = pytest.mark.integration

N_TURNS = 300
OUTCOMES = ("created", "queried", "answered", "held", "needs_date", "claim_replaced", "model_unavailable")
INTENT_OF = {
    "created": "schedule.create",
    "queried": "schedule.query_range",
    "answered": "general.chat",
    "held": "schedule.create",
    "needs_date": "schedule.create",
    "claim_replaced": "general.chat",
    "model_unavailable": "general.chat",
}


def synthetic_turns() -> list[TurnRecord]:
    rng = random.Random(20260924)
    records: list[TurnRecord] = []
    for i in range(N_TURNS):
        outcome = rng.choice(OUTCOMES)
        flags: list[str] = []
        if outcome == "claim_replaced":
            flags.append(rng.choice(["unverified_create_claim", "unverified_read_claim"]))
        if outcome == "held":
            flags.append("held")
        if rng.random() < 0.05:
            flags.append("read_only_write_attempt")
        if rng.random() < 0.2:
            flags.append("fast_path")
        tool_result = "error:invalid_symbol" if rng.random() < 0.07 else "ok"
        context_ms = round(rng.uniform(2, 40), 1)
        model_ms = round(rng.uniform(300, 9000), 1)
        agent_total = round(context_ms + model_ms + rng.uniform(5, 50), 1)
        if rng.random() < 0.02:
            agent_total += 12_000  # a few turns far slower than the rest
        # Most turns came through the gateway, whose receive segment the record carries.
        receive = (
            (Segment(name="gateway.receive", start_ms=0.0, ms=round(rng.uniform(1, 9), 1)),) if i % 3 else ()
        )
        records.append(
            make_record(
                f"rep-{i:03d}",
                user_id=f"user-{i % 7}",
                occurred_at=RECORDED_AT + timedelta(seconds=i),
                outcome=outcome,
                intent=INTENT_OF[outcome],
                flags=tuple(flags),
                model_calls=rng.choice((0, 1, 1, 2, 3)),
                total_ms=agent_total,
                cold_start=rng.random() < 0.15,
                tool_calls=(ToolCallOut(name="query_schedule_range", result=tool_result),),
                segments=(
                    *receive,
                    Segment(name="context.build", start_ms=10.0, ms=context_ms),
                    Segment(name="model.request", start_ms=10.0 + context_ms, ms=model_ms),
                ),
            )
        )
    return records


SAFETY_OR_HELD = {"unverified_create_claim", "unverified_read_claim", "read_only_write_attempt", "held"}


def p50_p95(values: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return round(cuts[49], 1), round(cuts[94], 1)


def expected_summary(values: list[float]) -> dict[str, Any]:
    p50, p95 = p50_p95(values)
    return {"count": len(values), "p50": p50, "p95": p95}


@pytest.fixture(scope="module")
async def report_data(recorder: Recorder) -> list[TurnRecord]:
    records = synthetic_turns()
    await asyncio.gather(*(recorder.client.js_publish(wire.TURN_RECORDED, r) for r in records))
    await recorder.drained(within_s=60)
    return records


async def fetch_report(recorder: Recorder, *, candidates: bool, limit: int = 200) -> dict[str, Any]:
    result = await recorder.client.request(
        wire.EVALREC_REPORT, ReportRequest(candidates=candidates, limit=limit), timeout=30
    )
    return result.report


async def test_report_counts_and_latencies(recorder: Recorder, report_data: list[TurnRecord]) -> None:
    records = report_data
    report = await fetch_report(recorder, candidates=False)
    total = {r.envelope.turn_id: r.total_ms for r in records}

    assert report["turns"] == N_TURNS
    assert report["outcomes"] == dict(Counter(r.outcome for r in records))
    assert report["intents"] == dict(Counter(r.intent for r in records))
    assert report["flags"] == dict(Counter(f for r in records for f in r.flags))
    assert "candidates" not in report

    assert report["segments"]["context.build"] == expected_summary(
        [s.ms for r in records for s in r.segments if s.name == "context.build"]
    )
    assert report["segments"]["model.request"] == expected_summary(
        [s.ms for r in records for s in r.segments if s.name == "model.request"]
    )
    assert report["segments"]["gateway.receive"] == expected_summary(
        [s.ms for r in records for s in r.segments if s.name == "gateway.receive"]
    )
    assert list(report["segments"]) == ["gateway.receive", "context.build", "model.request"]

    cold = [total[r.envelope.turn_id] for r in records if r.cold_start]
    warm = [total[r.envelope.turn_id] for r in records if not r.cold_start]
    assert report["total_ms"]["cold"] == expected_summary(cold)
    assert report["total_ms"]["warm"] == expected_summary(warm)
    assert report["total_ms"]["all"] == expected_summary(cold + warm)

    assert report["model_calls"]["mean"] == round(statistics.fmean(r.model_calls for r in records), 3)
    for outcome, value in report["model_calls"]["by_outcome"].items():
        assert value == round(statistics.fmean(r.model_calls for r in records if r.outcome == outcome), 3)


async def test_candidates_are_the_turns_worth_a_case(
    recorder: Recorder, report_data: list[TurnRecord]
) -> None:
    records = report_data
    total = {r.envelope.turn_id: r.total_ms for r in records}
    _, p95 = p50_p95(list(total.values()))
    worth = {
        r.envelope.turn_id
        for r in records
        if set(r.flags) & SAFETY_OR_HELD
        or r.outcome in ("held", "model_unavailable")
        or any(c.result.startswith("error") for c in r.tool_calls)
        # p95 rounded to 0.1 ms: no synthetic total sits that close to it
        or total[r.envelope.turn_id] > p95
        or total[r.envelope.turn_id] > 10_000
    }

    report = await fetch_report(recorder, candidates=True, limit=1000)
    assert report["candidates_total"] == len(worth)
    assert {c["turn_id"] for c in report["candidates"]} == worth

    by_id = {r.envelope.turn_id: r for r in records}
    for candidate in report["candidates"]:
        source = by_id[candidate["turn_id"]]
        assert candidate["text"] == source.text
        assert candidate["outcome"] == source.outcome
        assert candidate["tools"] == ["query_schedule_range"]
        assert candidate["occurred_at"] == source.envelope.occurred_at.isoformat()
        assert candidate["reasons"]

    # Safety failures lead the list, whatever their age.
    safety = [c["safety"] for c in report["candidates"]]
    assert safety == sorted(safety, reverse=True)

    first_five = await fetch_report(recorder, candidates=True, limit=5)
    assert first_five["candidates_total"] == len(worth)
    assert [c["turn_id"] for c in first_five["candidates"]] == [
        c["turn_id"] for c in report["candidates"][:5]
    ]
