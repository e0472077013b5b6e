"""The model, spoken to through the openai SDK (any OpenAI-compatible endpoint)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import openai

from calagent.contracts.text import storable
from calagent.runtime.timeline import epoch_ms

log = logging.getLogger("calagent.agent.model")


class ModelUnavailable(Exception):
    """Timeout, connection refused, 5xx, rate limit: the model cannot answer this turn."""


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
    raw_finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


DeltaSink = Callable[[str], Awaitable[None]]


class ModelClient(Protocol):
    model: str

    async def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], on_delta: DeltaSink | None
    ) -> ModelResponse: ...


class OpenAIModelClient:
    def __init__(self, base_url: str, api_key: str, model: str, timeout_s: float) -> None:
        self.model = model
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=1)
        # Some OpenAI-compatible servers reject `parallel_tool_calls`; after one refusal we stop
        # sending it and rely on the runtime's one-write-per-response rule alone.
        self.supports_parallel_flag = True

    async def close(self) -> None:
        await self.client.close()

    async def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], on_delta: DeltaSink | None
    ) -> ModelResponse:
        try:
            return await self._complete(messages, tools, on_delta)
        except openai.BadRequestError as exc:
            if self.supports_parallel_flag and "parallel_tool_calls" in str(exc):
                self.supports_parallel_flag = False
                return await self._complete(messages, tools, on_delta)
            raise ModelUnavailable(f"the model endpoint refused the request: {exc}") from exc
        except (
            openai.APIConnectionError,
            openai.APITimeoutError,
            openai.InternalServerError,
            openai.RateLimitError,
            openai.AuthenticationError,
            openai.PermissionDeniedError,
            openai.NotFoundError,
            openai.APIStatusError,
        ) as exc:
            raise ModelUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def _complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], on_delta: DeltaSink | None
    ) -> ModelResponse:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "tools": list(tools),
            "tool_choice": "auto",
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0,
        }
        if self.supports_parallel_flag:
            kwargs["parallel_tool_calls"] = False
        start = epoch_ms()
        first = 0.0
        text_parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: Any = None
        finish: str | None = None
        stream = await self.client.chat.completions.create(**kwargs)
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                if choice.finish_reason:
                    finish = choice.finish_reason
                if delta is None:
                    continue
                # A NUL cannot be stored (see contracts.text): dropped from what the model says.
                content = storable(delta.content) if delta.content else ""
                if content:
                    if not first:
                        first = epoch_ms()
                    text_parts.append(content)
                    if on_delta is not None:
                        await on_delta(content)
                for tc in delta.tool_calls or []:
                    if not first:
                        first = epoch_ms()
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    if tc.id:
                        slot["id"] = tc.id
                    if tc.function is not None:
                        if tc.function.name:
                            slot["name"] += tc.function.name
                        if tc.function.arguments:
                            slot["arguments"] += tc.function.arguments
        end = epoch_ms()
        tool_calls = [
            ModelToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
            for i, c in sorted(calls.items())
        ]
        return ModelResponse(
            text="".join(text_parts),
            tool_calls=tool_calls,
            start_ms=start,
            first_token_ms=first or end,
            end_ms=end,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            raw_finish_reason=finish,
        )
