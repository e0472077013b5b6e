"""One trace per turn across processes, exported over OTLP/HTTP to a receiver in this test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from calagent.devtools.processes import free_port
from calagent.scriptedmodel import ScriptedModelServer

from .scripts import create_meeting_script
from .test_up import Up

pytestmark = pytest.mark.e2e


class Receiver:
    """A minimal OTLP/HTTP trace receiver: decodes every export request's protobuf body."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, Any]] = []  # (service.name, a decoded protobuf span)
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    for resource_spans in request.resource_spans:
                        service = next(
                            (
                                a.value.string_value
                                for a in resource_spans.resource.attributes
                                if a.key == "service.name"
                            ),
                            "?",
                        )
                        for scope in resource_spans.scope_spans:
                            receiver.spans.extend((service, span) for span in scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    script = create_meeting_script("W3+1")
    with ScriptedModelServer(script) as server:
        yield server


def test_one_trace_spans_every_service_in_order(tmp_path: Path, model: ScriptedModelServer) -> None:
    with Receiver() as receiver:
        env = {
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "x",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        }
        up = Up(tmp_path / "on", extra=env)
        try:
            up.wait_ready()
            answer = up.call("POST", "/v1/chat", user="traced", body={"message": "下周三下午三点开会"})
            # Turns in a row while the exporter's batches go out: each still creates its event.
            for i in range(15):
                again = up.call("POST", "/v1/chat", user=f"on-{i}", body={"message": "下周三下午三点开会"})
                assert again["outcome"] == "created"
        finally:
            up.stop()  # SIGTERM: every process flushes its finished spans before exiting
        spans = list(receiver.spans)

    assert answer["outcome"] == "created"
    model_spans = [(svc, s) for svc, s in spans if s.name == "model.request"]
    assert model_spans
    trace_id = model_spans[0][1].trace_id
    in_trace = [(svc, s) for svc, s in spans if s.trace_id == trace_id]
    services = {svc for svc, _ in in_trace}
    assert {"calagent-gateway", "calagent-agent", "calagent-commands", "calagent-timeparse"} <= services, (
        services
    )
    names = [s.name for _, s in sorted(in_trace, key=lambda pair: pair[1].start_time_unix_nano)]
    for expected in (
        "gateway.receive",
        "bus.wait",
        "context.build",
        "model.request",
        "tool.prepare_or_create_schedule",
    ):
        assert expected in names, names
    assert names.index("model.request") < names.index("tool.prepare_or_create_schedule")
    assert names.index("context.build") < names.index("model.request")
    ttft = next(s for _, s in in_trace if s.name == "model.ttft")
    generation = next(s for _, s in in_trace if s.name == "model.generation")
    assert ttft.start_time_unix_nano <= generation.start_time_unix_nano
    request_span = model_spans[0][1]
    keys = {a.key for a in request_span.attributes}
    assert {"gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} <= keys
