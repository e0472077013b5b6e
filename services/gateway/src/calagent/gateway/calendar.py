"""Reads of the caller's calendar (contract §4, §9): `GET /v1/events`, `GET /v1/commands/active`
(the pending command), `GET /v1/calendar.ics`, and the automation plans (`GET /v1/plans`,
`DELETE /v1/plans/{id}`), offers that never run by themselves. Each is one query to commands."""

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter
from fastapi.responses import Response

from calagent.contracts.limits import (
    OUT_OF_RANGE_MESSAGE,
    RANGE_TOO_LONG_MESSAGE,
    range_too_long,
    within_supported_years,
)
from calagent.contracts.queries import (
    DeletePlan,
    ExportIcs,
    GetActiveStub,
    ListPlans,
    ListWaiting,
    QueryRange,
)
from calagent.contracts.turns import event_view, stub_view
from calagent.gateway.errors import DownstreamError, UnprocessableError, error_json
from calagent.gateway.limits import plain_id
from calagent.gateway.state import AuthPrincipal, CurrentGateway

ICS_MEDIA_TYPE = "text/calendar; charset=utf-8"


def parse_instant(name: str, value: str | None, tz: str) -> datetime:
    """An ISO 8601 instant; a date or a time without offset is read in the caller's zone."""
    if not value:
        raise UnprocessableError.one(["query", name], f"'{name}' is required (ISO 8601)", "missing")
    try:
        at = datetime.fromisoformat(value)
    except ValueError as exc:
        raise UnprocessableError.one(
            ["query", name], f"'{name}' is not an ISO 8601 date or date-time"
        ) from exc
    if not within_supported_years(at):
        raise UnprocessableError.one(["query", name], f"'{name}': {OUT_OF_RANGE_MESSAGE}")
    if at.tzinfo is None:
        at = at.replace(tzinfo=ZoneInfo(tz))
    return at


def calendar_router() -> APIRouter:
    router = APIRouter()

    @router.get("/v1/events")
    async def events(
        principal: AuthPrincipal, gw: CurrentGateway, start: str | None = None, end: str | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        start_at = parse_instant("start", start, principal.tz)
        end_at = parse_instant("end", end, principal.tz)
        if end_at <= start_at:
            raise UnprocessableError.one(["query", "end"], "'end' must be after 'start'")
        if range_too_long(start_at, end_at, ZoneInfo(principal.tz)):
            raise UnprocessableError.one(["query", "end"], RANGE_TOO_LONG_MESSAGE)
        result = await gw.query(
            principal, QueryRange(envelope=gw.envelope(principal), start_at=start_at, end_at=end_at)
        )
        return {"events": [event_view(e).model_dump(mode="json") for e in result.events]}

    @router.get("/v1/commands/active")
    async def active_command(principal: AuthPrincipal, gw: CurrentGateway) -> dict[str, Any] | None:
        result = await gw.query(principal, GetActiveStub(envelope=gw.envelope(principal)))
        return None if result.stub is None else stub_view(result.stub).model_dump(mode="json")

    @router.get("/v1/commands/waiting")
    async def waiting_commands(
        principal: AuthPrincipal, gw: CurrentGateway
    ) -> dict[str, list[dict[str, Any]]]:
        """Every offer from outside that waits beside the conversation (contract §19)."""
        result = await gw.query(principal, ListWaiting(envelope=gw.envelope(principal)))
        return {"commands": [stub_view(stub).model_dump(mode="json") for stub in result.waiting]}

    @router.get("/v1/calendar.ics")
    async def calendar_ics(principal: AuthPrincipal, gw: CurrentGateway) -> Response:
        result = await gw.query(principal, ExportIcs(envelope=gw.envelope(principal)))
        if result.ics is None:
            raise DownstreamError(502, "the commands service returned no calendar")
        return Response(
            result.ics,
            media_type=ICS_MEDIA_TYPE,
            headers={"Content-Disposition": 'inline; filename="calendar.ics"'},
        )

    @router.get("/v1/plans")
    async def plans(principal: AuthPrincipal, gw: CurrentGateway) -> dict[str, list[dict[str, Any]]]:
        result = await gw.query(principal, ListPlans(envelope=gw.envelope(principal)))
        return {"plans": [plan.model_dump(mode="json") for plan in result.plans]}

    @router.delete("/v1/plans/{plan_id}", response_model=None)
    async def delete_plan(principal: AuthPrincipal, gw: CurrentGateway, plan_id: str) -> Response:
        # Another user's plan id is answered like one that does not exist.
        if not plain_id(plan_id):
            return error_json(404, "no plan with this id")
        result = await gw.query(principal, DeletePlan(envelope=gw.envelope(principal), plan_id=plan_id))
        if not result.deleted:
            return error_json(404, "no plan with this id")
        return Response(status_code=204)

    return router
