"""A chat turn (contract §4): `POST /v1/chat`, answered whole as JSON or streamed as SSE.

The body is parsed here (every malformed one answered in the contract's shape), the user's own
words are split from what a channel wrapped around them, and the turn goes to the agent through
`TurnRunner`; the answer, or the 503 of a model endpoint that is down, comes back.
"""

import asyncio
import json
import math
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from opentelemetry import trace
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator
from starlette.background import BackgroundTask

from calagent.contracts.envelope import Channel
from calagent.contracts.text import refuse_unstorable
from calagent.contracts.transport import own_names, unwrap
from calagent.contracts.turns import MAX_MESSAGE_CHARS, TurnEvent
from calagent.gateway.errors import UnprocessableError, error_body, error_code, error_json
from calagent.gateway.state import DEFAULT_CONVERSATION, AuthPrincipal, CurrentGateway, Gateway
from calagent.gateway.turns import ChatTurn, TurnOutcome, TurnTimeoutError
from calagent.runtime.timeline import epoch_ms

tracer = trace.get_tracer("calagent.gateway")


class ChatRequest(BaseModel):
    """`POST /v1/chat`; strict types so a number or a list is refused, not coerced into text."""

    model_config = ConfigDict(strict=True, extra="ignore")

    message: StrictStr
    conversation_id: StrictStr | None = Field(default=None, min_length=1, max_length=128)
    client_message_id: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    active_command_id: StrictStr | None = Field(default=None, min_length=1, max_length=64)
    channel: Channel = "web"

    @field_validator("message", "conversation_id", "client_message_id", "active_command_id")
    @classmethod
    def _storable(cls, value: str | None) -> str | None:
        return value if value is None else refuse_unstorable(value)

    @field_validator("message")
    @classmethod
    def _message_bounds(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("message is empty")
        if len(value) > MAX_MESSAGE_CHARS:
            raise ValueError(f"message is {len(value)} characters; at most {MAX_MESSAGE_CHARS} are accepted")
        return value


def parse_chat_body(raw: bytes) -> ChatRequest:
    try:
        data = json.loads(raw)
    except RecursionError as exc:
        raise UnprocessableError.one(["body"], "the body is nested too deeply", "json_invalid") from exc
    except ValueError as exc:
        # JSONDecodeError and UnicodeDecodeError are ValueErrors, and so is an integer literal
        # longer than Python converts (4,300 digits).
        raise UnprocessableError.one(["body"], f"the body is not valid JSON: {exc}", "json_invalid") from exc
    if not isinstance(data, dict):
        raise UnprocessableError.one(
            ["body"], "the body must be a JSON object with a 'message' string", "dict_type"
        )
    try:
        return ChatRequest.model_validate(data)
    except ValidationError as exc:
        raise UnprocessableError(
            [
                {"loc": ["body", *err["loc"]], "msg": err["msg"], "type": err["type"]}
                for err in exc.errors(include_url=False)
            ]
        ) from exc


def _sse(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


def _event_json(event: TurnEvent) -> str:
    return event.model_dump_json(exclude_none=True)


async def _stream(gw: Gateway, turn: ChatTurn) -> Response:
    events: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
    task = gw.spawn(gw.runner.run(turn, events.put_nowait))
    task.add_done_callback(lambda _t: events.put_nowait(None))
    accepted = asyncio.ensure_future(turn.accepted.wait())
    await asyncio.wait({task, accepted}, return_when=asyncio.FIRST_COMPLETED)
    accepted.cancel()
    failure = task.exception() if task.done() else None
    if failure is not None:
        # Failed before the agent had it (no stream, lock wait ran out): a real HTTP status.
        raise failure

    async def body() -> AsyncIterator[bytes]:
        while (event := await events.get()) is not None:
            yield _sse(event.type, _event_json(event))
        exc = task.exception()
        if isinstance(exc, TurnTimeoutError):
            data = error_body(error_code(504), "the agent did not answer in time", turn_id=exc.turn_id)
            yield _sse("error", json.dumps(data))
            return
        if exc is not None:
            data = error_body(error_code(500), "the turn failed in the gateway")
            yield _sse("error", json.dumps(data))
            return
        outcome: TurnOutcome = task.result()
        done_span = tracer.start_span("gateway.done", attributes={"calagent.turn_id": turn.turn_id})
        yield _sse("turn.done", outcome.answer.model_dump_json())
        done_span.end()

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def chat_router() -> APIRouter:
    router = APIRouter()

    # The route parses its own body (to answer every malformed one in the contract's shape); the
    # schema still documents it, so clients and the fuzz test see what a chat body is.
    @router.post(
        "/v1/chat",
        response_model=None,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ChatRequest.model_json_schema()}},
            }
        },
    )
    async def chat(request: Request, principal: AuthPrincipal, gw: CurrentGateway) -> Response:
        received_ms = epoch_ms()
        receive_span = tracer.start_span(
            "gateway.receive", attributes={"calagent.user_id": principal.user_id}
        )
        try:
            with trace.use_span(receive_span, end_on_exit=False):
                body = parse_chat_body(await request.body())
                unwrapped = unwrap(body.message, own_names(principal.user_id, principal.aliases))
                if not unwrapped.text:
                    raise UnprocessableError.one(
                        ["body", "message"],
                        "message has no text of its own once channel wrappers are removed",
                    )
                turn = ChatTurn(
                    principal=principal,
                    raw_text=body.message,
                    unwrapped=unwrapped,
                    conversation_id=body.conversation_id or DEFAULT_CONVERSATION,
                    channel=body.channel,
                    client_message_id=body.client_message_id,
                    active_command_id=body.active_command_id,
                    received_ms=received_ms,
                    receive_span=receive_span,
                )
                receive_span.set_attribute("calagent.turn_id", turn.turn_id)
                receive_span.set_attribute("calagent.third_party", unwrapped.third_party)
                if "text/event-stream" in request.headers.get("accept", ""):
                    return await _stream(gw, turn)
                task = gw.spawn(gw.runner.run(turn))
                # Shielded: a client that hangs up does not cancel a turn other retries may await.
                outcome: TurnOutcome = await asyncio.shield(task)
        finally:
            # Normally ended at publish; this covers a refusal or a replayed answer.
            if receive_span.is_recording():
                receive_span.end()
        done_span = tracer.start_span("gateway.done", attributes={"calagent.turn_id": turn.turn_id})
        refused_for = outcome.answer.retry_after_s
        if refused_for is not None:
            # The model endpoint is treated as down: said at once, with when to try again (§17).
            done_span.end()
            response = error_json(
                503,
                outcome.answer.reply,
                "model_unavailable",
                turn_id=turn.turn_id,
                retry_after_s=refused_for,
            )
            response.headers["Retry-After"] = str(math.ceil(refused_for))
            return response

        async def sent() -> None:
            # A coroutine, so it runs on the loop: a plain callable goes to a worker thread.
            done_span.end()

        return Response(
            outcome.answer.model_dump_json(), media_type="application/json", background=BackgroundTask(sent)
        )

    return router
