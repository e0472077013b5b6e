"""What the eval recorder keeps about the caller's turns: `GET /v1/turns/{id}/timeline` (one turn's
latency segments) and `GET /v1/usage` (model tokens per day in the caller's zone, contract §17)."""

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from calagent.contracts import wire
from calagent.contracts.evalrec import TimelineRequest, UsageRequest
from calagent.contracts.limits import MAX_RANGE_DAYS
from calagent.gateway.errors import UnprocessableError, error_json
from calagent.gateway.limits import plain_id, whole_number
from calagent.gateway.state import AuthPrincipal, CurrentGateway


def records_router() -> APIRouter:
    router = APIRouter()

    @router.get("/v1/turns/{turn_id}/timeline", response_model=None)
    async def timeline(
        principal: AuthPrincipal, gw: CurrentGateway, turn_id: str
    ) -> dict[str, Any] | JSONResponse:
        if not plain_id(turn_id):
            return error_json(404, "no timeline for this turn")
        result = await gw.call(
            "evalrec", wire.EVALREC_TIMELINE, TimelineRequest(turn_id=turn_id, user_id=principal.user_id)
        )
        if result.timeline is None:
            return error_json(404, "no timeline for this turn")
        return result.timeline.model_dump(mode="json")

    @router.get("/v1/usage", response_model=None)
    async def usage(principal: AuthPrincipal, gw: CurrentGateway, days: str = "7") -> dict[str, Any]:
        """The caller's model tokens over the last `days` days, per day in the caller's zone (§17)."""
        window = whole_number(days, 1, MAX_RANGE_DAYS)
        if window is None:
            raise UnprocessableError.one(
                ["query", "days"], f"days must be a whole number from 1 to {MAX_RANGE_DAYS}"
            )
        result = await gw.call(
            "evalrec",
            wire.EVALREC_USAGE,
            UsageRequest(user_id=principal.user_id, days=window, by="day", tz=principal.tz),
        )
        return result.model_dump(mode="json")

    return router
