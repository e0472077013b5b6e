"""Sign-in with OpenID Connect (contract §18): authorization code with PKCE, then a session cookie.

Offered when `CALAGENT_OIDC_ISSUER`, `CALAGENT_OIDC_CLIENT_ID` and `CALAGENT_OIDC_CLIENT_SECRET`
are set (the button's name: `CALAGENT_OIDC_NAME`, else the issuer's host).

- `GET /auth/oidc/start` reads the issuer's discovery document, draws a state, a nonce and a PKCE
  verifier (S256), keeps them in a short-lived signed flow cookie (HttpOnly, SameSite=Lax: the
  issuer's redirect back is a cross-site navigation, which a Strict cookie would not survive;
  path `/auth/oidc`, ten minutes of the system's clock) and redirects to the issuer.
- `GET /auth/oidc/callback` refuses a state other than the flow cookie's, exchanges the code
  (with the verifier) at the token endpoint, and verifies the ID token: its signature against the
  issuer's JWKS (asymmetric algorithms only), `iss`, `aud` (and `azp`), `nonce`, `exp` and `iat`
  against the system's clock. The session cookie (see `session.py`) then names the user.
- `POST /auth/logout` clears the session cookie (with the cookie, it needs the CSRF token too).

The issuer's `sub` is the user id as it stands, not prefixed with the issuer: one issuer is
configured at a time, choosing it is the operator's act of trust, and so `calagent token <sub>`
names the same user for the CLI. A `sub` longer than a user id may be is refused. The ID token's
`zoneinfo` claim, when it is an IANA zone, becomes the user's zone. The discovery document and
the keys are read at every sign-in: sign-ins are rare, and a key rotation then needs nothing.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import jwt
from authlib.integrations.httpx_client import AsyncOAuth2Client
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from joserfc import jwt as jose_jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry

from calagent.contracts.settings import valid_zone_name
from calagent.gateway.auth import ALGORITHM, MAX_USER_ID_CHARS, AuthError
from calagent.gateway.errors import NO_STORE, error_json
from calagent.gateway.session import (
    SESSION_COOKIE,
    SESSION_TTL,
    CsrfError,
    check_csrf,
    cookie_session,
    issue_session,
)
from calagent.runtime.clock import Clock
from calagent.runtime.settings import Settings

FLOW_COOKIE = "calagent_oidc"
FLOW_PATH = "/auth/oidc"
FLOW_PURPOSE = "oidc-flow"
FLOW_TTL = timedelta(minutes=10)
ISSUER_TIMEOUT_S = 10.0
# Only public-key signatures: a symmetric algorithm would let a key from the JWKS act as a secret.
ID_TOKEN_ALGORITHMS = [
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
]
# Clock difference tolerated between the issuer and this system, for `exp` and `iat`.
LEEWAY_S = 60


class IssuerError(Exception):
    """The issuer could not be reached or answered something unusable."""


@dataclass(frozen=True)
class Flow:
    state: str
    nonce: str
    verifier: str


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def _issue_flow(flow: Flow, secret: str, now: datetime) -> str:
    claims = {
        "purpose": FLOW_PURPOSE,
        "state": flow.state,
        "nonce": flow.nonce,
        "verifier": flow.verifier,
        "exp": int((now + FLOW_TTL).timestamp()),
    }
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def _read_flow(value: str | None, secret: str, now: datetime) -> Flow:
    if not value:
        raise AuthError("no sign-in was started in this browser; start again")
    try:
        claims = jwt.decode(
            value,
            secret,
            algorithms=[ALGORITHM],
            options={"require": ["purpose", "state", "nonce", "verifier", "exp"], "verify_exp": False},
        )
    except jwt.InvalidTokenError as exc:
        raise AuthError("the sign-in is not valid; start again") from exc
    exp = claims.get("exp")
    if claims.get("purpose") != FLOW_PURPOSE or not isinstance(exp, int):
        raise AuthError("the sign-in is not valid; start again")
    if now.timestamp() >= exp:
        raise AuthError("the sign-in took too long; start again")
    state, nonce, verifier = claims.get("state"), claims.get("nonce"), claims.get("verifier")
    if not all(isinstance(v, str) and v for v in (state, nonce, verifier)):
        raise AuthError("the sign-in is not valid; start again")
    return Flow(state=str(state), nonce=str(nonce), verifier=str(verifier))


class Issuer:
    """The configured OpenID provider, as its discovery document describes it."""

    def __init__(self, settings: Settings) -> None:
        self.issuer = (settings.oidc_issuer or "").rstrip("/")
        self.client_id = settings.oidc_client_id or ""
        self.client_secret = settings.oidc_client_secret or ""

    async def _get_json(self, http: httpx.AsyncClient, url: str) -> dict[str, Any]:
        try:
            response = await http.get(url)
        except httpx.HTTPError as exc:
            raise IssuerError(f"the issuer did not answer: {exc}") from exc
        if response.status_code != 200:
            raise IssuerError(f"the issuer answered {response.status_code} at {url}")
        try:
            data = response.json()
        except ValueError as exc:
            raise IssuerError(f"the issuer answered no JSON at {url}") from exc
        if not isinstance(data, dict):
            raise IssuerError(f"the issuer answered no JSON object at {url}")
        return data

    async def metadata(self, http: httpx.AsyncClient) -> dict[str, Any]:
        data = await self._get_json(http, f"{self.issuer}/.well-known/openid-configuration")
        # The document must be the configured issuer's own (OpenID Connect Discovery §4.3).
        if str(data.get("issuer", "")).rstrip("/") != self.issuer:
            raise IssuerError("the discovery document names another issuer")
        for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(data.get(field), str):
                raise IssuerError(f"the discovery document has no {field}")
        return data

    def client(self, redirect_uri: str) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=self.client_id,
            client_secret=self.client_secret,
            scope="openid",
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            timeout=ISSUER_TIMEOUT_S,
        )

    async def verify_id_token(
        self, http: httpx.AsyncClient, meta: dict[str, Any], id_token: str, nonce: str, now: datetime
    ) -> dict[str, Any]:
        try:
            keys = KeySet.import_key_set(await self._get_json(http, meta["jwks_uri"]))  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise IssuerError(f"the issuer's keys are not usable: {exc}") from exc
        try:
            token = jose_jwt.decode(id_token, keys, algorithms=ID_TOKEN_ALGORITHMS)
            claims = dict(token.claims)
            JWTClaimsRegistry(
                now=int(now.timestamp()),
                leeway=LEEWAY_S,
                iss={"essential": True, "value": meta["issuer"]},
                aud={"essential": True, "value": self.client_id},
                sub={"essential": True},
                exp={"essential": True},
                iat={"essential": True},
                nonce={"essential": True, "value": nonce},
            ).validate(claims)
        except (JoseError, ValueError) as exc:
            raise AuthError(f"the issuer's ID token is not valid: {exc}") from exc
        # An ID token for several audiences names the one it was issued to (OpenID Connect §3.1.3.7).
        audiences = claims.get("aud")
        if isinstance(audiences, list) and len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise AuthError("the issuer's ID token was issued to another client (azp)")
        return claims


def _not_configured() -> JSONResponse:
    return error_json(404, "sign-in with OpenID Connect is not configured", "not_found", headers=NO_STORE)


def _issuer_http() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=ISSUER_TIMEOUT_S, follow_redirects=False)


def _returned_code(request: Request, secret: str, clock: Clock) -> tuple[Flow, str]:
    """The flow this browser started and the code the issuer sent back to it; AuthError otherwise."""
    params = request.query_params
    flow = _read_flow(request.cookies.get(FLOW_COOKIE), secret, clock.now())
    state = params.get("state", "")
    if not secrets.compare_digest(state.encode(), flow.state.encode()):
        raise AuthError("the sign-in's state does not match; start again")
    if "error" in params:
        raise AuthError(f"the issuer refused the sign-in ({params.get('error', '')[:64]})")
    code = params.get("code")
    if not code:
        raise AuthError("the issuer sent no code")
    return flow, code


async def _verified_claims(
    issuer: Issuer, request: Request, flow: Flow, code: str, clock: Clock
) -> dict[str, Any]:
    """The code exchanged for an ID token, and its verified claims; IssuerError or AuthError."""
    async with _issuer_http() as client:
        meta = await issuer.metadata(client)
        async with issuer.client(str(request.url_for("oidc_callback"))) as oauth:
            try:
                token = await oauth.fetch_token(
                    meta["token_endpoint"], code=code, code_verifier=flow.verifier
                )
            except Exception as exc:  # authlib raises OAuthError, httpx its own
                raise AuthError(f"the issuer did not accept the code: {exc}") from exc
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise AuthError("the issuer sent no ID token")
        return await issuer.verify_id_token(client, meta, id_token, flow.nonce, clock.now())


def _signed_in(request: Request, claims: dict[str, Any], secret: str, clock: Clock) -> Response:
    """The session for the issuer's subject, set on the redirect home; the flow cookie cleared."""
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub.strip() or len(sub) > MAX_USER_ID_CHARS:
        return error_json(
            401,
            f"the issuer's subject is not a user id of 1 to {MAX_USER_ID_CHARS} characters",
            "unauthorized",
            headers=NO_STORE,
        )
    zone = claims.get("zoneinfo")
    tz = zone if isinstance(zone, str) and valid_zone_name(zone) else None
    response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
    response.delete_cookie(
        FLOW_COOKIE, path=FLOW_PATH, httponly=True, samesite="lax", secure=_secure(request)
    )
    response.set_cookie(
        SESSION_COOKIE,
        issue_session(sub, tz, secret, clock.now()),
        max_age=int(SESSION_TTL.total_seconds()),
        path="/",
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    return response


def oidc_router(settings: Settings, clock: Clock) -> APIRouter:
    """The sign-in routes, for `app.include_router`; they answer 404 while OIDC is not configured."""
    router = APIRouter(include_in_schema=False)
    issuer = Issuer(settings)

    @router.get("/auth/oidc/start")
    async def start(request: Request) -> Response:
        if not settings.oidc_enabled:
            return _not_configured()
        secret = settings.require_auth_secret()
        flow = Flow(
            state=secrets.token_urlsafe(24),
            nonce=secrets.token_urlsafe(24),
            verifier=secrets.token_urlsafe(48),
        )
        try:
            async with _issuer_http() as client:
                meta = await issuer.metadata(client)
        except IssuerError as exc:
            return error_json(502, str(exc), "bad_gateway", headers=NO_STORE)
        async with issuer.client(str(request.url_for("oidc_callback"))) as oauth:
            url, _state = oauth.create_authorization_url(
                meta["authorization_endpoint"],
                state=flow.state,
                nonce=flow.nonce,
                code_verifier=flow.verifier,
            )
        response = RedirectResponse(url, status_code=302, headers={"Cache-Control": "no-store"})
        response.set_cookie(
            FLOW_COOKIE,
            _issue_flow(flow, secret, clock.now()),
            max_age=int(FLOW_TTL.total_seconds()),
            path=FLOW_PATH,
            httponly=True,
            samesite="lax",
            secure=_secure(request),
        )
        return response

    @router.get("/auth/oidc/callback", name="oidc_callback")
    async def callback(request: Request) -> Response:
        if not settings.oidc_enabled:
            return _not_configured()
        secret = settings.require_auth_secret()
        try:
            flow, code = _returned_code(request, secret, clock)
        except AuthError as exc:
            return error_json(401, str(exc), "unauthorized", headers=NO_STORE)
        try:
            claims = await _verified_claims(issuer, request, flow, code, clock)
        except IssuerError as exc:
            return error_json(502, str(exc), "bad_gateway", headers=NO_STORE)
        except AuthError as exc:
            return error_json(401, str(exc), "unauthorized", headers=NO_STORE)
        return _signed_in(request, claims, secret, clock)

    @router.post("/auth/logout")
    async def logout(request: Request) -> Response:
        try:
            session = cookie_session(request, settings, clock)
        except AuthError:
            session = None  # an unreadable or expired cookie is cleared all the same
        if session is not None:
            try:
                check_csrf(request, session, settings.require_auth_secret())
            except CsrfError as exc:
                return error_json(403, str(exc), "csrf_failed", headers=NO_STORE)
        response = Response(status_code=204, headers={"Cache-Control": "no-store"})
        response.delete_cookie(
            SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=_secure(request)
        )
        return response

    return router
