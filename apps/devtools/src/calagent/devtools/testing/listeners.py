"""A loopback HTTP listener for tests that must know whether anything reached it.

It counts every TCP connection it accepts (before a byte of HTTP is read), records the requests it
answered, and answers each with what the test's `respond` says. Bound to one loopback address
(Linux routes all of 127/8 to lo), so tests can stand several of them on distinct addresses.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


Respond = Callable[[Seen], Answer]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], listener: Listener) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.listener = listener
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.listener.lock:
            self.listener.connections += 1
        super().process_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = Seen(self.command, self.path, dict(self.headers.items()), body)
        listener = self.server.listener
        with listener.lock:
            listener.requests.append(seen)
        answer = listener.respond(seen)
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    # http.server dispatches on `do_<METHOD>`: every method gets the same answer.
    do_GET = do_PUT = do_DELETE = do_POST = do_OPTIONS = do_PROPFIND = do_REPORT = _any  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Listener:
    def __init__(
        self, host: str, respond: Respond | None = None, port: int = 0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.lock = threading.Lock()
        self.connections = 0
        self.requests: list[Seen] = []
        self.server_names: list[str | None] = []  # the TLS SNI each handshake asked for
        self.respond: Respond = respond or (lambda _seen: Answer(200, {}, b"ok"))
        self._server = _Server((host, port), self)
        if tls is not None:
            tls.sni_callback = self._sni
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.host = host
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _sni(self, _sock: ssl.SSLObject, name: str | None, _context: ssl.SSLContext) -> None:
        with self.lock:
            self.server_names.append(name)

    def url(self, path: str = "/") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{path}"

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
