"""People on the HTTP surface (contract §16): `GET/POST /v1/contacts`, `DELETE /v1/contacts/{id}`,
`POST /v1/mail-address`.

The gateway checks the body's shape and asks commands over `calagent.people.manage`; commands owns
the contacts and the addresses. Another user's contact id answers 404 like one that never existed;
a card of a connected address book (`"source": "carddav"`) is listed but not deleted here (409).
"""

# No `from __future__ import annotations`: the routes' dependency (`authenticate`, passed in) is
# a local name that FastAPI must see as an object, not as a string to resolve in module globals.
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from calagent.contracts import wire
from calagent.contracts.address import EMAIL_MAX
from calagent.contracts.people import (
    ALIASES_MAX,
    NAME_MAX,
    AddContact,
    AnyPeopleCommand,
    ContactOut,
    DeleteContact,
    GetMailAddress,
    ListContacts,
    PeopleRequest,
    PeopleResult,
)
from calagent.gateway.bodies import body_model
from calagent.gateway.errors import error_json
from calagent.gateway.limits import plain_id
from calagent.gateway.state import AuthPrincipal, envelope_of

PEOPLE_TIMEOUT_S = 10.0


class ContactBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    name: StrictStr = Field(min_length=1, max_length=NAME_MAX)
    email: StrictStr = Field(min_length=3, max_length=EMAIL_MAX)
    aliases: list[Annotated[StrictStr, Field(min_length=1, max_length=NAME_MAX)]] = Field(
        default_factory=list, max_length=ALIASES_MAX
    )


def contact_view(contact: ContactOut) -> dict[str, Any]:
    return {
        "id": contact.id,
        "name": contact.name,
        "email": contact.email,
        "aliases": list(contact.aliases),
        "created_at": contact.created_at.isoformat(),
        "source": contact.source,
    }


async def ask_people(request: Request, command: AnyPeopleCommand) -> PeopleResult:
    """Ask commands over `calagent.people.manage`; no usable answer raises `DownstreamError`."""
    result: PeopleResult = await request.app.state.gateway.call(
        "commands", wire.PEOPLE_MANAGE, PeopleRequest(command=command), timeout=PEOPLE_TIMEOUT_S
    )
    return result


def people_router() -> APIRouter:
    router = APIRouter()
    ask = ask_people

    @router.get("/v1/contacts", response_model=None)
    async def listing(request: Request, principal: AuthPrincipal) -> Response:
        answer = await ask(request, ListContacts(envelope=envelope_of(request, principal)))
        return JSONResponse({"contacts": [contact_view(c) for c in answer.contacts]})

    @router.post("/v1/contacts", response_model=None)
    async def add(request: Request, principal: AuthPrincipal) -> Response:
        body = body_model(
            await request.body(), ContactBody, 'the body is {"name": "…", "email": "…", "aliases": ["…"]}'
        )
        if isinstance(body, JSONResponse):
            return body
        answer = await ask(
            request,
            AddContact(
                envelope=envelope_of(request, principal),
                name=body.name,
                email=body.email,
                aliases=tuple(body.aliases),
            ),
        )
        if answer.error is not None or answer.contact is None:
            message = answer.error.message if answer.error else "refused"
            return error_json(422, message, answer.error.code if answer.error else "invalid_request")
        return JSONResponse(contact_view(answer.contact), status_code=201)

    @router.delete("/v1/contacts/{contact_id}", response_model=None)
    async def remove(request: Request, principal: AuthPrincipal, contact_id: str) -> Response:
        if not plain_id(contact_id):
            return error_json(404, "no contact with this id", "not_found")
        answer = await ask(
            request,
            DeleteContact(envelope=envelope_of(request, principal), contact_id=contact_id),
        )
        if answer.error is not None and answer.error.code == "read_only":
            return error_json(409, answer.error.message, "read_only")
        if not answer.deleted:
            return error_json(404, "no contact with this id", "not_found")
        return Response(status_code=204)

    @router.post("/v1/mail-address", response_model=None)
    async def mail_address(request: Request, principal: AuthPrincipal) -> Response:
        answer = await ask(request, GetMailAddress(envelope=envelope_of(request, principal)))
        return JSONResponse({"address": answer.address})

    return router
