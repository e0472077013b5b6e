"""One-time sign-in links (contract §18): `POST /web/login` trades a link for a bearer token.

`calagent login-link USER` prints `<gateway>/#login=<credential>`: the credential rides in the
fragment, so it never reaches a server log or a Referer; the page posts it here. A link is good
for ten minutes of the system's clock and for one sign-in: its id is claimed in the gateway's
JetStream key-value bucket (create-only on the server, shared by every gateway replica, entries
kept as long as a link lives), so a second use — here or on another replica — is refused.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from calagent.gateway.auth import AuthError, issue_token, verify_login_token
from calagent.gateway.errors import NO_STORE, error_json
from calagent.gateway.turns import AgentUnreachableError


class LoginRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    token: StrictStr = Field(min_length=1, max_length=4096)


def signin_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.post("/web/login")
    async def login(request: Request) -> JSONResponse:
        gateway = request.app.state.gateway
        try:
            body = LoginRequest.model_validate_json(await request.body())
        except ValidationError:
            return error_json(
                422,
                'the body is {"token": "<the sign-in link\'s credential>"}',
                "invalid_request",
                headers=NO_STORE,
            )
        secret = gateway.settings.require_auth_secret()
        try:
            grant = verify_login_token(body.token, secret, gateway.clock.now())
        except AuthError as exc:
            return error_json(401, str(exc), "unauthorized", headers=NO_STORE)
        try:
            # A fresh value per redemption: only the first create of the link's key succeeds.
            claimed = await gateway.runner.claims.claim(f"login.{grant.link_id}", uuid.uuid4().hex)
        except AgentUnreachableError:
            return error_json(
                503, "sign-in is not available right now; try again", "service_unavailable", headers=NO_STORE
            )
        if claimed != "new":
            return error_json(
                401, "this sign-in link was already used; ask for a new one", "unauthorized", headers=NO_STORE
            )
        token = issue_token(grant.user_id, secret, tz=grant.tz)
        return JSONResponse({"token": token}, headers={"Cache-Control": "no-store"})

    return router
