"""An OpenAI-compatible chat-completions endpoint whose answers come from a `Script`.

The wire format follows what api.openai.com sends, chunk by chunk, because the agent talks to it with
the real `openai` SDK and must not be able to tell the difference at the protocol level.
"""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.responses import Response as HTTPResponse
from pydantic import ValidationError

from calagent.scriptedmodel.quirks import call_as_text, styled_arguments
from calagent.scriptedmodel.script import Conversation, Quirks, Response, Script, message_text
from calagent.scriptedmodel.state import DEFAULT_MODEL_NAME, ScriptedModelState

__all__ = ["create_app"]


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_DROP_KEY = "calagent.scriptedmodel.drop"


class _ScriptedApp(FastAPI):
    """FastAPI that can hang up on a client, which plain ASGI has no message for.

    The outermost `send` comes straight from uvicorn's request cycle, which holds the transport; every
    middleware below wraps it, so the hook must live here.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        dropped = False

        async def drop() -> None:
            nonlocal dropped
            transport = getattr(getattr(send, "__self__", None), "transport", None)
            if transport is None:
                raise RuntimeError("drop_connection needs uvicorn as the server")
            dropped = True
            transport.close()
            # Let the server notice the lost connection before the endpoint returns, so it does not
            # try to answer on a closed socket.
            for _ in range(3):
                await asyncio.sleep(0)

        async def guarded_send(message: Message) -> None:
            if not dropped:
                await send(message)

        scope[_DROP_KEY] = drop
        await super().__call__(scope, receive, guarded_send)


def _approx_tokens(text: str) -> int:
    # Roughly what a BPE tokenizer does: a CJK character is about one token, four ASCII characters are.
    if not text:
        return 0
    wide = sum(1 for ch in text if ord(ch) > 0x2E7F)
    return wide + math.ceil((len(text) - wide) / 4)


def _prompt_tokens(body: dict[str, Any]) -> int:
    total = 0
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            total += 4 + _approx_tokens(message_text(message.get("content")))
            if message.get("tool_calls"):
                total += _approx_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    if body.get("tools"):
        total += _approx_tokens(json.dumps(body["tools"], ensure_ascii=False))
    return max(total, 1)


@dataclass(frozen=True)
class _Rendered:
    text: str | None
    calls: list[tuple[str, str, str]]  # (id, name, arguments)
    finish_reason: str
    usage: dict[str, int]


def _forced_tool(body: dict[str, Any]) -> str | None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        function = choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None


def _render(
    response: Response, conversation: Conversation, body: dict[str, Any], quirks: Quirks | None = None
) -> _Rendered:
    quirks = quirks or Quirks()
    text = conversation.substitute(response.text) if response.text is not None else None
    calls = [
        (
            "" if quirks.omit_call_ids else f"call_{secrets.token_hex(12)}",
            spec.name,
            styled_arguments(spec.render_arguments(conversation), quirks),
        )
        for spec in response.tool_calls or []
    ]
    forced = _forced_tool(body)
    if forced is not None and not calls and not quirks.ignore_tool_choice:
        # A forced tool_choice is honoured: a call to that tool, whatever the rule said.
        calls = [("" if quirks.omit_call_ids else f"call_{secrets.token_hex(12)}", forced, "{}")]
    if calls and quirks.tool_call_style != "native":
        written = "\n".join(call_as_text(name, args, quirks) for _, name, args in calls)
        text = f"{text}\n{written}" if text else written
        calls = []
    finish = response.finish_reason or ("tool_calls" if calls else "stop")
    completion = _approx_tokens(text or "") + sum(
        _approx_tokens(n) + _approx_tokens(a) + 3 for _, n, a in calls
    )
    prompt = _prompt_tokens(body)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return _Rendered(text=text, calls=calls, finish_reason=finish, usage=usage)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _error(status: int, message: str, kind: str, code: str | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status)


def create_app(
    script: Script | None = None,
    *,
    state: ScriptedModelState | None = None,
    model_name: str = DEFAULT_MODEL_NAME,
) -> FastAPI:
    """The HTTP app. Pass `script`, or a `state` to share the request log with the caller."""
    if state is None:
        if script is None:
            raise ValueError("create_app needs a script or a state")
        state = ScriptedModelState(script=script, model_name=model_name)
    elif script is not None:
        state.set_script(script)
    app = _ScriptedApp(title="calagent scripted model", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.scripted = state
    app.include_router(openai_router)
    app.include_router(control_router)
    return app


async def _current_state(request: Request) -> ScriptedModelState:
    # A coroutine: FastAPI runs a plain function dependency on a worker thread, per request.
    state: ScriptedModelState = request.app.state.scripted
    return state


CurrentState = Annotated[ScriptedModelState, Depends(_current_state)]

# What the agent's `openai` client calls: chat completions, the model list, a health probe.
openai_router = APIRouter()
# What tests and the demo call to steer the model: swap the script, read the request log, go down.
control_router = APIRouter()


@openai_router.post("/v1/chat/completions")
@openai_router.post("/chat/completions", include_in_schema=False)
async def chat_completions(request: Request, state: CurrentState) -> HTTPResponse:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        state.record({}, None, 400)
        return _error(400, "request body is not valid JSON", "invalid_request_error")
    refusal = _refusal(state, body)
    if refusal is not None:
        return refusal
    _rule, response = state.answer(body)
    if response.delay_ms:
        await asyncio.sleep(response.delay_ms / 1000)
    drop: Callable[[], Awaitable[None]] = request.scope[_DROP_KEY]
    if response.drop_connection or (response.drop_after_chunks is not None and not body.get("stream")):
        await drop()
        return HTTPResponse(status_code=204)
    if response.error is not None:
        return JSONResponse(
            response.error.body(), status_code=response.error.status, headers=response.error.headers
        )
    quirks = state.script.quirks
    rendered = _render(response, Conversation.from_request(body), body, quirks)
    requested_model = body.get("model")
    model = requested_model if isinstance(requested_model, str) else state.model_name
    completion_id = f"chatcmpl-{secrets.token_hex(12)}"
    created = int(time.time())
    if not body.get("stream"):
        return await _whole_completion(response, rendered, completion_id, created, model, quirks)
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage")) and not quirks.omit_usage
    return StreamingResponse(
        _stream(response, rendered, completion_id, created, model, include_usage, drop),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _refusal(state: ScriptedModelState, body: Any) -> JSONResponse | None:
    """The error a request gets before the script is consulted (recorded with no rule), or None."""
    if not isinstance(body, dict):
        state.record({}, None, 400)
        return _error(400, "request body must be a JSON object", "invalid_request_error")
    if state.down:
        state.record(body, None, 503)
        return _error(503, "The scripted model is down.", "server_error", "service_unavailable")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        state.record(body, None, 400)
        return _error(400, "'messages' must be a non-empty array", "invalid_request_error")
    if state.script.quirks.no_tools and body.get("tools"):
        state.record(body, None, 400)
        return _error(400, f"{state.model_name} does not support tools", "invalid_request_error")
    return None


async def _whole_completion(
    response: Response, rendered: _Rendered, completion_id: str, created: int, model: str, quirks: Quirks
) -> JSONResponse:
    """The non-streaming answer: one `chat.completion` object after the whole generation time."""
    chunks = sum(len(_pieces(a, response.chunk_chars)) for _, _, a in rendered.calls)
    chunks += len(_pieces(rendered.text, response.chunk_chars)) if rendered.text else 0
    # Without streaming the whole generation time shows up as one wait.
    wait_ms = response.ttft_ms + response.inter_chunk_ms * max(chunks - 1, 0)
    if wait_ms:
        await asyncio.sleep(wait_ms / 1000)
    message: dict[str, Any] = {"role": "assistant", "content": rendered.text, "refusal": None}
    if rendered.calls:
        message["tool_calls"] = [
            {
                **({"id": cid} if cid else {}),
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            for cid, name, args in rendered.calls
        ]
    completion: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": rendered.finish_reason,
            }
        ],
        "usage": rendered.usage,
    }
    if quirks.omit_usage:
        del completion["usage"]
    return JSONResponse(completion)


def _model_entry(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "calagent-scripted"}


@openai_router.get("/v1/models")
async def list_models(state: CurrentState) -> dict[str, Any]:
    return {"object": "list", "data": [_model_entry(state.model_name)]}


@openai_router.get("/v1/models/{model_id}")
async def get_model(model_id: str) -> dict[str, Any]:
    return _model_entry(model_id)


@openai_router.get("/healthz")
async def healthz(state: CurrentState) -> dict[str, Any]:
    return {"status": "down" if state.down else "ok"}


@control_router.put("/_script")
async def put_script(request: Request, state: CurrentState) -> HTTPResponse:
    try:
        new_script = Script.model_validate(await request.json())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return JSONResponse({"detail": f"not JSON: {exc}"}, status_code=400)
    except ValidationError as exc:
        return JSONResponse({"detail": json.loads(exc.json())}, status_code=422)
    state.set_script(new_script)
    return JSONResponse({"rules": len(new_script.rules)})


@control_router.get("/_script")
async def get_script(state: CurrentState) -> dict[str, Any]:
    return state.script.model_dump(mode="json", exclude_none=True)


@control_router.get("/_requests")
async def get_requests(state: CurrentState) -> list[dict[str, Any]]:
    return [r.to_json() for r in state.requests]


@control_router.delete("/_requests")
async def delete_requests(state: CurrentState) -> dict[str, Any]:
    state.clear_requests()
    return {"cleared": True}


@control_router.post("/_down")
async def go_down(state: CurrentState) -> dict[str, Any]:
    state.down = True
    return {"down": True}


@control_router.post("/_up")
async def go_up(state: CurrentState) -> dict[str, Any]:
    state.down = False
    return {"down": False}


def _sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


async def _stream(
    response: Response,
    rendered: _Rendered,
    completion_id: str,
    created: int,
    model: str,
    include_usage: bool,
    drop: Callable[[], Awaitable[None]],
) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:
            payload["usage"] = None
        return payload

    # Body deltas after the opening role delta; these are what drop_after_chunks counts.
    deltas: list[dict[str, Any]] = []
    if rendered.text:
        deltas.extend({"content": piece} for piece in _pieces(rendered.text, response.chunk_chars))
    for index, (call_id, name, arguments) in enumerate(rendered.calls):
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        **({"id": call_id} if call_id else {}),
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
        deltas.extend(
            {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            for piece in _pieces(arguments, response.chunk_chars)
            if piece
        )

    if response.ttft_ms:
        await asyncio.sleep(response.ttft_ms / 1000)
    opening: dict[str, Any] = {"role": "assistant", "content": "" if rendered.text else None, "refusal": None}
    yield _sse(chunk(opening))
    for sent, delta in enumerate(deltas):
        if response.drop_after_chunks is not None and sent >= response.drop_after_chunks:
            await drop()
            return
        if response.inter_chunk_ms:
            await asyncio.sleep(response.inter_chunk_ms / 1000)
        if response.stall_after_chunks is not None and sent == response.stall_after_chunks:
            await asyncio.sleep(response.stall_ms / 1000)
        yield _sse(chunk(delta))
    if response.drop_after_chunks is not None:
        await drop()
        return
    yield _sse(chunk({}, rendered.finish_reason))
    if include_usage:
        yield _sse(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": None,
                "choices": [],
                "usage": rendered.usage,
            }
        )
    yield _sse("[DONE]")
