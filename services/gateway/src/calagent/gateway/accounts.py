"""Connected calendars on the HTTP surface (contract §12, §14): `POST /v1/accounts/caldav`,
`GET /v1/accounts` (with each account's health, §22), `PATCH /v1/accounts/{id}` (the default
calendar), `DELETE /v1/accounts/{id}`.

The gateway only checks the body's shape and forwards it to commands over the bus; commands does
the PROPFIND, stores the sealed password and answers. No response carries the password.
"""

# No `from __future__ import annotations`: the routes' dependency (`authenticate`, passed in) is
# a local name that FastAPI must see as an object, not as a string to resolve in module globals.
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from calagent.contracts import wire
from calagent.contracts.caldav import (
    AccountOut,
    AccountRequest,
    AccountResult,
    AnyAccountCommand,
    ConnectCalDav,
    DisconnectAccount,
    ListAccounts,
    SetDefaultCalendar,
)
from calagent.gateway.bodies import body_model
from calagent.gateway.errors import error_json, refusal_json
from calagent.gateway.limits import plain_id
from calagent.gateway.state import AuthPrincipal, envelope_of

ACCOUNT_TIMEOUT_S = 30.0  # a connect waits for the CalDAV server's PROPFIND


class ConnectBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    url: StrictStr = Field(min_length=8, max_length=2000)
    username: StrictStr = Field(min_length=1, max_length=200)
    password: StrictStr = Field(min_length=1, max_length=500, repr=False)


class PatchBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    default_calendar: StrictStr = Field(min_length=1, max_length=2000)


def account_view(account: AccountOut) -> dict[str, Any]:
    return {
        "id": account.id,
        "url": account.url,
        "username": account.username,
        "created_at": account.created_at.isoformat(),
        "last_synced_at": account.last_synced_at.isoformat() if account.last_synced_at else None,
        "calendars": [
            {"name": c.name, "url": c.url, "color": c.color, "default": c.default} for c in account.calendars
        ],
        "last_error": account.last_error.model_dump(mode="json") if account.last_error else None,
        "pending_deliveries": account.pending_deliveries,
        "rejected_deliveries": account.rejected_deliveries,
        "warnings": [w.model_dump(mode="json") for w in account.warnings],
        # How far the account's sync is (issue 44 item 9); null before its first sync starts.
        "sync": account.sync.model_dump(mode="json") if account.sync else None,
    }


def _refusal(answer: AccountResult) -> JSONResponse:
    """An answer without an account: 404 for an account id that is not the caller's, else 422."""
    error = answer.error
    if error is None:
        return error_json(422, "refused", "refused")
    return refusal_json(error.code, error.message)


def _connect_refusal(exc: ValidationError) -> str:
    fields = ", ".join(".".join(str(p) for p in e["loc"]) or "body" for e in exc.errors())
    return f"url, username and password are required strings ({fields})"


def _no_such_account() -> JSONResponse:
    return error_json(404, "no connected account with this id", "not_found")


def accounts_router() -> APIRouter:
    router = APIRouter()

    async def ask(request: Request, command: AnyAccountCommand) -> AccountResult:
        result: AccountResult = await request.app.state.gateway.call(
            "commands", wire.CALDAV_ACCOUNTS, AccountRequest(command=command), timeout=ACCOUNT_TIMEOUT_S
        )
        return result

    @router.post("/v1/accounts/caldav", response_model=None)
    async def connect(request: Request, principal: AuthPrincipal) -> Response:
        body = body_model(await request.body(), ConnectBody, _connect_refusal)
        if isinstance(body, JSONResponse):
            return body
        answer = await ask(
            request,
            ConnectCalDav(
                envelope=envelope_of(request, principal),
                url=body.url,
                username=body.username,
                password=body.password,
            ),
        )
        if answer.account is None or answer.error is not None:
            return _refusal(answer)
        view = account_view(answer.account)
        return JSONResponse({"id": view["id"], "calendars": view["calendars"]}, status_code=201)

    @router.get("/v1/accounts", response_model=None)
    async def listing(request: Request, principal: AuthPrincipal) -> Response:
        answer = await ask(request, ListAccounts(envelope=envelope_of(request, principal)))
        return JSONResponse({"accounts": [account_view(a) for a in answer.accounts]})

    @router.patch("/v1/accounts/{account_id}", response_model=None)
    async def patch(request: Request, principal: AuthPrincipal, account_id: str) -> Response:
        if not plain_id(account_id):
            return _no_such_account()
        body = body_model(
            await request.body(), PatchBody, 'the body is {"default_calendar": "<calendar url>"}'
        )
        if isinstance(body, JSONResponse):
            return body
        answer = await ask(
            request,
            SetDefaultCalendar(
                envelope=envelope_of(request, principal),
                account_id=account_id,
                calendar_url=body.default_calendar,
            ),
        )
        if answer.account is None or answer.error is not None:
            return _refusal(answer)
        return JSONResponse(account_view(answer.account))

    @router.delete("/v1/accounts/{account_id}", response_model=None)
    async def disconnect(request: Request, principal: AuthPrincipal, account_id: str) -> Response:
        if not plain_id(account_id):
            return _no_such_account()
        answer = await ask(
            request, DisconnectAccount(envelope=envelope_of(request, principal), account_id=account_id)
        )
        if not answer.deleted:
            return _no_such_account()
        return Response(status_code=204)

    return router
