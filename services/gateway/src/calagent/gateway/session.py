"""The page's session cookie and its CSRF token (contract §18), and who a request comes from.

A request names its user either with `Authorization: Bearer <JWT>` (the API, the CLI, a pasted
token) or with the session cookie set by sign-in with OpenID Connect. The bearer wins when both
are present: a header is never sent by a browser on its own, so it needs no CSRF token.

The cookie is a JWT HS256 signed with the auth secret, `purpose` "session" (so it is never a
bearer token, nor a bearer token a cookie), with its own id `sid`; it lives a week of the system's
`Clock`. The CSRF token is an HMAC of that id under the same secret (a synchronizer token that
needs no server state): the page reads it from `/web/session` and sends it as `X-CSRF-Token` on
every POST, PATCH, PUT and DELETE. A cookie request without it is refused 403 — a cross-site form
or script can make the browser send the cookie, but cannot read the token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import jwt
from starlette.requests import Request

from calagent.contracts.settings import valid_zone_name
from calagent.gateway.auth import (
    ALGORITHM,
    MAX_USER_ID_CHARS,
    Principal,
    principal_from_header,
    read_purpose_token,
)
from calagent.runtime.clock import Clock
from calagent.runtime.settings import Settings

SESSION_COOKIE = "calagent_session"
SESSION_PURPOSE = "session"
SESSION_TTL = timedelta(days=7)
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CsrfError(Exception):
    """A state-changing request authenticated by the cookie carried no valid CSRF token."""


@dataclass(frozen=True)
class Session:
    user_id: str
    tz: str | None
    sid: str


def issue_session(user_id: str, tz: str | None, secret: str, now: datetime) -> str:
    if not user_id or len(user_id) > MAX_USER_ID_CHARS:
        raise ValueError(f"a user id is 1 to {MAX_USER_ID_CHARS} characters")
    claims: dict[str, Any] = {
        "sub": user_id,
        "purpose": SESSION_PURPOSE,
        "sid": secrets.token_urlsafe(24),
        "iat": int(now.timestamp()),
        "exp": int((now + SESSION_TTL).timestamp()),
    }
    if tz is not None and valid_zone_name(tz):
        claims["tz"] = tz
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def read_session(value: str, secret: str, now: datetime) -> Session:
    """The session a cookie holds, its life checked against the system's clock."""
    user_id, sid, tz = read_purpose_token(
        value,
        secret,
        now,
        purpose=SESSION_PURPOSE,
        id_claim="sid",
        invalid="the session is not valid; sign in again",
        expired="the session has expired; sign in again",
    )
    return Session(user_id=user_id, tz=tz, sid=sid)


def csrf_token(session: Session, secret: str) -> str:
    digest = hmac.new(secret.encode(), b"csrf\x00" + session.sid.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def check_csrf(request: Request, session: Session, secret: str) -> None:
    if request.method.upper() in SAFE_METHODS:
        return
    sent = request.headers.get(CSRF_HEADER, "")
    if not sent or not hmac.compare_digest(sent.encode(), csrf_token(session, secret).encode()):
        raise CsrfError("a request made with the session cookie must carry its X-CSRF-Token header")


def cookie_session(request: Request, settings: Settings, clock: Clock) -> Session | None:
    """The session of the request's cookie, or None when it carries none."""
    value = request.cookies.get(SESSION_COOKIE)
    if not value:
        return None
    return read_session(value, settings.require_auth_secret(), clock.now())


def principal_from_request(request: Request, settings: Settings, clock: Clock) -> Principal:
    """Who the request comes from: the bearer token, else the session cookie (with its CSRF check
    on a state-changing method)."""
    secret = settings.require_auth_secret()
    authorization = request.headers.get("authorization")
    if authorization:
        return principal_from_header(authorization, secret, settings.default_tz)
    session = cookie_session(request, settings, clock)
    if session is None:
        return principal_from_header(None, secret, settings.default_tz)
    check_csrf(request, session, secret)
    return Principal(user_id=session.user_id, tz=session.tz or settings.default_tz)
