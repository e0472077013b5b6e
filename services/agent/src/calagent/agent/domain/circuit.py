"""When a model endpoint is treated as down (contract §17): a circuit breaker, pure.

Closed: every call goes through; `failures_to_open` failed attempts in a row open it. Open: no call
goes through for `open_for_s`, and callers are told how long to wait. Then half-open: exactly one
call (the probe) goes through; its success closes the circuit, its failure opens it again. Time is
passed in (seconds on any monotonic scale), so the rule can be tested without waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CircuitState = Literal["closed", "open", "half_open"]


@dataclass
class Circuit:
    failures_to_open: int = 5
    open_for_s: float = 30.0
    state: CircuitState = "closed"
    failures: int = 0
    opened_at: float = 0.0
    probing: bool = False

    def admit(self, now: float) -> float | None:
        """None when a call may go out now; else the seconds until one may."""
        if self.state == "open":
            wait = self.opened_at + self.open_for_s - now
            if wait > 0:
                return wait
            self.state = "half_open"
            self.probing = False
        if self.state == "half_open":
            if self.probing:
                # One probe at a time: the others are refused until it has answered.
                return max(1.0, self.open_for_s / 10)
            self.probing = True
        return None

    def succeeded(self) -> None:
        self.state = "closed"
        self.failures = 0
        self.probing = False

    def failed(self, now: float) -> None:
        self.failures += 1
        if self.state == "half_open" or self.failures >= self.failures_to_open:
            self.state = "open"
            self.opened_at = now
            self.probing = False

    def abandoned(self) -> None:
        """The admitted call never reached the endpoint (no time left, cancelled): a half-open
        circuit lets the next caller probe instead."""
        if self.state == "half_open":
            self.probing = False

    @property
    def is_open(self) -> bool:
        return self.state == "open"
