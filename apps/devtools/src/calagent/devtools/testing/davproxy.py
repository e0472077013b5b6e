"""A fault-injecting HTTP proxy on loopback in front of a real CalDAV server (Radicale, Xandikos),
so a test can make that server behave like the ones in the wild (contract §22):

- `fail(method, path, status)`: answer a request with a status instead of the server (or after
  it, `forward=True`: the server did it, its answer is lost), `times` times or until `clear()`;
- `flaky_etags`: every ETag the server gives is a new one on each read (the real one plus a
  counter), and the real one is given back to the server in `If-Match`, as servers that
  recompute their ETags do;
- `no_sync_tokens`: a `sync-collection` REPORT is refused as unsupported (RFC 3253
  DAV:supported-report), so the client lists everything;
- `empty_listings`: every REPORT and `Depth: 1` PROPFIND answers with no members (and no sync
  token), as a server that glitches does;
- `down`: every connection is closed without an answer.

It runs in the test's event loop (aiohttp); the client under test reaches it in its own threads.
Every request it sees is recorded (`requests`) with the answer it got, for bounds on how many a
sync makes.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from aiohttp import ClientSession, ClientTimeout, web

from calagent.devtools.processes import free_port

DAV = "{DAV:}"
# Not forwarded either way (RFC 9110 §7.6.1), and what aiohttp sets itself.
HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        # Bodies pass decoded (they may be rewritten): the client is told of no encoding.
        "content-encoding",
        "accept-encoding",
    }
)
FLAKY = re.compile(r"~flaky\d+")
UNSUPPORTED_REPORT = (
    '<?xml version="1.0" encoding="utf-8"?>\n<D:error xmlns:D="DAV:"><D:supported-report/></D:error>'
)

ET.register_namespace("D", "DAV:")
ET.register_namespace("C", "urn:ietf:params:xml:ns:caldav")
ET.register_namespace("CS", "http://calendarserver.org/ns/")
ET.register_namespace("ICAL", "http://apple.com/ns/ical/")


@dataclass
class Fault:
    """Answer matching requests with `status` (and `body`): `method` None matches any method,
    `path` is a regular expression searched in the decoded path (None: any)."""

    status: int
    method: str | None = None
    path: str | None = None
    times: int | None = None  # None: until cleared
    body: str = ""
    content_type: str = "text/plain"
    forward: bool = False  # the server gets the request first; its answer is replaced

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        return _names(self.method, self.path, method, path)


def _names(want_method: str | None, want_path: str | None, method: str, path: str) -> bool:
    """Whether a request is one a fault or a hold names (None: any)."""
    if want_method is not None and want_method != method:
        return False
    return want_path is None or re.search(want_path, path) is not None


@dataclass
class Hold:
    """Matching requests wait for `gate` before they reach the server, so a test sees what the
    client shows meanwhile; `reached` is set when the first arrives. `body`: a part the
    request's body holds (None: any body)."""

    method: str | None
    path: str | None
    body: bytes | None
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    def matches(self, method: str, path: str, body: bytes) -> bool:
        return _names(self.method, self.path, method, path) and (self.body is None or self.body in body)


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    status: int  # 0: the connection was closed without an answer


@dataclass
class DavProxy:
    upstream: str  # scheme://host:port of the real server
    host: str = "127.0.0.1"
    port: int = 0
    faults: list[Fault] = field(default_factory=list)
    flaky_etags: bool = False
    no_sync_tokens: bool = False
    empty_listings: bool = False
    down: bool = False
    requests: list[Seen] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    _session: ClientSession | None = None
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def rebase(self, url: str) -> str:
        """The same address on the server, reached through this proxy."""
        parts = urlsplit(url)
        return f"http://{self.host}:{self.port}{parts.path}" + (f"?{parts.query}" if parts.query else "")

    @property
    def network(self) -> str:
        return f"{self.host}/32"

    async def start(self) -> None:
        self._session = ClientSession(timeout=ClientTimeout(total=30))
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self.port = self.port or free_port()
        await web.TCPSite(self._runner, self.host, self.port).start()

    async def stop(self) -> None:
        for held in self.holds:  # a request still held would keep the runner's cleanup waiting
            held.gate.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    # ---- faults ------------------------------------------------------------------------------------

    def fail(
        self,
        method: str | None,
        path: str | None,
        status: int,
        *,
        times: int | None = None,
        body: str = "",
        content_type: str = "text/plain",
        forward: bool = False,
    ) -> Fault:
        fault = Fault(status, method, path, times, body, content_type, forward)
        self.faults.append(fault)
        return fault

    def hold(self, method: str | None, path: str | None, body: bytes | None = None) -> Hold:
        """Matching requests wait until the hold's gate is set (or `clear`)."""
        held = Hold(method, path, body)
        self.holds.append(held)
        return held

    def clear(self) -> None:
        """Every fault off and every hold let go: the server as it is."""
        self.faults.clear()
        for held in self.holds:
            held.gate.set()
        self.holds.clear()
        self.flaky_etags = self.no_sync_tokens = self.empty_listings = self.down = False

    def count(self, method: str | None = None, path: str | None = None) -> int:
        """How many requests reached the proxy (of `method`, whose path contains `path`)."""
        return sum(
            1
            for r in self.requests
            if (method is None or r.method == method) and (path is None or path in r.path)
        )

    # ---- the forwarder ---------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method, path = request.method, unquote(request.path)
        body = await request.read()
        if self.down:
            self.requests.append(Seen(method, path, 0))
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=503)
        for held in [h for h in self.holds if h.matches(method, path, body)]:
            held.reached.set()
            await held.gate.wait()
        fault = next((f for f in self.faults if f.matches(method, path)), None)
        if fault is not None and fault.times is not None:
            fault.times -= 1
        if fault is not None and not fault.forward:
            return self._answer(
                method,
                path,
                web.Response(status=fault.status, text=fault.body, content_type=fault.content_type),
            )
        if method == "REPORT" and self.no_sync_tokens and b"sync-collection" in body:
            return self._answer(
                method,
                path,
                web.Response(status=403, text=UNSUPPORTED_REPORT, content_type="application/xml"),
            )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        if self.flaky_etags:
            for name in ("If-Match", "If-None-Match"):
                if name in headers:
                    headers[name] = FLAKY.sub("", headers[name])
        assert self._session is not None
        async with self._session.request(
            method, self.upstream.rstrip("/") + request.rel_url.raw_path_qs, headers=headers, data=body
        ) as upstream:
            payload = await upstream.read()
            status = upstream.status
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS}
        if fault is not None:
            return self._answer(
                method,
                path,
                web.Response(status=fault.status, text=fault.body, content_type=fault.content_type),
            )
        listing = method == "REPORT" or (method == "PROPFIND" and request.headers.get("Depth") == "1")
        if status == 207 and (self.flaky_etags or (self.empty_listings and listing)):
            payload = self._rewrite(payload, path, empty=self.empty_listings and listing)
        if self.flaky_etags and "ETag" in out:
            out["ETag"] = self._flaky(out["ETag"])
        return self._answer(method, path, web.Response(status=status, body=payload, headers=out))

    def _answer(self, method: str, path: str, response: web.Response) -> web.Response:
        self.requests.append(Seen(method, path, response.status))
        return response

    def _flaky(self, etag: str) -> str:
        real = FLAKY.sub("", etag)
        n = next(self._counter)
        return real[:-1] + f'~flaky{n}"' if real.endswith('"') else f"{real}~flaky{n}"

    def _rewrite(self, payload: bytes, path: str, *, empty: bool) -> bytes:
        try:
            # The answer of the test's own server on loopback, not untrusted input.
            root = ET.fromstring(payload)  # noqa: S314
        except ET.ParseError:
            return payload
        if empty:
            # Nothing at all, its sync token neither: an empty answer with a new token would say
            # "nothing changed" for good, which no client can tell from the truth.
            for token in root.findall(f"{DAV}sync-token"):
                root.remove(token)
        for response in list(root.findall(f"{DAV}response")):
            href = response.findtext(f"{DAV}href") or ""
            if empty and unquote(href).rstrip("/") != path.rstrip("/"):
                root.remove(response)
                continue
            if self.flaky_etags:
                for etag in response.iter(f"{DAV}getetag"):
                    if etag.text:
                        etag.text = self._flaky(etag.text)
        return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))
