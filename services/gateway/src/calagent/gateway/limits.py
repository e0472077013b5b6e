"""Input limits that hold before a route runs: the request body's size, and the shape of ids in paths.

A body is capped *while it is read*: `Content-Length` over the cap is refused before a byte of the
body is kept, and a chunked body (no length) is counted as it streams and refused the moment it
passes the cap. So one request never makes the gateway hold more than `MAX_BODY_BYTES` plus one
chunk, however large the client's body is.

Before the 413 goes out, the rest of the body is read and thrown away, chunk by chunk, for at most
`DRAIN_S` (nginx's "lingering close"): a client that sends its whole body before reading (most do,
without `Expect: 100-continue`) would otherwise have its connection reset under it and never see
the 413. A client that asked `Expect: 100-continue` is answered at once and sends nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The largest legitimate body is a chat message: 4,000 characters (at most 4 bytes each in UTF-8,
# 12 when every one is a JSON \u escape) plus a few short fields. 64 KiB is above that and far
# below anything that hurts.
MAX_BODY_BYTES = 64 * 1024
PAYLOAD_TOO_LARGE = "payload_too_large"
DRAIN_S = 5.0

# Ids this system hands out (turn ids, plan ids, stub ids) are hex, uuid or `<id>:<UTC start>`;
# anything else in a path names nothing and is answered 404 without asking another service.
PLAIN_ID = re.compile(r"[A-Za-z0-9_.:+-]{1,80}")


def plain_id(value: str, max_chars: int = 64) -> bool:
    return len(value) <= max_chars and PLAIN_ID.fullmatch(value) is not None


def whole_number(raw: str, low: int, high: int) -> int | None:
    """A query parameter's whole number within [low, high], else None. ASCII digits only:
    `str.isdigit` also accepts "³" and "٣", which `int` then refuses or reads as another number."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        return None
    value = int(raw)
    return value if low <= value <= high else None


class BodyTooLargeError(Exception):
    pass


def _too_large_body(limit: int) -> bytes:
    message = f"the request body is larger than {limit} bytes"
    return json.dumps({"error": {"code": PAYLOAD_TOO_LARGE, "message": message}}).encode()


class BodySizeLimit:
    """ASGI middleware: 413 `payload_too_large` for a body over `max_bytes`, declared or streamed."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            if not _expects_continue(scope):
                await _drain(receive)
            await self._refuse(send)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLargeError
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLargeError:
            if started:
                raise
            await _drain(receive)
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = _too_large_body(self.max_bytes)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    # The rest of the body is not read: the connection cannot be reused.
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def _drain(receive: Receive) -> None:
    """Read what is left of the body and keep none of it, for at most `DRAIN_S`."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_S):
            while True:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return


def _expects_continue(scope: Scope) -> bool:
    return any(
        name == b"expect" and value.lower() == b"100-continue" for name, value in scope.get("headers", ())
    )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                # Unreadable: the server rejects such a request itself; count the stream instead.
                return None
    return None
