"""Input limits of `POST /v1/chat` and the read routes: 422 with a message naming the problem."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from calagent.contracts.turns import MAX_MESSAGE_CHARS
from calagent.gateway.app import create_app
from calagent.gateway.auth import issue_token
from calagent.gateway.calendar import parse_instant
from calagent.gateway.chat import ChatRequest, parse_chat_body
from calagent.gateway.errors import UnprocessableError
from calagent.runtime.settings import Settings

pytestmark = pytest.mark.unit

SECRET = "unit-test-secret-that-is-long-enough-for-hs256"


def test_a_valid_body() -> None:
    body = parse_chat_body(
        b'{"message": "\xe6\x98\x8e\xe5\xa4\xa9", "client_message_id": "m1", "channel": "telegram", "x": 1}'
    )
    assert body == ChatRequest(message="明天", client_message_id="m1", channel="telegram")
    assert body.conversation_id is None


def test_message_at_the_limit_is_accepted() -> None:
    assert len(ChatRequest(message="字" * MAX_MESSAGE_CHARS).message) == MAX_MESSAGE_CHARS


BAD_BODIES: dict[str, tuple[bytes, str]] = {
    "not json": (b"message=hi", "not valid JSON"),
    "not utf-8": (b"\xff\xfe{", "not valid JSON"),
    "json array": (b'["hi"]', "JSON object"),
    "no message": (b'{"conversation_id": "c"}', "Field required"),
    "null message": (b'{"message": null}', "string"),
    "number message": (b'{"message": 42}', "string"),
    "list message": (b'{"message": ["hi"]}', "string"),
    "empty message": (b'{"message": ""}', "empty"),
    "blank message": (b'{"message": " \\n\\t "}', "empty"),
    "over-long message": (('{"message": "' + "a" * (MAX_MESSAGE_CHARS + 1) + '"}').encode(), "at most 4000"),
    "unknown channel": (b'{"message": "hi", "channel": "fax"}', "channel"),
    "number conversation": (b'{"message": "hi", "conversation_id": 7}', "string"),
    "empty idempotency key": (b'{"message": "hi", "client_message_id": ""}', "at least 1"),
}


@pytest.mark.parametrize(("raw", "needle"), BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_bad_bodies(raw: bytes, needle: str) -> None:
    with pytest.raises(UnprocessableError) as caught:
        parse_chat_body(raw)
    text = " ".join(f"{e['loc']} {e['msg']}" for e in caught.value.errors)
    assert needle in text


def test_instants() -> None:
    assert parse_instant("start", "2026-09-24T10:00:00+08:00", "UTC").utcoffset() is not None
    naive = parse_instant("start", "2026-09-24", "Asia/Shanghai")
    assert naive.isoformat() == "2026-09-24T00:00:00+08:00"
    with pytest.raises(UnprocessableError, match="required"):
        parse_instant("start", None, "UTC")
    with pytest.raises(UnprocessableError):
        parse_instant("end", "next tuesday", "UTC")


def create_app_without_bus() -> FastAPI:
    return create_app(Settings(auth_secret=SECRET))


HEADERS = {"Authorization": "Bearer " + issue_token("val-user", SECRET)}


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"not json", "not valid JSON"),
        (b'{"message": 1}', "string"),
        (b'{"message": "   "}', "empty"),
        (('{"message": "' + "b" * 4001 + '"}').encode(), "at most 4000"),
        (b'{"message": "[Telegram]"}', "no text of its own"),
    ],
)
async def test_chat_422_over_http(content: bytes, needle: str) -> None:
    # No bus: validation answers before anything is published.
    app = create_app_without_bus()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        response = await client.post(
            "/v1/chat", content=content, headers={**HEADERS, "Content-Type": "application/json"}
        )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert needle in error["message"], error


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?start=2026-09-24T00:00:00%2B08:00",
        "?start=yesterday&end=2026-09-25T00:00:00%2B08:00",
        "?start=2026-09-25T00:00:00%2B08:00&end=2026-09-24T00:00:00%2B08:00",
        "?start=2026-09-25T00:00:00%2B08:00&end=2026-09-25T00:00:00%2B08:00",
        "?start=2026-01-01&end=2027-06-01",
    ],
)
async def test_events_range_422(query: str) -> None:
    app = create_app_without_bus()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        response = await client.get(f"/v1/events{query}", headers=HEADERS)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
    assert response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("query", "status"),
    [
        # In New York 2026-03-09 is summer time and 2027-03-10 winter time: 366 days on the clock,
        # 366 days and an hour elapsed. The range is taken (and the missing bus answers 503).
        ("?start=2026-03-09&end=2027-03-10", 503),
        ("?start=2026-03-09T00:00:00-04:00&end=2027-03-10T00:00:00-05:00", 503),
        ("?start=2026-03-09&end=2027-03-11", 422),
    ],
)
async def test_the_events_range_is_counted_in_days_of_the_users_clock(query: str, status: int) -> None:
    headers = {"Authorization": "Bearer " + issue_token("val-user", SECRET, tz="America/New_York")}
    app = create_app_without_bus()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        response = await client.get(f"/v1/events{query}", headers=headers)
    assert response.status_code == status, response.json()


async def test_without_a_bus_reads_are_503_not_500() -> None:
    app = create_app_without_bus()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        response = await client.get("/v1/commands/active", headers=HEADERS)
        chat = await client.post("/v1/chat", json={"message": "hi"}, headers=HEADERS)
    assert response.status_code == 503
    assert chat.status_code == 503
    assert response.json()["error"]["code"] == chat.json()["error"]["code"] == "service_unavailable"
    assert "bus" in response.json()["error"]["message"]


async def test_framework_errors_use_the_error_body() -> None:
    app = create_app_without_bus()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        unknown = await client.get("/v1/nothing-here", headers=HEADERS)
        wrong_method = await client.delete("/v1/chat", headers=HEADERS)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["code"] == "method_not_allowed"
    assert "allow" in wrong_method.headers


def test_the_listening_socket_is_tcp_so_accepted_connections_get_nodelay() -> None:
    # asyncio sets TCP_NODELAY on an accepted connection only when the listening socket's proto is
    # IPPROTO_TCP; with proto 0 every response stalls ~40 ms (Nagle against delayed ACKs).
    import socket

    from calagent.devtools.processes import free_port
    from calagent.gateway.__main__ import _shared_socket

    sock = _shared_socket("127.0.0.1", free_port())
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


@pytest.mark.parametrize("field", ["message", "conversation_id", "client_message_id", "active_command_id"])
def test_a_nul_character_in_any_text_field_is_a_422_not_a_dead_letter(field: str) -> None:
    import json

    body = {"message": "明天下午三点开会", field: "a\u0000b"}
    with pytest.raises(UnprocessableError):
        parse_chat_body(json.dumps(body).encode())


def test_keyed_turn_ids_of_two_users_never_collide_however_ids_and_keys_are_spelled() -> None:
    from calagent.contracts.turns import turn_key

    assert turn_key("eve:x", "y") != turn_key("eve", "x:y")
    assert turn_key("a\nb", "c") != turn_key("a", "b\nc")
    assert turn_key("eve", "k") == turn_key("eve", "k")
