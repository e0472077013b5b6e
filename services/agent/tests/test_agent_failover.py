"""Provider faults over a hand-written endpoint and a fake clock: retries honour `Retry-After`
inside the budget, the fallback answers when the primary keeps failing, the circuit opens and
closes by itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from calagent.agent.adapters.failover import Endpoint, FailoverModel, ModelRetryPolicy
from calagent.agent.adapters.model import DeltaSink, ModelResponse, ModelUnavailable
from calagent.agent.domain.circuit import Circuit

pytestmark = pytest.mark.unit


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class ScriptedEndpoint:
    """Answers from a list: an exception is raised, anything else returns a response."""

    def __init__(self, model: str, outcomes: list[ModelUnavailable | str]) -> None:
        self.model = model
        self.outcomes = outcomes
        self.calls = 0
        self.budgets: list[float | None] = []

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_delta: DeltaSink | None,
        *,
        budget_s: float | None = None,
    ) -> ModelResponse:
        self.calls += 1
        self.budgets.append(budget_s)
        outcome = self.outcomes.pop(0) if self.outcomes else "ok"
        if isinstance(outcome, ModelUnavailable):
            raise outcome
        return ModelResponse(
            text=outcome, tool_calls=[], start_ms=0, first_token_ms=0, end_ms=0, model=self.model
        )


def busy(after: float | None = None) -> ModelUnavailable:
    return ModelUnavailable("429", retryable=True, retry_after_s=after)


def model(
    time: FakeTime, *endpoints: ScriptedEndpoint, failures: int = 5, open_for: float = 30.0
) -> FailoverModel:
    return FailoverModel(
        [Endpoint(e, Circuit(failures, open_for)) for e in endpoints],
        ModelRetryPolicy(attempts=3, backoff_s=0.5),
        monotonic=time.monotonic,
        sleep=time.sleep,
    )


async def test_a_429_is_retried_after_the_time_the_endpoint_asked_for() -> None:
    time = FakeTime()
    primary = ScriptedEndpoint("p", [busy(after=2.0), "ok"])
    response = await model(time, primary).complete([], [], None, budget_s=30)
    assert response.text == "ok"
    assert primary.calls == 2
    assert time.slept == [2.0]
    assert response.failed_attempts == 1


async def test_without_retry_after_the_backoff_doubles() -> None:
    time = FakeTime()
    primary = ScriptedEndpoint("p", [busy(), busy(), "ok"])
    await model(time, primary).complete([], [], None, budget_s=30)
    assert time.slept == [0.5, 1.0]


async def test_a_retry_after_past_the_budget_is_not_waited_for() -> None:
    time = FakeTime()
    primary = ScriptedEndpoint("p", [busy(after=60.0), "ok"])
    with pytest.raises(ModelUnavailable):
        await model(time, primary).complete([], [], None, budget_s=10)
    assert primary.calls == 1
    assert time.slept == []


async def test_each_attempt_gets_only_what_is_left_of_the_budget() -> None:
    time = FakeTime()
    primary = ScriptedEndpoint("p", [busy(after=3.0), "ok"])
    await model(time, primary).complete([], [], None, budget_s=10)
    assert primary.budgets == [10.0, 7.0]


async def test_the_fallback_answers_when_the_primary_keeps_failing() -> None:
    time = FakeTime()
    primary = ScriptedEndpoint("p", [busy(), busy(), busy()])
    fallback = ScriptedEndpoint("f", ["from fallback"])
    response = await model(time, primary, fallback).complete([], [], None, budget_s=30)
    assert (primary.calls, fallback.calls) == (3, 1)
    assert response.model == "f"
    assert response.failed_attempts == 3


async def test_a_refused_request_is_not_retried_but_the_fallback_is_tried() -> None:
    time = FakeTime()
    primary = ScriptedEndpoint("p", [ModelUnavailable("404 no such model", retryable=False)])
    fallback = ScriptedEndpoint("f", ["ok"])
    response = await model(time, primary, fallback).complete([], [], None, budget_s=30)
    assert (primary.calls, fallback.calls) == (1, 1)
    assert response.model == "f"


async def test_the_circuit_opens_answers_at_once_and_closes_after_a_probe() -> None:
    time = FakeTime()
    primary = ScriptedEndpoint("p", [busy()] * 5)
    client = model(time, primary, failures=5, open_for=30.0)
    for _ in range(2):
        with pytest.raises(ModelUnavailable) as failed:
            await client.complete([], [], None, budget_s=30)
        assert not failed.value.circuit_open
    assert primary.calls == 5  # 3 attempts, then 2 more: the fifth failure opened the circuit

    with pytest.raises(ModelUnavailable) as refused:
        await client.complete([], [], None, budget_s=30)
    assert refused.value.circuit_open
    assert refused.value.retry_after_s is not None and 0 < refused.value.retry_after_s <= 30
    assert primary.calls == 5  # not called while open

    time.now += 31  # half-open: one probe goes out, succeeds, the circuit closes
    assert (await client.complete([], [], None, budget_s=30)).text == "ok"
    assert (await client.complete([], [], None, budget_s=30)).text == "ok"
    assert primary.calls == 7


async def test_a_failed_probe_opens_the_circuit_again_without_retrying() -> None:
    time = FakeTime()
    primary = ScriptedEndpoint("p", [busy()] * 6)
    client = model(time, primary, failures=3, open_for=10.0)
    with pytest.raises(ModelUnavailable):
        await client.complete([], [], None, budget_s=30)
    time.now += 11
    with pytest.raises(ModelUnavailable) as probe:
        await client.complete([], [], None, budget_s=30)
    assert not probe.value.circuit_open
    assert primary.calls == 4  # the probe alone, no retries in half-open
    with pytest.raises(ModelUnavailable) as refused:
        await client.complete([], [], None, budget_s=30)
    assert refused.value.circuit_open


def test_a_half_open_circuit_lets_one_probe_through_at_a_time() -> None:
    circuit = Circuit(failures_to_open=1, open_for_s=5.0)
    circuit.failed(0.0)
    assert circuit.admit(1.0) is not None
    assert circuit.admit(6.0) is None  # the probe
    assert circuit.admit(6.1) is not None  # a second caller waits for the probe's answer
    circuit.abandoned()
    assert circuit.admit(6.2) is None


class CutOffEndpoint(ScriptedEndpoint):
    """Streams a piece of text, then fails; the next attempt answers."""

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_delta: DeltaSink | None,
        *,
        budget_s: float | None = None,
    ) -> ModelResponse:
        self.calls += 1
        if on_delta is not None:
            await on_delta("好的，")
        if self.calls == 1:
            raise busy()
        return ModelResponse(text="好的，已记下。", tool_calls=[], start_ms=0, first_token_ms=0, end_ms=0)


async def test_text_streamed_before_a_failure_is_not_streamed_again() -> None:
    time = FakeTime()
    endpoint = CutOffEndpoint("p", [])
    seen: list[str] = []

    async def on_delta(delta: str) -> None:
        seen.append(delta)

    response = await model(time, endpoint).complete([], [], on_delta, budget_s=30)
    assert response.text == "好的，已记下。"
    assert seen == ["好的，"]
    assert endpoint.calls == 2
