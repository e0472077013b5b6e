"""Commands without the model (contract §18): `POST /v1/commands`.

`{"tool": "update_schedule" | "delete_schedule" | "prepare_or_create_schedule", "arguments": {…}}`
(and the card's `cancel_schedule_command` / `confirm_command`) becomes a turn like any chat
message — the same JetStream subject, the same idempotency by `client_message_id`, the same agent
— that carries the call instead of words. The agent runs it through the dispatch a model's call
takes (argument models, commands, holds, receipts) and calls no model; the answer is the JSON of
`POST /v1/chat` (§4). The gateway never writes through commands itself.
"""

# No `from __future__ import annotations`: FastAPI must see the dependency as an object.
import asyncio
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from calagent.contracts.text import refuse_unstorable
from calagent.contracts.transport import Unwrapped
from calagent.contracts.turns import MAX_MESSAGE_CHARS, DirectCall, DirectTool
from calagent.gateway.auth import Principal
from calagent.gateway.errors import error_json
from calagent.gateway.state import AuthPrincipal
from calagent.gateway.turns import ChatTurn, TurnOutcome
from calagent.gateway.web.i18n import LANG_COOKIE, negotiate
from calagent.runtime.timeline import epoch_ms

DEFAULT_CONVERSATION = "default"


class CommandBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    tool: DirectTool
    arguments: dict[str, Any] = Field(default_factory=dict)
    conversation_id: StrictStr | None = Field(default=None, min_length=1, max_length=128)
    client_message_id: StrictStr | None = Field(default=None, min_length=1, max_length=200)


def described(call: DirectCall) -> str:
    """What the archive keeps of a command without words: the tool and its arguments."""
    text = f"{call.tool} {json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)}"
    return text[:MAX_MESSAGE_CHARS]


async def run_direct(
    request: Request,
    principal: Principal,
    call: DirectCall,
    *,
    text: str,
    conversation_id: str | None = None,
    client_message_id: str | None = None,
    received_ms: float | None = None,
) -> TurnOutcome:
    """A client's own tool call as a turn (the agent runs it without the model), answered whole."""
    # The language the answer is written in: the page's (its Accept-Language or the switch's
    # cookie); an API client that says nothing is answered in the deployment's default.
    accept = request.headers.get("accept-language")
    cookie = request.cookies.get(LANG_COOKIE)
    lang = negotiate(accept, cookie) if accept or cookie else None
    turn = ChatTurn(
        principal=principal,
        raw_text=text,
        unwrapped=Unwrapped(text=text),
        conversation_id=conversation_id or DEFAULT_CONVERSATION,
        channel="web" if accept or cookie else "api",
        client_message_id=client_message_id,
        active_command_id=None,
        received_ms=received_ms or epoch_ms(),
        direct=call,
        lang=lang,
    )
    gateway = request.app.state.gateway
    task = gateway.spawn(gateway.runner.run(turn))
    # Shielded like a chat turn: a client that hangs up does not cancel it.
    outcome: TurnOutcome = await asyncio.shield(task)
    return outcome


def commands_router() -> APIRouter:
    router = APIRouter()

    @router.post("/v1/commands", response_model=None)
    async def command(request: Request, principal: AuthPrincipal) -> JSONResponse:
        received_ms = epoch_ms()
        try:
            raw = json.loads(await request.body())
            body = CommandBody.model_validate(raw)
            text = described(DirectCall(tool=body.tool, arguments=body.arguments))
            refuse_unstorable(text)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return error_json(422, "the body is not valid JSON", "invalid_request")
        except ValidationError as exc:
            fields = "; ".join(
                f"body.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            return error_json(422, fields, "invalid_request")
        except ValueError as exc:
            return error_json(422, str(exc), "invalid_request")
        if len(text) >= MAX_MESSAGE_CHARS:
            return error_json(422, "the arguments are too long", "invalid_request")
        outcome = await run_direct(
            request,
            principal,
            DirectCall(tool=body.tool, arguments=body.arguments),
            text=text,
            conversation_id=body.conversation_id,
            client_message_id=body.client_message_id,
            received_ms=received_ms,
        )
        return JSONResponse(outcome.answer.model_dump(mode="json"))

    return router
