"""Provider faults (contract §17): retries with backoff that honours `Retry-After`, inside the
turn's time budget; a fallback endpoint when the primary keeps failing; a circuit per endpoint so a
dead endpoint is not waited for on every turn.

A retry only asks the model again: tools run after a whole response arrived, so nothing the turn
wrote is written again because of a retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from calagent.agent.adapters.model import DeltaSink, ModelClient, ModelResponse, ModelUnavailable
from calagent.agent.domain.circuit import Circuit

log = logging.getLogger("calagent.agent.failover")

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class ModelRetryPolicy:
    attempts: int = 3  # per endpoint and model call
    backoff_s: float = 0.5  # doubled after each failed attempt
    backoff_cap_s: float = 8.0
    # A call is not started with less than this left of the turn's budget.
    min_attempt_s: float = 0.5

    def backoff(self, failed: int) -> float:
        return min(self.backoff_cap_s, self.backoff_s * 2.0 ** max(failed - 1, 0))


@dataclass
class Endpoint:
    client: ModelClient
    circuit: Circuit


class FailoverModel:
    """A `ModelClient` over one or more endpoints, tried in order."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        policy: ModelRetryPolicy = ModelRetryPolicy(),
        *,
        default_budget_s: float = 60.0,
        monotonic: Callable[[], float] | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not endpoints:
            raise ValueError("a failover model needs at least one endpoint")
        self.endpoints = list(endpoints)
        self.model = self.endpoints[0].client.model
        self.policy = policy
        self.default_budget_s = default_budget_s
        self._monotonic = monotonic
        self._sleep = sleep

    def now(self) -> float:
        return self._monotonic() if self._monotonic is not None else asyncio.get_running_loop().time()

    async def close(self) -> None:
        for endpoint in self.endpoints:
            close = getattr(endpoint.client, "close", None)
            if close is not None:
                await close()

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_delta: DeltaSink | None,
        *,
        budget_s: float | None = None,
    ) -> ModelResponse:
        deadline = self.now() + (self.default_budget_s if budget_s is None else budget_s)
        failure: ModelUnavailable | None = None
        waits: list[float] = []
        failed_attempts = 0
        for endpoint in self.endpoints:
            wait = endpoint.circuit.admit(self.now())
            if wait is not None:
                waits.append(wait)
                continue
            try:
                response, failed = await self._attempts(endpoint, messages, tools, on_delta, deadline)
            except _Exhausted as exc:
                failure = exc.last
                failed_attempts += exc.failed
                continue
            finally:
                endpoint.circuit.abandoned()
            response.failed_attempts = failed_attempts + failed
            return response
        if failure is None:
            # Every endpoint's circuit is open: answered at once, nothing was called.
            raise ModelUnavailable(
                "the model endpoint is treated as down for a short while",
                circuit_open=True,
                retry_after_s=min(waits),
            )
        raise failure

    async def _attempts(
        self,
        endpoint: Endpoint,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_delta: DeltaSink | None,
        deadline: float,
    ) -> tuple[ModelResponse, int]:
        failed = 0
        last: ModelUnavailable | None = None
        streamed = False

        async def sink(delta: str) -> None:
            nonlocal streamed
            streamed = True
            if on_delta is not None:
                await on_delta(delta)

        while failed < self.policy.attempts:
            left = deadline - self.now()
            if left < self.policy.min_attempt_s:
                break
            # Once an attempt has streamed text that was then cut off, later attempts stream
            # nothing: the client would see the text twice; `turn.done` carries the whole reply.
            live = sink if on_delta is not None and not streamed else None
            try:
                response = await endpoint.client.complete(messages, tools, live, budget_s=left)
            except ModelUnavailable as exc:
                failed += 1
                last = exc
                if exc.retryable:
                    endpoint.circuit.failed(self.now())
                log.warning("model %s attempt %d failed: %s", endpoint.client.model, failed, exc)
                if not exc.retryable or endpoint.circuit.is_open:
                    break
                wait = max(self.policy.backoff(failed), exc.retry_after_s or 0.0)
                if self.now() + wait + self.policy.min_attempt_s > deadline:
                    # Told to wait past the turn's budget: the next endpoint, or the user, is told now.
                    break
                await self._sleep(wait)
                continue
            endpoint.circuit.succeeded()
            return response, failed
        raise _Exhausted(
            last or ModelUnavailable("no time left in the turn for the model", retryable=True), failed
        )


class _Exhausted(Exception):
    def __init__(self, last: ModelUnavailable, failed: int) -> None:
        super().__init__(str(last))
        self.last = last
        self.failed = failed
