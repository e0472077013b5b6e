"""The rule script that drives the scripted model.

A script is an ordered list of rules plus a default response. For each chat request the first rule
whose conditions all hold (and whose `times` budget is not spent) answers; otherwise the default does.
Matching looks only at what a real model would see: the messages, the model name.

    rules:
      - name: create                     # recorded with each request it answers
        when: {user_contains: [明天, 张三], last_role: user}
        respond:
          tool_calls:
            - name: prepare_or_create_schedule
              arguments: {title: 和张三开会, date: D+1, time: "15:00"}   # a dict is JSON-encoded
      - name: answer_memory
        when: {last_role: tool, last_tool: search_memory, tool_result_contains: 不加糖}
        respond: {text: "你说过：{{tool_result}}", ttft_ms: 200, inter_chunk_ms: 20}
      - name: flaky
        when: {user_regex: "^boom"}
        times: 1                          # fires once, then later rules get their turn
        respond: {error: {status: 503, message: overloaded}}
    default:
      text: "scripted model: no rule for {{user}}"

Templates in text and in string values of dict arguments: `{{user}}` (the last user message),
`{{tool_result}}` (the last message's content when it is a tool result) and `{{tool}}` (that tool's
name). String arguments are sent verbatim, untouched, so malformed JSON stays malformed.

`{{tool_result.<path>}}` picks one value out of that tool result parsed as JSON: `<path>` is
dot-separated object keys and list indexes (`-1` is the last), e.g. `{{tool_result.events.0.id}}`
after a `find_events` step, so a later step can name an id that only exists at run time:

      - name: move
        when: {last_role: tool, last_tool: find_events}
        respond:
          tool_calls:
            - name: update_schedule
              arguments: {event_id: "{{tool_result.events.0.id}}", date: D+2}

A string renders as itself, any other JSON value as compact JSON (`3`, `true`, `["a"]`). A path that
is not there (no tool result, not JSON, a missing key, an index out of range, `null`) renders as the
empty string: the call then fails validation visibly instead of the script guessing an id.
Substitution is one pass, so text that a template inserts (a user message, a tool result) is never
itself read as a template.

A rule without `last_role` also matches after a tool result, because the last user message is still
the same; scripts that use intermediate tools should put `last_role` on their user rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "Conversation",
    "ErrorSpec",
    "Match",
    "Quirks",
    "Response",
    "Rule",
    "Script",
    "ToolCallSpec",
    "message_text",
]


class _Strict(BaseModel):
    # A typo in a hand-written script should fail loudly at load time, not silently never match.
    model_config = ConfigDict(extra="forbid", frozen=True)


def message_text(content: Any) -> str:
    """The plain text of a message `content`, which may be a string, null or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts: list[str] = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


@dataclass(frozen=True)
class Conversation:
    """The facts of one chat request that rules can match on."""

    model: str
    messages: tuple[Mapping[str, Any], ...]

    @classmethod
    def from_request(cls, body: Mapping[str, Any]) -> Conversation:
        raw = body.get("messages")
        messages = tuple(m for m in raw if isinstance(m, Mapping)) if isinstance(raw, list) else ()
        model = body.get("model")
        return cls(model=model if isinstance(model, str) else "", messages=messages)

    @property
    def last_role(self) -> str | None:
        if not self.messages:
            return None
        role = self.messages[-1].get("role")
        return role if isinstance(role, str) else None

    @property
    def last_user(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return message_text(message.get("content"))
        return ""

    @property
    def system(self) -> str:
        return "\n".join(
            message_text(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer")
        )

    @property
    def read(self) -> str:
        """Everything the request gives the model to read, every role's text."""
        return "\n".join(message_text(m.get("content")) for m in self.messages)

    @property
    def last_tool_message(self) -> Mapping[str, Any] | None:
        if self.messages and self.messages[-1].get("role") == "tool":
            return self.messages[-1]
        return None

    @property
    def last_tool_result(self) -> str:
        message = self.last_tool_message
        return message_text(message.get("content")) if message is not None else ""

    @property
    def last_tool_name(self) -> str | None:
        """The name of the tool whose result is the last message, found through its tool_call_id."""
        message = self.last_tool_message
        if message is None:
            return None
        call_id = message.get("tool_call_id")
        for earlier in reversed(self.messages[:-1]):
            if earlier.get("role") != "assistant":
                continue
            for call in earlier.get("tool_calls") or ():
                if not isinstance(call, Mapping) or call.get("id") != call_id:
                    continue
                function = call.get("function")
                if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                    return str(function["name"])
        # Older clients put the name on the tool message itself.
        name = message.get("name")
        return name if isinstance(name, str) else None

    def tool_result_at(self, path: str) -> str:
        """The value at `path` (dot-separated keys / list indexes) of the last tool result parsed as
        JSON, rendered as text; the empty string when there is no such value."""
        try:
            value: Any = json.loads(self.last_tool_result)
        except ValueError:
            return ""
        for key in path.split("."):
            if isinstance(value, Mapping) and key in value:
                value = value[key]
            elif isinstance(value, list) and _INDEX.fullmatch(key):
                index = int(key)
                if not -len(value) <= index < len(value):
                    return ""
                value = value[index]
            else:
                return ""
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    def substitute(self, text: str) -> str:
        def render(match: re.Match[str]) -> str:
            name, path = match.group("name"), match.group("path")
            if name == "user":
                return self.last_user
            if name == "tool":
                return self.last_tool_name or ""
            return self.last_tool_result if path is None else self.tool_result_at(path)

        return _TEMPLATE.sub(render, text)


# `{{user}}`, `{{tool}}`, `{{tool_result}}` and `{{tool_result.<path>}}`; anything else stays as written.
_TEMPLATE = re.compile(r"\{\{(?P<name>user|tool_result|tool)(?:(?<=tool_result)\.(?P<path>[^{}]*))?\}\}")
_INDEX = re.compile(r"-?[0-9]+")


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


class Match(_Strict):
    """Conditions on a request; every condition that is given must hold. No conditions match anything."""

    user_contains: str | list[str] | None = None
    user_regex: str | None = None
    user_equals: str | None = None
    system_contains: str | list[str] | None = None
    # Anywhere in the request: any message's text, whatever its role or marking. A model that obeys
    # whatever instruction it reads is scripted with it (someone else's words, contract §19).
    read_contains: str | list[str] | None = None
    last_role: Literal["user", "tool", "assistant", "system"] | None = None
    last_tool: str | None = None
    tool_result_contains: str | None = None
    model: str | None = None
    # Applies to user_contains, user_regex, user_equals, system_contains and read_contains.
    ignore_case: bool = False

    @field_validator("user_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"user_regex does not compile: {exc}") from exc
        return value

    def matches(self, conversation: Conversation) -> bool:
        def fold(text: str) -> str:
            return text.casefold() if self.ignore_case else text

        user = fold(conversation.last_user)
        if any(fold(needle) not in user for needle in _as_list(self.user_contains)):
            return False
        if self.user_equals is not None and fold(self.user_equals.strip()) != user.strip():
            return False
        if self.user_regex is not None:
            flags = re.IGNORECASE if self.ignore_case else 0
            if re.search(self.user_regex, conversation.last_user, flags) is None:
                return False
        if self.system_contains is not None:
            system = fold(conversation.system)
            if any(fold(needle) not in system for needle in _as_list(self.system_contains)):
                return False
        if self.read_contains is not None:
            read = fold(conversation.read)
            if any(fold(needle) not in read for needle in _as_list(self.read_contains)):
                return False
        if self.last_role is not None and conversation.last_role != self.last_role:
            return False
        if self.last_tool is not None and conversation.last_tool_name != self.last_tool:
            return False
        if self.tool_result_contains is not None and (
            conversation.last_tool_message is None
            or self.tool_result_contains not in conversation.last_tool_result
        ):
            return False
        return self.model is None or conversation.model == self.model


class ToolCallSpec(_Strict):
    """One tool call. A dict is JSON-encoded; a string goes out verbatim, so malformed JSON can be tested."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)

    def render_arguments(self, conversation: Conversation) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(_substitute_values(self.arguments, conversation), ensure_ascii=False)


def _substitute_values(value: Any, conversation: Conversation) -> Any:
    if isinstance(value, str):
        return conversation.substitute(value)
    if isinstance(value, dict):
        return {k: _substitute_values(v, conversation) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_values(v, conversation) for v in value]
    return value


_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_denied_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class ErrorSpec(_Strict):
    """An HTTP error answered with an OpenAI-style `{"error": {...}}` body."""

    status: int = Field(ge=400, le=599)
    message: str = "scripted error"
    type: str | None = None
    code: str | None = None
    # e.g. {"retry-after-ms": "10"}, which the openai SDK honours between its retries.
    headers: dict[str, str] = Field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        kind = self.type or _ERROR_TYPES.get(self.status, "server_error")
        return {"error": {"message": self.message, "type": kind, "param": None, "code": self.code}}


class Response(_Strict):
    """What the model answers: text, tool calls (optionally with text), an error, or a dropped connection."""

    text: str | None = None
    tool_calls: list[ToolCallSpec] | None = None
    error: ErrorSpec | None = None
    drop_connection: bool = False
    # Streaming only: send this many content/argument chunks, then cut the connection mid-answer.
    drop_after_chunks: int | None = Field(default=None, ge=0)
    delay_ms: int = Field(default=0, ge=0)
    ttft_ms: int = Field(default=0, ge=0)
    inter_chunk_ms: int = Field(default=0, ge=0)
    # How many characters each streamed content or argument delta carries.
    chunk_chars: int = Field(default=4, ge=1)
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter"] | None = None
    # Streaming only: after this many content/argument chunks, wait `stall_ms` before the rest
    # (a stream that stalls mid-answer).
    stall_after_chunks: int | None = Field(default=None, ge=0)
    stall_ms: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _says_something(self) -> Response:
        if self.error is not None and (self.text is not None or self.tool_calls):
            raise ValueError("an error response cannot also carry text or tool calls")
        if (
            self.text is None
            and not self.tool_calls
            and self.error is None
            and not self.drop_connection
            and self.drop_after_chunks is None
        ):
            raise ValueError("a response needs text, tool_calls, error or drop_connection")
        return self


ToolCallStyle = Literal["native", "tool_call_tag", "fenced_json"]


class Quirks(_Strict):
    """How real endpoints differ from api.openai.com, applied to every answer of the script, so
    one script can be spoken in each provider's style (contract §17).

    - `tool_call_style`: `native` (the `tool_calls` field); `tool_call_tag` writes each call into
      the text as `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Hermes/Qwen templates
      behind a server without a tool parser); `fenced_json` as a ```json block naming the tool.
    - `almost_json`: arguments with single quotes and a trailing comma.
    - `omit_call_ids`: native calls come without an `id`.
    - `omit_usage`: no `usage`, even when `stream_options.include_usage` asks for it.
    - `natural_dates`: date symbols in arguments written as people write them (`D+1` →
      "tomorrow", `YYYY-MM-DD` → `YYYY/M/D`, `W<d>+1` → "下周<d>").
    - `no_tools`: a request that carries `tools` is refused (400), as by a model without tool support.
    - `ignore_tool_choice`: a forced `tool_choice` is not honoured (the rule's answer stands).
    """

    tool_call_style: ToolCallStyle = "native"
    almost_json: bool = False
    omit_call_ids: bool = False
    omit_usage: bool = False
    natural_dates: bool = False
    no_tools: bool = False
    ignore_tool_choice: bool = False


class Rule(_Strict):
    name: str | None = None
    when: Match = Field(default_factory=Match)
    respond: Response
    # How often the rule may fire before it is skipped; None means without limit.
    times: int | None = Field(default=None, ge=0)


class Script(_Strict):
    rules: list[Rule] = Field(default_factory=list)
    default: Response = Field(default_factory=lambda: Response(text="(scripted model: no rule matched)"))
    quirks: Quirks = Field(default_factory=Quirks)

    def rule_name(self, index: int) -> str:
        return self.rules[index].name or f"rules[{index}]"

    def select(self, conversation: Conversation, fired: Mapping[int, int]) -> tuple[int | None, Response]:
        """The index of the first applicable rule (None for the default) and its response.

        `fired` counts how often each rule index has fired; the caller owns it so one script can be
        shared by several servers and replaced without losing its shape.
        """
        for index, rule in enumerate(self.rules):
            if rule.times is not None and fired.get(index, 0) >= rule.times:
                continue
            if rule.when.matches(conversation):
                return index, rule.respond
        return None, self.default

    @classmethod
    def from_yaml(cls, source: str | Path) -> Script:
        """Load from a YAML (or JSON, a YAML subset) file path or from the YAML text itself."""
        if isinstance(source, Path):
            text = source.read_text(encoding="utf-8")
        elif "\n" not in source and source.strip().endswith((".yaml", ".yml", ".json")):
            text = Path(source).read_text(encoding="utf-8")
        else:
            text = source
        return cls.model_validate(yaml.safe_load(text) or {})

    @classmethod
    def from_json(cls, source: str | Path) -> Script:
        text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
        return cls.model_validate_json(text)

    @classmethod
    def from_file(cls, path: str | Path) -> Script:
        path = Path(path)
        if path.suffix == ".json":
            return cls.from_json(path)
        return cls.from_yaml(path)
