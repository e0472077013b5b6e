"""A process with no exporter records no span and traces nothing on the bus; one with an exporter
records every span and carries trace context in every message."""

from __future__ import annotations

from pathlib import Path

import pytest
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from opentelemetry import propagate

from calagent.runtime.bus import Bus
from calagent.runtime.settings import Settings
from calagent.runtime.telemetry import exported, tracer_provider

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _settings_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CALAGENT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)


def test_without_an_exporter_spans_are_not_recorded_but_carry_trace_context() -> None:
    tracer = tracer_provider("agent", Settings()).get_tracer("test")
    with tracer.start_as_current_span("turn") as span:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
    assert not span.is_recording()
    context = span.get_span_context()
    assert context.is_valid
    assert f"{context.trace_id:032x}" in carrier["traceparent"]


def test_without_an_exporter_a_span_under_a_sampled_parent_is_recorded() -> None:
    tracer = tracer_provider("agent", Settings()).get_tracer("test")
    sampled = propagate.extract({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    span = tracer.start_span("process", context=sampled)
    assert span.is_recording()
    assert span.get_span_context().trace_id == 0x0AF7651916CD43DD8448EB211C80319C


def test_with_an_exporter_every_span_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    provider = tracer_provider("agent", Settings())
    # Not ended: nothing is queued for the (absent) collector.
    span = provider.get_tracer("test").start_span("turn")
    assert span.is_recording()
    provider.shutdown()


def test_a_process_whose_spans_go_nowhere_traces_no_message_on_the_bus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not exported(Settings())
    quiet = Bus("nats://unused", "agent", telemetry=exported(Settings()))
    assert not any(isinstance(m, NatsTelemetryMiddleware) for m in quiet._broker.middlewares)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert exported(Settings())
    traced = Bus("nats://unused", "agent", telemetry=exported(Settings()))
    assert any(isinstance(m, NatsTelemetryMiddleware) for m in traced._broker.middlewares)
