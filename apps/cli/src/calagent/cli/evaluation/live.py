"""The live eval's model endpoint: a pass-through to the configured model.

Setup turns (the calendar a case starts with) and simulated outages are not the model's business,
so their messages, and only those, go to a local scripted server; every other request reaches the
real endpoint byte for byte, streaming included. Routing is by the exact last user message, which
the runner makes unique per case, so cases can run concurrently.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from calagent.cli.evaluation.cases import EventSpec, Turn
from calagent.cli.evaluation.runner import ModelControl, setup_rule
from calagent.scriptedmodel import Rule, Script, ScriptedModelServer
from calagent.scriptedmodel.script import Conversation

_FORWARDED_HEADERS = ("content-type", "accept")


class LiveProxy:
    def __init__(self, upstream_base_url: str, api_key: str | None) -> None:
        self.upstream = upstream_base_url.rstrip("/")
        self.api_key = api_key or "not-needed"
        self.local = ScriptedModelServer(Script(rules=[]))
        self._rules: dict[str, Rule] = {}
        self._lock = threading.Lock()
        self.forwarded = 0
        self.app = self._build()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def route_locally(self, message: str, rule: Rule) -> None:
        with self._lock:
            self._rules[message] = rule
            self.local.set_script(Script(rules=list(self._rules.values())))

    def _is_local(self, body: bytes) -> bool:
        try:
            request = json.loads(body)
        except ValueError:
            return False
        if not isinstance(request, dict):
            return False
        last = Conversation.from_request(request).last_user.strip()
        with self._lock:
            return last in self._rules

    def _build(self) -> FastAPI:
        app = FastAPI()

        @app.api_route("/v1/{path:path}", methods=["GET", "POST"])
        async def forward(path: str, request: Request) -> Response:
            body = await request.body()
            if self._is_local(body):
                base, key = self.local.base_url, "local"
            else:
                base, key = self.upstream, self.api_key
                self.forwarded += 1
            headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED_HEADERS}
            headers["authorization"] = f"Bearer {key}"
            client = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=10.0))
            upstream = await client.send(
                client.build_request(request.method, f"{base}/{path}", content=body, headers=headers),
                stream=True,
            )

            async def close() -> None:
                await upstream.aclose()
                await client.aclose()

            media = upstream.headers.get("content-type")
            return StreamingResponse(
                upstream.aiter_raw(),
                status_code=upstream.status_code,
                media_type=media,
                background=BackgroundTask(close),
            )

        return app

    def start(self) -> str:
        self.local.start()
        # IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted connections only for a TCP socket.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        server = self._server

        def serve() -> None:
            asyncio.run(server.serve(sockets=[sock]))

        self._thread = threading.Thread(target=serve, name="eval-live-proxy", daemon=True)
        self._thread.start()
        while not server.started:
            threading.Event().wait(0.01)
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.local.stop()


class LiveControl(ModelControl):
    def __init__(self, proxy: LiveProxy) -> None:
        self.proxy = proxy

    async def before_setup(self, message: str, spec: EventSpec) -> None:
        self.proxy.route_locally(message, setup_rule(message, spec))

    async def before_turn(self, turn: Turn) -> None:
        if turn.model_down:
            rule: dict[str, Any] = {
                "when": {"user_equals": turn.user},
                "respond": {"error": {"status": 503, "message": "eval: model outage"}},
            }
            self.proxy.route_locally(turn.user.strip(), Rule.model_validate(rule))
