"""Tracing: one TracerProvider per process, OTLP export when configured.

With `OTEL_EXPORTER_OTLP_ENDPOINT` unset spans are still produced (the per-turn timeline does not
depend on an exporter). `OTEL_EXPORTER_OTLP_PROTOCOL` picks grpc or http/protobuf; headers come from
`OTEL_EXPORTER_OTLP_HEADERS` as the exporters read them themselves.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from calagent.runtime.settings import Settings


def _exporter(protocol: str) -> SpanExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter()


def setup_tracing(service: str, settings: Settings) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": f"calagent-{service}"}))
    if settings.otlp_endpoint:
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        provider.add_span_processor(BatchSpanProcessor(_exporter(protocol)))
    trace.set_tracer_provider(provider)
    return provider


def shutdown_tracing(provider: TracerProvider) -> None:
    # Flushes the batch processor: a SIGTERM loses no finished span.
    provider.shutdown()
