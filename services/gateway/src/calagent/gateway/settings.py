"""Settings and free/busy sharing on the HTTP surface (contract §16, §18): `GET/PUT /v1/settings`,
`GET/POST /v1/sharing`, `DELETE /v1/sharing/{user id}`.

The body is validated here with the contract's own model (`contracts.settings.SettingsPatch`), so a
bad value is a 422 naming the field and nothing is sent on; commands owns the tables. A saved
zone is remembered by this replica at once (`UserZones.remember`): the caller's next turn is in it.
"""

# No `from __future__ import annotations`: the routes' dependency (`authenticate`, passed in) is
# a local name that FastAPI must see as an object, not as a string to resolve in module globals.
from typing import Any, cast

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from calagent.contracts.envelope import Envelope
from calagent.contracts.people import PeopleResult
from calagent.contracts.settings import (
    SETTINGS_FIELDS,
    USER_ID_MAX,
    AnySettingsCommand,
    GetSettings,
    ListSharing,
    PutSettings,
    SettingsOut,
    SettingsPatch,
    Share,
    SharingLevel,
    SharingOut,
    Unshare,
)
from calagent.contracts.text import unstorable_in
from calagent.gateway.auth import Principal
from calagent.gateway.bodies import json_value
from calagent.gateway.errors import error_json, refusal_json
from calagent.gateway.people import ask_people
from calagent.gateway.state import AuthPrincipal, envelope_of


class ShareBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=True)

    with_user: StrictStr = Field(alias="with", min_length=1, max_length=USER_ID_MAX)
    level: SharingLevel = "freebusy"


def settings_view(settings: SettingsOut) -> dict[str, Any]:
    return {
        "tz": settings.tz,
        "email": settings.email,
        "language": settings.language,
        "work_hours": {day: list(span) for day, span in settings.work_hours.items()},
        "invitations_from": settings.invitations_from,
        "buffer_minutes": settings.buffer_minutes,
    }


def sharing_view(sharing: SharingOut) -> dict[str, Any]:
    def entries(items: Any) -> list[dict[str, Any]]:
        return [{"user": e.user, "level": e.level, "created_at": e.created_at.isoformat()} for e in items]

    return {"shared_with": entries(sharing.shared_with), "shared_with_me": entries(sharing.shared_with_me)}


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"] if p != "__root__")
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def _json_object(raw: bytes) -> dict[str, Any] | JSONResponse:
    data = json_value(raw)
    if isinstance(data, JSONResponse):
        return data
    if not isinstance(data, dict):
        return error_json(422, "the body must be a JSON object", "invalid_request")
    return cast(dict[str, Any], data)


def _envelope(request: Request, principal: Principal) -> Envelope:
    # The default zone shown is the token's (a saved one is read from the table).
    return envelope_of(request, principal).model_copy(update={"tz": principal.credential_tz})


async def _ask(request: Request, command: AnySettingsCommand) -> PeopleResult | JSONResponse:
    answer = await ask_people(request, command)
    if answer.error is not None:
        return refusal_json(answer.error.code, answer.error.message)
    return answer


async def _sharing_answer(request: Request, command: AnySettingsCommand, status: int = 200) -> Response:
    answer = await _ask(request, command)
    if isinstance(answer, JSONResponse):
        return answer
    if answer.sharing is None:
        return error_json(502, "the commands service returned no sharing", "bad_gateway")
    return JSONResponse(sharing_view(answer.sharing), status_code=status)


def settings_router() -> APIRouter:
    router = APIRouter()

    @router.get("/v1/settings", response_model=None)
    async def read(request: Request, principal: AuthPrincipal) -> Response:
        answer = await _ask(request, GetSettings(envelope=_envelope(request, principal)))
        if isinstance(answer, JSONResponse):
            return answer
        if answer.settings is None:
            return error_json(502, "the commands service returned no settings", "bad_gateway")
        return JSONResponse(settings_view(answer.settings))

    @router.put("/v1/settings", response_model=None)
    async def write(request: Request, principal: AuthPrincipal) -> Response:
        data = _json_object(await request.body())
        if isinstance(data, JSONResponse):
            return data
        unknown = sorted(set(data) - set(SETTINGS_FIELDS))
        if unknown:
            return error_json(
                422,
                f"unknown setting {', '.join(unknown)}; settings are {', '.join(SETTINGS_FIELDS)}",
                "invalid_request",
            )
        if not data:
            return error_json(422, f"name at least one of {', '.join(SETTINGS_FIELDS)}", "invalid_request")
        try:
            patch = SettingsPatch.model_validate(data)
        except ValidationError as exc:
            return error_json(422, _validation_message(exc), "invalid_request")
        fields = tuple(f for f in SETTINGS_FIELDS if f in data)
        answer = await _ask(
            request, PutSettings(envelope=_envelope(request, principal), patch=patch, fields=fields)
        )
        if isinstance(answer, JSONResponse):
            return answer
        if answer.settings is None:
            return error_json(502, "the commands service returned no settings", "bad_gateway")
        if "tz" in fields:
            request.app.state.gateway.zones.remember(
                principal.user_id, answer.settings.tz if answer.settings.tz_saved else None
            )
        return JSONResponse(settings_view(answer.settings))

    @router.get("/v1/sharing", response_model=None)
    async def listing(request: Request, principal: AuthPrincipal) -> Response:
        return await _sharing_answer(request, ListSharing(envelope=_envelope(request, principal)))

    @router.post("/v1/sharing", response_model=None)
    async def share(request: Request, principal: AuthPrincipal) -> Response:
        data = _json_object(await request.body())
        if isinstance(data, JSONResponse):
            return data
        try:
            body = ShareBody.model_validate(data)
        except ValidationError:
            return error_json(
                422, 'the body is {"with": "<user id>", "level": "freebusy"}', "invalid_request"
            )
        if body.with_user == principal.user_id:
            return error_json(422, "free/busy is shared with another user", "invalid_request")
        command = Share(envelope=_envelope(request, principal), with_user=body.with_user, level=body.level)
        return await _sharing_answer(request, command, status=201)

    @router.delete("/v1/sharing/{with_user:path}", response_model=None)
    async def unshare(request: Request, principal: AuthPrincipal, with_user: str) -> Response:
        if not 1 <= len(with_user) <= USER_ID_MAX or unstorable_in(with_user):
            return error_json(404, "you do not share with this user", "not_found")
        answer = await _ask(request, Unshare(envelope=_envelope(request, principal), with_user=with_user))
        if isinstance(answer, JSONResponse):
            return answer
        return Response(status_code=204)

    return router
