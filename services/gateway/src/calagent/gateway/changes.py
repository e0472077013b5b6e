"""The change log on the HTTP surface (contract §15): `GET /v1/changes`,
`POST /v1/changes/{id}/undo`.

The list is a read of the commands service (`ListChanges` on `calagent.command.query`, the
caller's only). An undo is one more command: a turn carrying the client's own `undo_change` call,
which the agent runs without the model like `POST /v1/commands`, answered with §4's JSON. An undo
that is refused is an error (§11's body; chat answers it in words instead): an id that is not the
caller's is answered 404, exactly like one that does not exist, and a change undone already or
whose event changed again since is 409. Nothing is written either way.
"""

# No `from __future__ import annotations`: FastAPI must see the dependency as an object.
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from calagent.contracts.queries import ListChanges
from calagent.contracts.turns import DirectCall
from calagent.gateway.commands import described, run_direct
from calagent.gateway.errors import error_json
from calagent.gateway.limits import plain_id
from calagent.gateway.state import AuthPrincipal
from calagent.runtime.timeline import epoch_ms

NOT_FOUND = "no change with that id"
# The status and message of each refusal of an undo (the code of the tool call's `error:<code>`).
REFUSED: dict[str, tuple[int, str]] = {
    "not_found": (404, NOT_FOUND),
    "nothing_to_undo": (404, "there is no change to undo"),
    "already_undone": (409, "that change was undone already"),
    "changed_since": (409, "the event was changed again after that change; nothing was undone"),
}


def changes_router() -> APIRouter:
    router = APIRouter()

    @router.get("/v1/changes")
    async def changes(
        request: Request,
        principal: AuthPrincipal,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        before: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    ) -> dict[str, list[dict[str, Any]]]:
        gateway = request.app.state.gateway
        result = await gateway.query(
            principal, ListChanges(envelope=gateway.envelope(principal), limit=limit, before=before)
        )
        return {"changes": [c.model_dump(mode="json") for c in result.changes]}

    @router.post("/v1/changes/{change_id}/undo", response_model=None)
    async def undo(request: Request, principal: AuthPrincipal, change_id: str) -> JSONResponse:
        received_ms = epoch_ms()
        if not plain_id(change_id):
            return error_json(404, NOT_FOUND)
        call = DirectCall(tool="undo_change", arguments={"change_id": change_id})
        outcome = await run_direct(
            request,
            principal,
            call,
            text=described(call),
            received_ms=received_ms,
        )
        answer = outcome.answer
        for made in answer.tool_calls:
            kind, _, code = made.result.partition(":")
            if made.name == "undo_change" and kind == "error" and code in REFUSED:
                status, message = REFUSED[code]
                return error_json(status, message, code)
        return JSONResponse(answer.model_dump(mode="json"))

    return router
