"""What the scripted model server holds: the script, and every request it was sent."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from calagent.scriptedmodel.script import Conversation, Response, Script

DEFAULT_MODEL_NAME = "scripted"


@dataclass(frozen=True)
class RecordedRequest:
    """One chat request as the server received it."""

    body: dict[str, Any]
    # The rule that answered: its name, "rules[i]" when unnamed, "default", or None when the script was
    # not consulted (server down, malformed request).
    rule: str | None
    timestamp: float
    status: int = 200

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return messages if isinstance(messages, list) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        tools = self.body.get("tools")
        return tools if isinstance(tools, list) else []

    @property
    def tool_names(self) -> list[str]:
        names: list[str] = []
        for tool in self.tools:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.append(function["name"])
        return names

    @property
    def parallel_tool_calls(self) -> bool | None:
        value = self.body.get("parallel_tool_calls")
        return value if isinstance(value, bool) else None

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    def to_json(self) -> dict[str, Any]:
        return {"body": self.body, "rule": self.rule, "timestamp": self.timestamp, "status": self.status}


@dataclass
class ScriptedModelState:
    """Everything mutable behind one app: the script, rule counters, the request log, the down switch.

    Tests read it from another thread than the server's event loop, hence the lock.
    """

    script: Script
    model_name: str = DEFAULT_MODEL_NAME
    down: bool = False
    _requests: list[RecordedRequest] = field(default_factory=list)
    _fired: dict[int, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def set_script(self, script: Script) -> None:
        with self._lock:
            self.script = script
            self._fired = {}

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def record(self, body: dict[str, Any], rule: str | None, status: int) -> None:
        with self._lock:
            self._requests.append(RecordedRequest(body=body, rule=rule, timestamp=time.time(), status=status))

    def answer(self, body: dict[str, Any]) -> tuple[str, Response]:
        """Pick the response, count the rule as fired and record the request, all in one step."""
        conversation = Conversation.from_request(body)
        with self._lock:
            index, response = self.script.select(conversation, self._fired)
            if index is None:
                rule = "default"
            else:
                self._fired[index] = self._fired.get(index, 0) + 1
                rule = self.script.rule_name(index)
            status = response.error.status if response.error is not None else 200
            self._requests.append(RecordedRequest(body=body, rule=rule, timestamp=time.time(), status=status))
        return rule, response
