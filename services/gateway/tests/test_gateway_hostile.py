"""Hostile HTTP input (issue 13): every one gets a 4xx in the contract's error shape, answered by
the gateway before anything is published or asked of another service.

The app here has no bus. A request that got past validation would be answered 503 ("not connected
to the bus") or, for a path id, asked of a service; so a 4xx below also proves the input was
refused before the bus.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from calagent.contracts.turns import MAX_MESSAGE_CHARS
from calagent.gateway.app import create_app
from calagent.gateway.auth import issue_token
from calagent.gateway.limits import MAX_BODY_BYTES
from calagent.runtime.settings import Settings

pytestmark = pytest.mark.unit

SECRET = "unit-test-secret-that-is-long-enough-for-hs256"
HEADERS = {"Authorization": "Bearer " + issue_token("hostile-user", SECRET)}
JSON = {**HEADERS, "Content-Type": "application/json"}


BODY_BYTES = 64 * 1024 * 1024
HELD_BOUND = BODY_BYTES // 16  # 4 MiB


def app_without_bus() -> FastAPI:
    return create_app(Settings(auth_secret=SECRET))


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")


def nested(depth: int) -> bytes:
    return b'{"message": ' + b"[" * depth + b"]" * depth + b"}"


# (method, path, body or None, expected status)
HOSTILE: dict[str, tuple[str, str, bytes | None, int]] = {
    # NUL, in every text field
    "NUL in message": ("POST", "/v1/chat", b'{"message": "hi\\u0000there"}', 422),
    "NUL in conversation_id": ("POST", "/v1/chat", b'{"message": "hi", "conversation_id": "c\\u0000"}', 422),
    "NUL in client_message_id": (
        "POST",
        "/v1/chat",
        b'{"message": "hi", "client_message_id": "\\u0000"}',
        422,
    ),
    "NUL in active_command_id": (
        "POST",
        "/v1/chat",
        b'{"message": "hi", "active_command_id": "a\\u0000"}',
        422,
    ),
    # a lone surrogate, escaped as JSON allows
    "lone surrogate in message": ("POST", "/v1/chat", b'{"message": "\\ud800"}', 422),
    "lone low surrogate in message": ("POST", "/v1/chat", b'{"message": "x\\udfffy"}', 422),
    "lone surrogate in conversation_id": (
        "POST",
        "/v1/chat",
        b'{"message": "hi", "conversation_id": "\\ud800"}',
        422,
    ),
    "lone surrogate in client_message_id": (
        "POST",
        "/v1/chat",
        b'{"message": "hi", "client_message_id": "k\\udbff"}',
        422,
    ),
    # deep nesting and oversized literals
    "nested 1,000 deep": ("POST", "/v1/chat", nested(1_000), 422),
    "nested 30,000 deep": ("POST", "/v1/chat", nested(30_000), 422),
    "object nested in message": ("POST", "/v1/chat", b'{"message": {"message": {"message": "hi"}}}', 422),
    "5,000-digit integer": ("POST", "/v1/chat", b'{"message": ' + b"9" * 5_000 + b"}", 422),
    "invalid UTF-8": ("POST", "/v1/chat", b'{"message": "\xc3\x28"}', 422),
    "over-long message": ("POST", "/v1/chat", b'{"message": "' + b"a" * (MAX_MESSAGE_CHARS + 1) + b'"}', 422),
    "empty body": ("POST", "/v1/chat", b"", 422),
    "NaN message": ("POST", "/v1/chat", b'{"message": NaN}', 422),
    # extreme dates in query bounds
    "events from year 1": ("GET", "/v1/events?start=0001-01-01&end=0001-01-02", None, 422),
    "events to year 9999": ("GET", "/v1/events?start=9999-12-30&end=9999-12-31", None, 422),
    "events year 1 with offset": (
        "GET",
        "/v1/events?start=0001-01-01T00:00:00%2B14:00&end=0001-01-02T00:00:00%2B14:00",
        None,
        422,
    ),
    "events year 9999 with offset": (
        "GET",
        "/v1/events?start=9999-12-31T00:00:00-12:00&end=9999-12-31T23:59:59-12:00",
        None,
        422,
    ),
    "events year 1 to 9999": ("GET", "/v1/events?start=0001-01-01&end=9999-12-31", None, 422),
    "events NUL bound": ("GET", "/v1/events?start=%00&end=2026-01-02", None, 422),
    "events non-UTF-8 bound": ("GET", "/v1/events?start=%ff%fe&end=2026-01-02", None, 422),
    "events huge bound": ("GET", "/v1/events?start=" + "9" * 10_000 + "&end=2026-01-02", None, 422),
    # odd ids in paths
    "timeline id NUL": ("GET", "/v1/turns/%00/timeline", None, 404),
    "timeline id non-UTF-8": ("GET", "/v1/turns/%ff%fe/timeline", None, 404),
    "timeline id encoded surrogate": ("GET", "/v1/turns/%ed%a0%80/timeline", None, 404),
    "timeline id very long": ("GET", "/v1/turns/" + "a" * 5_000 + "/timeline", None, 404),
    "timeline id with spaces": ("GET", "/v1/turns/a%20b/timeline", None, 404),
    "timeline id newline": ("GET", "/v1/turns/a%0Ab/timeline", None, 404),
    "plan id NUL": ("DELETE", "/v1/plans/%00", None, 404),
    "plan id very long": ("DELETE", "/v1/plans/" + "p" * 5_000, None, 404),
    "plan id non-UTF-8": ("DELETE", "/v1/plans/%c3%28", None, 404),
    "feed secret NUL": ("GET", "/feeds/%00.ics", None, 404),
    "feed secret very long": ("GET", "/feeds/" + "s" * 5_000 + ".ics", None, 404),
    # bodies over the cap
    "body over the cap": ("POST", "/v1/chat", b'{"message": "' + b"a" * MAX_BODY_BYTES + b'"}', 413),
}


# Every chat field with every value that is wrong for it whatever the field.
BAD_FIELD_VALUES: dict[str, str] = {
    "NUL": '"a\\u0000b"',
    "lone high surrogate": '"\\ud800"',
    "lone low surrogate": '"\\udc00x"',
    "reversed surrogate pair": '"\\ude00\\ud83d"',
    "10,000 characters": '"' + "x" * 10_000 + '"',
    "number": "7",
    "list": '["hi"]',
    "object": '{"text": "hi"}',
    "boolean": "true",
}
for field in ("message", "conversation_id", "client_message_id", "active_command_id", "channel"):
    for label, value in BAD_FIELD_VALUES.items():
        others = "" if field == "message" else '"message": "hi", '
        HOSTILE[f"{field}: {label}"] = ("POST", "/v1/chat", f'{{{others}"{field}": {value}}}'.encode(), 422)

BAD_INSTANTS: dict[str, str] = {
    "year 0001": "0001-01-01",
    "year 9999": "9999-12-31",
    "year 0000": "0000-01-01",
    "month 13": "2026-13-01",
    "30 February": "2026-02-30",
    "hour 24, minute 61": "2026-01-01T24:61",
    "signed year": "%2B2026-01-01",
    "float literal": "1e400",
    "400 digits": "9" * 400,
    "NUL": "%00",
    "offset +25:00": "2026-01-01T00:00:00%2B25:00",
    "empty": "",
}
for label, value in BAD_INSTANTS.items():
    HOSTILE[f"events start {label}"] = ("GET", f"/v1/events?start={value}&end=2026-01-02", None, 422)
    HOSTILE[f"events end {label}"] = ("GET", f"/v1/events?start=2026-01-01&end={value}", None, 422)

BAD_IDS: dict[str, str] = {
    "NUL": "%00",
    "non-UTF-8": "%ff%fe",
    "encoded surrogate": "%ed%a0%80",
    "5,000 characters": "i" * 5_000,
    "space": "a%20b",
    "quote": "%27or%271%27=%271",
    "angle brackets": "%3Cscript%3E",
    "semicolon": "a;b",
    "tab": "a%09b",
    "emoji": "%F0%9F%98%80",
}
for label, value in BAD_IDS.items():
    HOSTILE[f"timeline id {label}"] = ("GET", f"/v1/turns/{value}/timeline", None, 404)
    HOSTILE[f"plan id {label}"] = ("DELETE", f"/v1/plans/{value}", None, 404)
    HOSTILE[f"account id {label} (patch)"] = ("PATCH", f"/v1/accounts/{value}", None, 404)
    HOSTILE[f"account id {label} (delete)"] = ("DELETE", f"/v1/accounts/{value}", None, 404)

# Every route that reads a JSON body refuses one Python's parser cannot take (too deep, a number
# too long to convert) as it refuses one that is not JSON at all.
UNPARSEABLE: dict[str, bytes] = {
    "nested 30,000 deep": b"[" * 30_000 + b"]" * 30_000,
    "5,000-digit integer": b"9" * 5_000,
}
JSON_BODY_ROUTES: dict[str, tuple[str, str]] = {
    "contacts": ("POST", "/v1/contacts"),
    "caldav connect": ("POST", "/v1/accounts/caldav"),
    "account patch": ("PATCH", "/v1/accounts/acc1"),
    "settings": ("PUT", "/v1/settings"),
    "sharing": ("POST", "/v1/sharing"),
    "commands": ("POST", "/v1/commands"),
}
for route, (route_method, route_path) in JSON_BODY_ROUTES.items():
    for label, unparseable in UNPARSEABLE.items():
        HOSTILE[f"{route}: {label}"] = (route_method, route_path, unparseable, 422)

# Every route that reads its body as JSON refuses text nothing can store (a NUL, a lone surrogate)
# in any field, as the chat route does.
UNSTORABLE_BODIES: dict[str, tuple[str, str, str]] = {
    "contacts": ("POST", "/v1/contacts", '{{"name": {bad}, "email": "a@example.com"}}'),
    "caldav connect": (
        "POST",
        "/v1/accounts/caldav",
        '{{"url": "https://dav.example.com/", "username": {bad}, "password": "secret"}}',
    ),
    "account patch": ("PATCH", "/v1/accounts/acc1", '{{"default_calendar": {bad}}}'),
    "settings": ("PUT", "/v1/settings", '{{"tz": {bad}}}'),
    "sharing": ("POST", "/v1/sharing", '{{"with_user": {bad}, "level": "busy"}}'),
}
for route, (route_method, route_path, template) in UNSTORABLE_BODIES.items():
    for label in ("NUL", "lone high surrogate", "lone low surrogate"):
        body = template.format(bad=BAD_FIELD_VALUES[label]).encode()
        HOSTILE[f"{route}: {label}"] = (route_method, route_path, body, 422)


@pytest.fixture(scope="module")
def shared_app() -> FastAPI:
    """One app for every case below: each is one request that holds nothing for the next, and
    building an app per case was most of this module's time."""
    return app_without_bus()


@pytest.mark.parametrize(("method", "path", "body", "status"), HOSTILE.values(), ids=HOSTILE.keys())
async def test_hostile_input_gets_a_4xx_in_the_error_shape_before_the_bus(
    shared_app: FastAPI, method: str, path: str, body: bytes | None, status: int
) -> None:
    async with client(shared_app) as http:
        response = await http.request(
            method, path, content=body, headers=JSON if body is not None else HEADERS
        )
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) >= {"code", "message"}
    assert error["message"]


def sixty_four_mib(pulled: list[int], chunk: int = 65_536) -> AsyncIterator[bytes]:
    async def body() -> AsyncIterator[bytes]:
        for _ in range(BODY_BYTES // chunk):
            pulled.append(chunk)
            yield b"x" * chunk

    return body()


async def post_measured(headers: dict[str, str], pulled: list[int]) -> tuple[httpx.Response, int]:
    """POST 64 MiB to a fresh gateway; the answer and the peak memory Python allocated meanwhile."""
    app = app_without_bus()
    tracemalloc.start()
    try:
        async with client(app) as http:
            response = await http.post("/v1/chat", content=sixty_four_mib(pulled), headers=headers)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return response, peak


async def test_a_declared_body_over_the_cap_is_413_and_never_held() -> None:
    pulled: list[int] = []
    response, peak = await post_measured({**JSON, "Content-Length": str(BODY_BYTES)}, pulled)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    # Read and thrown away so the client sees the 413, never kept: memory grows by far less than
    # the body (64 MiB). The bound leaves room for whatever else this process allocates meanwhile
    # (tracemalloc sees every thread), and still fails for a body held even in part.
    assert peak < HELD_BOUND, peak


async def test_a_body_over_the_cap_with_expect_continue_is_413_before_a_byte_is_read() -> None:
    pulled: list[int] = []
    headers = {**JSON, "Content-Length": str(BODY_BYTES), "Expect": "100-continue"}
    response, _ = await post_measured(headers, pulled)
    assert response.status_code == 413
    assert pulled == []


async def test_a_chunked_body_over_the_cap_is_413_and_never_held() -> None:
    """64 MiB streamed without a length: refused once it passes the cap, the rest thrown away."""
    pulled: list[int] = []
    response, peak = await post_measured(JSON, pulled)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert peak < HELD_BOUND, peak


async def test_a_body_at_the_cap_is_read() -> None:
    # Padding in an ignored field brings a valid chat body to the cap exactly; without a bus it is
    # then refused as 503 for the bus, proving the size check let it through.
    base = b'{"message": "hi", "pad": ""}'
    padded = base[:-2] + b"x" * (MAX_BODY_BYTES - len(base)) + b'"}'
    assert len(padded) == MAX_BODY_BYTES
    async with client(app_without_bus()) as http:
        response = await http.post("/v1/chat", content=padded, headers=JSON)
    assert response.status_code == 503


async def test_the_schema_needs_the_bearer_and_the_docs_pages_are_not_served() -> None:
    async with client(app_without_bus()) as http:
        anonymous = await http.get("/openapi.json")
        schema = await http.get("/openapi.json", headers=HEADERS)
        docs = await http.get("/docs", headers=HEADERS)
        redoc = await http.get("/redoc", headers=HEADERS)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthorized"
    assert schema.status_code == 200
    assert "/v1/chat" in schema.json()["paths"]
    assert docs.status_code == redoc.status_code == 404
