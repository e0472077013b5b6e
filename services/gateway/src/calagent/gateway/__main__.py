"""`python -m calagent.gateway`: uvicorn on CALAGENT_HTTP_HOST (default 127.0.0.1) and the port
from settings. Uvicorn turns SIGTERM/SIGINT into a graceful stop: it stops accepting, lets open
requests finish (bounded), then runs the lifespan shutdown that closes the bus."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys

import uvicorn

from calagent.gateway.app import create_app
from calagent.gateway.feeds import RedactFeedSecrets
from calagent.runtime.clock import clock_from_env
from calagent.runtime.service import configure_logging
from calagent.runtime.settings import load_settings
from calagent.runtime.telemetry import setup_tracing, shutdown_tracing

GRACEFUL_SHUTDOWN_S = 15


def _exit_normally(_signum: int, _frame: object) -> None:
    sys.exit(0)


def _shared_socket(host: str, port: int) -> socket.socket:
    """A listening socket with SO_REUSEPORT: several gateway replicas on one host bind the same
    port and the kernel spreads connections across them (`calagent up --scale gateway=N`)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says it is TCP. With proto 0, Nagle meets delayed ACKs and every response
    # waits ~40 ms.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def main() -> None:
    configure_logging("gateway")
    # Access log lines name the path, and a feed's path is its credential.
    logging.getLogger("uvicorn.access").addFilter(RedactFeedSecrets())
    settings = load_settings()
    provider = setup_tracing("gateway", settings)
    app = create_app(settings, clock_from_env(settings.now))
    host = os.environ.get("CALAGENT_HTTP_HOST", "127.0.0.1")
    config = uvicorn.Config(
        app,
        host=host,
        port=settings.http_port,
        log_level="info",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        # uvloop and httptools: the gateway's CPU goes to the event loop and HTTP parsing.
        loop="uvloop",
        http="httptools",
        # Logging is configured above; uvicorn's own dictConfig would replace it.
        log_config=None,
    )
    # uvicorn re-raises a captured SIGTERM/SIGINT once it has shut down; with the default handler
    # that would kill the process before the span flush below. A handler of ours turns it into a
    # normal exit so `finally` runs and no finished span is lost.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_normally)
    try:
        uvicorn.Server(config).run(sockets=[_shared_socket(host, settings.http_port)])
    finally:
        shutdown_tracing(provider)


if __name__ == "__main__":
    main()
