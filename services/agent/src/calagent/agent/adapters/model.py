"""The model, spoken to through the openai SDK (any OpenAI-compatible endpoint).

One call is one attempt: the SDK's own retries are off, because retrying belongs to
`adapters.failover`, which knows the turn's deadline, the fallback endpoint and the circuit.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import openai

from calagent.contracts.text import storable
from calagent.runtime.timeline import epoch_ms

log = logging.getLogger("calagent.agent.model")


class ModelUnavailable(Exception):
    """Timeout, connection refused, 5xx, rate limit: the model cannot answer this turn.

    `retryable`: asking again may succeed (429, 5xx, a timeout, a dropped connection), unlike a
    refused key or an unknown model. `retry_after_s`: what the endpoint asked us to wait. With
    `circuit_open`, the endpoint was not called at all (see `domain.circuit`).
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        retry_after_s: float | None = None,
        circuit_open: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.circuit_open = circuit_open


@dataclass
class ModelToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class ModelResponse:
    text: str
    tool_calls: list[ModelToolCall]
    start_ms: float
    first_token_ms: float
    end_ms: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # Whether the endpoint reported usage at all (some local servers never do).
    usage_reported: bool = False
    raw_finish_reason: str | None = None
    # The model that answered (the fallback's name when the primary failed) and how many failed
    # attempts came before this answer.
    model: str = ""
    failed_attempts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


DeltaSink = Callable[[str], Awaitable[None]]


class ModelClient(Protocol):
    model: str

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_delta: DeltaSink | None,
        *,
        budget_s: float | None = None,
    ) -> ModelResponse: ...


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """`retry-after-ms` (OpenAI) or `retry-after` in seconds; an HTTP date is not read (it would
    need the wall clock), the caller's own backoff applies then."""
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) * scale
        except ValueError:
            continue
        if value >= 0:
            return value
    return None


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _usage_counts(usage: Any) -> tuple[int, int, int]:
    """Prompt, completion and cached tokens from a chunk's `usage` (a JSON object)."""
    if not isinstance(usage, dict):
        return 0, 0, 0
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    # DeepSeek reports its context cache beside the standard fields.
    cached = cached or _count(usage.get("prompt_cache_hit_tokens"))
    return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")), cached


class OpenAIModelClient:
    def __init__(self, base_url: str, api_key: str, model: str, timeout_s: float) -> None:
        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        # Some OpenAI-compatible servers reject `parallel_tool_calls`; after one refusal we stop
        # sending it and rely on the runtime's one-write-per-response rule alone.
        self.supports_parallel_flag = True
        # The tool schemas are the same list on every call and most of a request's bytes: encoded
        # once, for the list they were encoded from.
        self._tools: Sequence[dict[str, Any]] | None = None
        self._tools_json = ""

    def _body(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> bytes:
        """The request body as JSON, encoded the way the SDK encodes one (compact, UTF-8)."""
        if tools is not self._tools:
            self._tools_json = json.dumps(tools, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            self._tools = tools
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "tool_choice": "auto",
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0,
        }
        if self.supports_parallel_flag:
            body["parallel_tool_calls"] = False
        head = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return f'{head[:-1]},"tools":{self._tools_json}}}'.encode()

    async def close(self) -> None:
        await self.client.close()

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_delta: DeltaSink | None,
        *,
        budget_s: float | None = None,
    ) -> ModelResponse:
        # A stream that stalls mid-answer is cut at the attempt's limit, like a connect timeout.
        limit = self.timeout_s if budget_s is None else max(0.05, min(self.timeout_s, budget_s))
        try:
            async with asyncio.timeout(limit):
                try:
                    return await self._complete(messages, tools, on_delta)
                except openai.BadRequestError as exc:
                    if self.supports_parallel_flag and "parallel_tool_calls" in str(exc):
                        self.supports_parallel_flag = False
                        return await self._complete(messages, tools, on_delta)
                    raise
        except TimeoutError as exc:
            raise ModelUnavailable(f"no answer within {limit:.1f}s", retryable=True) from exc
        except openai.APIStatusError as exc:
            retryable = exc.status_code in (408, 409, 429) or exc.status_code >= 500
            raise ModelUnavailable(
                f"{type(exc).__name__} {exc.status_code}: {exc.message}",
                retryable=retryable,
                retry_after_s=retry_after_seconds(exc.response.headers),
            ) from exc
        # A connection cut mid-stream reaches us as APIConnectionError too (the SDK wraps httpx's).
        except (openai.APIConnectionError, openai.APITimeoutError, openai.APIResponseValidationError) as exc:
            raise ModelUnavailable(f"{type(exc).__name__}: {exc}", retryable=True) from exc

    async def _complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], on_delta: DeltaSink | None
    ) -> ModelResponse:
        body = self._body(messages, tools)
        start = epoch_ms()
        first = 0.0
        text_parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: Any = None
        finish: str | None = None
        # The SDK's own `chat.completions.create` walks every request body against its typed
        # parameters (the tool schemas are large and the same on every call) and builds a model
        # object for every streamed chunk; the same POST, its errors and its stream decoding,
        # with the body sent as encoded here and each chunk read as the JSON it is, costs a fraction.
        stream = await self.client.post(
            "/chat/completions",
            cast_to=object,
            content=body,
            stream=True,
            stream_cls=openai.AsyncStream[object],
        )
        async for chunk in stream:
            if not isinstance(chunk, dict):
                continue
            if chunk.get("usage") is not None:
                usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
                delta = choice.get("delta")
                if not isinstance(delta, dict):
                    continue
                # A NUL cannot be stored (see contracts.text): dropped from what the model says.
                raw = delta.get("content")
                content = storable(raw) if isinstance(raw, str) and raw else ""
                if content:
                    if not first:
                        first = epoch_ms()
                    text_parts.append(content)
                    if on_delta is not None:
                        await on_delta(content)
                for tc in delta.get("tool_calls") or ():
                    if not first:
                        first = epoch_ms()
                    slot = calls.setdefault(tc.get("index", 0), {"id": "", "name": "", "arguments": ""})
                    if tc.get("id"):
                        slot["id"] = tc["id"]
                    function = tc.get("function")
                    if isinstance(function, dict):
                        if function.get("name"):
                            slot["name"] += function["name"]
                        if function.get("arguments"):
                            slot["arguments"] += function["arguments"]
        end = epoch_ms()
        # An empty id stays empty: the loop repairs it (and records that it did).
        tool_calls = [
            ModelToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
            for _, c in sorted(calls.items())
        ]
        prompt, completion, cached = _usage_counts(usage)
        return ModelResponse(
            text="".join(text_parts),
            tool_calls=tool_calls,
            start_ms=start,
            first_token_ms=first or end,
            end_ms=end,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
            usage_reported=usage is not None,
            raw_finish_reason=finish,
            model=self.model,
        )
