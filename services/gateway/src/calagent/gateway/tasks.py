"""The user's tasks on the HTTP surface (contract §21): `GET/POST /v1/tasks`,
`PATCH/DELETE /v1/tasks/{id}`. Each is one query of the commands service (`ListTasks`, `SaveTask`);
a body that is not a task is 422 with the field named (FastAPI's validation, §11's shape), and an
id that is not the caller's is 404 exactly like one that does not exist."""

# No `from __future__ import annotations`: FastAPI must see the dependency as an object.
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from calagent.contracts.queries import QueryResult
from calagent.contracts.tasks import ListTasks, SaveTask, TaskFields, TaskPatch
from calagent.gateway.auth import Principal
from calagent.gateway.errors import DownstreamError, error_json
from calagent.gateway.limits import plain_id
from calagent.gateway.state import AuthPrincipal, CurrentGateway, Gateway

NOT_FOUND = "no task with that id"


async def _save(gw: Gateway, principal: Principal, query: SaveTask) -> QueryResult | JSONResponse:
    result = await gw.ask(query)
    if result.error is None:
        return result
    if result.error.code == "not_found":
        return error_json(404, NOT_FOUND)
    if result.error.code == "invalid_arguments":
        return error_json(422, result.error.message)
    raise DownstreamError(502, result.error.message)


def _saved(saved: QueryResult) -> dict[str, Any]:
    """The task saved, with the other tasks' blocks placing it moved (contract §21: a client is
    told of every block that moved, as the chat's receipt tells the user)."""
    moved = [m.model_dump(mode="json") for m in saved.moved_blocks]
    return saved.tasks[0].model_dump(mode="json") | {"moved_blocks": moved}


def tasks_router() -> APIRouter:
    router = APIRouter()

    @router.get("/v1/tasks")
    async def list_tasks(
        principal: AuthPrincipal, gw: CurrentGateway, incomplete_only: bool = False
    ) -> dict[str, list[dict[str, Any]]]:
        query = ListTasks(envelope=gw.envelope(principal), incomplete_only=incomplete_only)
        result = await gw.query(principal, query)
        return {"tasks": [t.model_dump(mode="json") for t in result.tasks]}

    @router.post("/v1/tasks", response_model=None, status_code=201)
    async def add_task(principal: AuthPrincipal, gw: CurrentGateway, body: TaskFields) -> Any:
        query = SaveTask(envelope=gw.envelope(principal), op="create", fields=body)
        saved = await _save(gw, principal, query)
        if isinstance(saved, JSONResponse):
            return saved
        return JSONResponse(_saved(saved), status_code=201)

    @router.patch("/v1/tasks/{task_id}", response_model=None)
    async def change_task(principal: AuthPrincipal, gw: CurrentGateway, task_id: str, body: TaskPatch) -> Any:
        if not plain_id(task_id):
            return error_json(404, NOT_FOUND)
        query = SaveTask(envelope=gw.envelope(principal), op="patch", task_id=task_id, patch=body)
        saved = await _save(gw, principal, query)
        if isinstance(saved, JSONResponse):
            return saved
        return JSONResponse(_saved(saved))

    @router.delete("/v1/tasks/{task_id}", response_model=None)
    async def delete_task(principal: AuthPrincipal, gw: CurrentGateway, task_id: str) -> Response:
        if not plain_id(task_id):
            return error_json(404, NOT_FOUND)
        saved = await _save(
            gw, principal, SaveTask(envelope=gw.envelope(principal), op="delete", task_id=task_id)
        )
        if isinstance(saved, JSONResponse):
            return saved
        return Response(status_code=204)

    return router
