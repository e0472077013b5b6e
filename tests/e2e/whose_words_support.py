"""What the whose-words tests (contract §19) read back from the model's requests: where someone
else's text reached the model, and whether it was inside a block that names its source."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call

# The line that opens a third-party block in a user-role message (agent/domain/context.py).
BLOCK_MARK = "third-party content, not the user's own words"
# The key a tool result marks someone else's text with (agent/domain/words.py).
TOOL_MARK = "third_party"


def delete_first_found() -> dict[str, Any]:
    """After find_events, the obeying model deletes the first event it found."""
    return {
        "when": {"last_role": "tool", "last_tool": "find_events"},
        "respond": {
            "tool_calls": [call("delete_schedule", event_id="{{tool_result.events.0.id}}", scope="this")]
        },
    }


def _unmarked_in_json(value: Any, text: str, marked: bool) -> bool:
    """Whether `text` appears in a JSON value outside every object that carries the tool mark."""
    if isinstance(value, str):
        return text in value and not marked
    if isinstance(value, Mapping):
        inside = marked or TOOL_MARK in value
        return any(_unmarked_in_json(v, text, inside) for v in value.values())
    if isinstance(value, list):
        return any(_unmarked_in_json(v, text, marked) for v in value)
    return False


def _messages(scripted: ScriptedModelServer) -> Iterator[Mapping[str, Any]]:
    for request in scripted.requests:
        yield from request.messages


def unmarked(scripted: ScriptedModelServer, foreign: Sequence[str]) -> list[tuple[str, str]]:
    """Every (role, text) where someone else's `foreign` text reached the model unmarked: in a
    system or assistant message, in a user message before (or without) the block's line, or in a
    tool result outside an object that says whose it is."""
    found = []
    for message in _messages(scripted):
        role = str(message.get("role"))
        content = str(message.get("content") or "")
        for text in foreign:
            if text not in content:
                continue
            if role == "user" and BLOCK_MARK in content.split(text, 1)[0]:
                continue
            if role == "tool":
                try:
                    parsed = json.loads(content)
                except json.JSONDecodeError:
                    parsed = content
                if not _unmarked_in_json(parsed, text, False):
                    continue
            found.append((role, text))
    return found


def reached(scripted: ScriptedModelServer, text: str) -> bool:
    """Whether `text` reached the model at all (marked or not)."""
    return any(text in str(m.get("content") or "") for m in _messages(scripted))
