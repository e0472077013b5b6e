"""Latency segments of one turn, recorded twice: as OpenTelemetry spans (for Jaeger) and as plain
segments (for the eval recorder's timeline, which must work without any tracing backend).

Offsets are epoch milliseconds measured with `time.time()`: this is latency measurement across
processes on possibly different hosts, never business time, so it does not go through `Clock`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from calagent.contracts.turns import Segment


def epoch_ms() -> float:
    return time.time() * 1000.0


class Timeline:
    def __init__(self, origin_ms: float, tracer: trace.Tracer) -> None:
        self.origin_ms = origin_ms
        self.tracer = tracer
        self.segments: list[Segment] = []

    def add(self, name: str, start_ms: float, end_ms: float) -> None:
        self.segments.append(
            Segment(
                name=name,
                start_ms=round(start_ms - self.origin_ms, 3),
                ms=round(max(0.0, end_ms - start_ms), 3),
            )
        )

    def add_span(
        self, name: str, start_ms: float, end_ms: float, attributes: Mapping[str, Any] | None = None
    ) -> None:
        """Record a segment that already happened, as a segment and as a span with its real times."""
        self.add(name, start_ms, end_ms)
        span = self.tracer.start_span(name, start_time=int(start_ms * 1e6), attributes=dict(attributes or {}))
        span.end(end_time=int(end_ms * 1e6))

    @contextmanager
    def segment(self, name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span]:
        start = epoch_ms()
        with self.tracer.start_as_current_span(name, attributes=dict(attributes or {})) as span:
            try:
                yield span
            finally:
                self.add(name, start, epoch_ms())
