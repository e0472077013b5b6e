"""Tracing: one TracerProvider per process, OTLP export when configured.

With `OTEL_EXPORTER_OTLP_ENDPOINT` unset nothing would receive a recorded span, so spans are sampled
out (`UNEXPORTED`): each still has its trace and span ids, but none records attributes, events or
timings, and the bus carries no trace context between processes (`Bus(telemetry=False)`: no span
and no header per message). The per-turn timeline does not depend on spans
(`calagent.runtime.timeline`). `OTEL_EXPORTER_OTLP_PROTOCOL` picks
grpc or http/protobuf; headers come from `OTEL_EXPORTER_OTLP_HEADERS` as the exporters read them
themselves.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, Sampler

from calagent.runtime.settings import Settings


def _exporter(protocol: str) -> SpanExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter()


# The sampler of a process with no exporter: a span whose parent was sampled elsewhere (a caller's
# traceparent) is still recorded, a new trace is not.
UNEXPORTED: Sampler = ParentBased(ALWAYS_OFF)


def exported(settings: Settings) -> bool:
    """Whether this process's spans go anywhere (an OTLP endpoint is set)."""
    return bool(settings.otlp_endpoint)


def tracer_provider(service: str, settings: Settings) -> TracerProvider:
    """The process's provider: exporting over OTLP when an endpoint is set, else sampling out."""
    resource = Resource.create({"service.name": f"calagent-{service}"})
    if not exported(settings):
        return TracerProvider(resource=resource, sampler=UNEXPORTED)
    provider = TracerProvider(resource=resource)
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    provider.add_span_processor(BatchSpanProcessor(_exporter(protocol)))
    return provider


def setup_tracing(service: str, settings: Settings) -> TracerProvider:
    provider = tracer_provider(service, settings)
    trace.set_tracer_provider(provider)
    return provider


def shutdown_tracing(provider: TracerProvider) -> None:
    # Flushes the batch processor: a SIGTERM loses no finished span.
    provider.shutdown()
