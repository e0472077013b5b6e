"""The caller's conversation on the HTTP surface (contract §18): `GET /v1/messages`.

The agent keeps the archive; the gateway asks it over `calagent.agent.history` for one page of
the caller's messages, each with its turn's outcome and the command it left pending, so a page
reloaded in the browser shows the conversation and the card's explanation again.
"""

# No `from __future__ import annotations`: FastAPI must see the dependency as an object.
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from calagent.contracts import wire
from calagent.contracts.text import NUL
from calagent.contracts.turns import MAX_HISTORY_PAGE, HistoryMessage, HistoryRequest
from calagent.gateway.errors import error_json
from calagent.gateway.limits import whole_number
from calagent.gateway.state import AuthPrincipal

HISTORY_TIMEOUT_S = 10.0
DEFAULT_CONVERSATION = "default"  # the gateway's conversation when a chat names none
DEFAULT_PAGE = 50


def message_view(message: HistoryMessage) -> dict[str, Any]:
    view: dict[str, Any] = message.model_dump(mode="json", exclude={"tool_calls", "model_calls"})
    if message.role == "assistant":
        view["tool_calls"] = [call.model_dump(mode="json") for call in message.tool_calls]
        view["model_calls"] = message.model_calls
    return view


def _int_param(name: str, raw: str | None, low: int, high: int) -> int | JSONResponse | None:
    if raw is None or raw == "":
        return None
    value = whole_number(raw, low, high)
    if value is None:
        return error_json(422, f"query.{name}: a whole number from {low} to {high}", "invalid_request")
    return value


def history_router() -> APIRouter:
    router = APIRouter()

    @router.get("/v1/messages", response_model=None)
    async def messages(
        request: Request,
        principal: AuthPrincipal,
        conversation_id: str | None = None,
        before: str | None = None,
        limit: str | None = None,
    ) -> JSONResponse:
        conversation = conversation_id or DEFAULT_CONVERSATION
        if len(conversation) > 128 or NUL in conversation:
            return error_json(422, "query.conversation_id: at most 128 characters", "invalid_request")
        page_end = _int_param("before", before, 1, 2**62)
        if isinstance(page_end, JSONResponse):
            return page_end
        size = _int_param("limit", limit, 1, MAX_HISTORY_PAGE)
        if isinstance(size, JSONResponse):
            return size
        result = await request.app.state.gateway.call(
            "agent",
            wire.AGENT_HISTORY,
            HistoryRequest(
                user_id=principal.user_id,
                conversation_id=conversation,
                before=page_end,
                limit=size or DEFAULT_PAGE,
            ),
            timeout=HISTORY_TIMEOUT_S,
        )
        return JSONResponse(
            {"messages": [message_view(m) for m in result.messages], "before": result.before},
            headers={"Cache-Control": "no-store"},
        )

    return router
