"""Bearer tokens: what is accepted, and every way a token is refused (401, nothing touched)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import httpx
import jwt
import pytest
from fastapi import FastAPI

from calagent.gateway.app import create_app
from calagent.gateway.auth import AuthError, issue_token, principal_from_header, verify_token
from calagent.runtime.clock import FrozenClock
from calagent.runtime.settings import Settings

pytestmark = pytest.mark.unit

SECRET = "unit-test-secret-that-is-long-enough-for-hs256"
DEFAULT_TZ = "Asia/Shanghai"


def test_issued_token_round_trips() -> None:
    token = issue_token("alice", SECRET, tz="Europe/Lisbon")
    principal = verify_token(token, SECRET, DEFAULT_TZ)
    assert principal.user_id == "alice"
    assert principal.tz == "Europe/Lisbon"


def test_aliases_round_trip_and_are_optional() -> None:
    token = issue_token("alice", SECRET, aliases=("@alice_tg", "Alice Zhang"))
    assert verify_token(token, SECRET, DEFAULT_TZ).aliases == ("@alice_tg", "Alice Zhang")
    assert verify_token(issue_token("alice", SECRET), SECRET, DEFAULT_TZ).aliases == ()


@pytest.mark.parametrize(
    "aliases",
    ["@alice", [1, 2], ["ok", ""], ["x" * 129], ["a\x00b"], [f"a{i}" for i in range(17)]],
    ids=["string", "numbers", "blank", "too long", "NUL", "too many"],
)
def test_a_malformed_aliases_claim_is_refused(aliases: object) -> None:
    token = jwt.encode({"sub": "alice", "aliases": aliases}, SECRET, algorithm="HS256")
    with pytest.raises(AuthError, match="aliases"):
        verify_token(token, SECRET, DEFAULT_TZ)


def test_token_without_tz_uses_the_default_zone() -> None:
    principal = principal_from_header(f"Bearer {issue_token('bob', SECRET)}", SECRET, DEFAULT_TZ)
    assert principal.tz == DEFAULT_TZ


def test_token_claims() -> None:
    now = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)
    claims = jwt.decode(
        issue_token("carol", SECRET, ttl_days=2, now=now),
        SECRET,
        algorithms=["HS256"],
        options={"verify_exp": False},
    )
    assert claims["sub"] == "carol"
    assert claims["exp"] - claims["iat"] == 2 * 86400
    assert "tz" not in claims


def test_issue_token_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="IANA"):
        issue_token("dave", SECRET, tz="Mars/Olympus")
    with pytest.raises(ValueError, match="user id"):
        issue_token("", SECRET)


def _unsigned(claims: dict[str, object]) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


REFUSED = {
    "missing header": (None, "missing"),
    "empty bearer": ("Bearer ", "Bearer <token>"),
    "basic scheme": ("Basic YWxpY2U6cHc=", "Bearer <token>"),
    "malformed token": ("Bearer not-a-jwt", "not valid"),
    "expired": (
        "Bearer " + issue_token("alice", SECRET, now=datetime.now(UTC) - timedelta(days=31)),
        "expired",
    ),
    "wrong signature": (
        "Bearer " + issue_token("alice", "another-secret-of-sufficient-length!!"),
        "signature",
    ),
    "alg none": ("Bearer " + _unsigned({"sub": "alice"}), "not valid"),
    "bad tz claim": (
        "Bearer " + jwt.encode({"sub": "alice", "tz": "Not/AZone"}, SECRET, algorithm="HS256"),
        "tz",
    ),
    "tz claim not a string": (
        "Bearer " + jwt.encode({"sub": "alice", "tz": 8}, SECRET, algorithm="HS256"),
        "tz",
    ),
    "no subject": ("Bearer " + jwt.encode({"tz": "UTC"}, SECRET, algorithm="HS256"), "sub"),
    "blank subject": ("Bearer " + jwt.encode({"sub": "  "}, SECRET, algorithm="HS256"), "subject"),
    "subject too long": ("Bearer " + jwt.encode({"sub": "u" * 129}, SECRET, algorithm="HS256"), "subject"),
}


@pytest.mark.parametrize(("header", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_tokens(header: str | None, message: str) -> None:
    with pytest.raises(AuthError, match=message):
        principal_from_header(header, SECRET, DEFAULT_TZ)


def test_frozen_business_clock_does_not_expire_tokens() -> None:
    # CALAGENT_NOW may sit years away from today; credentials follow the real clock.
    app = create_app(
        Settings(auth_secret=SECRET, nats_url=None),
        clock=FrozenClock(datetime(2040, 1, 1, tzinfo=UTC)),
    )
    assert app.state.gateway.clock.now().year == 2040
    verify_token(issue_token("alice", SECRET), SECRET, DEFAULT_TZ)


ROUTES = [
    ("POST", "/v1/chat"),
    ("GET", "/v1/events?start=2026-09-24T00:00:00%2B08:00&end=2026-09-25T00:00:00%2B08:00"),
    ("GET", "/v1/commands/active"),
    ("GET", "/v1/turns/abc/timeline"),
    ("GET", "/v1/calendar.ics"),
    ("POST", "/v1/feeds"),
    ("GET", "/v1/plans"),
    ("DELETE", "/v1/plans/abc"),
]


@pytest.fixture(scope="module")
def app_without_bus() -> FastAPI:
    """One app for every route and header below: each case is one request that holds nothing."""
    return create_app(Settings(auth_secret=SECRET))


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize(
    "header", [None, "Bearer nope", "Bearer " + issue_token("x", "wrong-secret-0123456789abcdef-0123")]
)
async def test_every_route_needs_a_token(
    app_without_bus: FastAPI, method: str, path: str, header: str | None
) -> None:
    # No bus at all: a 401 must come before anything would need one.
    app = app_without_bus
    headers = {"Authorization": header} if header else {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        response = await client.request(method, path, headers=headers, json={"message": "hi"})
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "unauthorized"
    assert isinstance(error["message"], str) and error["message"]
    assert response.headers["www-authenticate"] == "Bearer"
