"""`calagent doctor`: what the configured model endpoint can do (contract §17).

Each check sends the smallest request that shows one capability and reads the raw answer (not
through the SDK, which would hide a call written into the text or a missing `usage`). A check says
ok, warn (calagent copes, e.g. by repairing) or fail (calagent cannot work with it), and names the
settings that would fix what failed. The exit status is 1 when the endpoint cannot call tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import httpx

from calagent.agent.domain.repair import calls_in_text, loads_lenient
from calagent.contracts.symbols import DATE_SYMBOL_PATTERN

Verdict = Literal["ok", "warn", "fail", "skip"]
PROBE_TOOL = "doctor_probe"
PROBE_MESSAGE = "calagent doctor: schedule 'doctor check' for tomorrow by calling the doctor_probe tool."
FORCED_MESSAGE = "calagent doctor: reply with the single word pong."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": PROBE_TOOL,
            "description": "Schedule an event. `date` is a date symbol: D (today), D+1 (tomorrow), …",
            "parameters": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "date": {"type": "string", "pattern": DATE_SYMBOL_PATTERN},
                },
                "required": ["title", "date"],
            },
        },
    }
]
NO_TOOLS_FIX = (
    "CALAGENT_MODEL=<a model with tool calling> (vLLM: serve with --enable-auto-tool-choice "
    "--tool-call-parser hermes; Ollama: a model tagged 'tools')"
)


@dataclass
class Check:
    name: str
    verdict: Verdict
    detail: str
    fix: str | None = None


@dataclass
class Probe:
    """One chat answer as the endpoint sent it."""

    status: int
    error: str = ""
    text: str = ""
    calls: list[dict[str, str]] = field(default_factory=list)
    usage: dict[str, Any] | None = None


@dataclass
class Doctor:
    base_url: str
    api_key: str
    model: str
    timeout_s: float = 30.0
    checks: list[Check] = field(default_factory=list)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def add(self, name: str, verdict: Verdict, detail: str, fix: str | None = None) -> None:
        self.checks.append(Check(name, verdict, detail, fix))

    async def run(self) -> list[Check]:
        async with httpx.AsyncClient(timeout=self.timeout_s, headers=self.headers) as client:
            if not await self._models(client):
                return self.checks
            plain = await self._chat(client, PROBE_MESSAGE, stream=False)
            plain_args = self._tool_check("tool call", plain)
            streamed = await self._chat(client, PROBE_MESSAGE, stream=True)
            self._tool_check("streamed tool call", streamed)
            if plain_args is not None:
                self._pattern_check(plain_args)
            await self._tool_choice(client)
            self._usage_check(plain, streamed)
        return self.checks

    @property
    def can_call_tools(self) -> bool:
        failing = {"reachable", "tool call", "streamed tool call"}
        return not any(c.verdict == "fail" and c.name in failing for c in self.checks)

    # ---- the checks -------------------------------------------------------------------------------

    async def _models(self, client: httpx.AsyncClient) -> bool:
        try:
            response = await client.get(self.url("/models"))
        except httpx.HTTPError as exc:
            self.add(
                "reachable", "fail", f"{self.base_url}: {exc!r}", "OPENAI_BASE_URL=<the endpoint's /v1 URL>"
            )
            return False
        if response.status_code in (401, 403):
            self.add(
                "reachable",
                "fail",
                f"the key was refused ({response.status_code})",
                "OPENAI_API_KEY=<a valid key>",
            )
            return False
        self.add("reachable", "ok", f"{self.base_url} answered {response.status_code}")
        try:
            ids = [str(m.get("id")) for m in response.json().get("data", [])]
        except (ValueError, AttributeError):
            ids = []
        if response.status_code != 200 or not ids:
            self.add("model listed", "skip", "the endpoint lists no models; the chat checks below decide")
        elif self.model in ids:
            self.add("model listed", "ok", self.model)
        else:
            shown = ", ".join(ids[:8]) + (" …" if len(ids) > 8 else "")
            self.add(
                "model listed",
                "warn",
                f"{self.model} is not among {shown}",
                f"CALAGENT_MODEL=<one of: {shown}>",
            )
        return True

    async def _chat(
        self, client: httpx.AsyncClient, message: str, *, stream: bool, tool_choice: Any = "auto"
    ) -> Probe:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": message}],
            "tools": TOOLS,
            "tool_choice": tool_choice,
            "temperature": 0,
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        try:
            if not stream:
                response = await client.post(self.url("/chat/completions"), json=body)
                if response.status_code != 200:
                    return Probe(response.status_code, error=response.text[:300])
                return _from_message(response.json())
            async with client.stream("POST", self.url("/chat/completions"), json=body) as response:
                if response.status_code != 200:
                    return Probe(response.status_code, error=(await response.aread()).decode()[:300])
                return _from_stream([line async for line in response.aiter_lines()])
        except httpx.HTTPError as exc:
            return Probe(0, error=repr(exc))

    def _tool_check(self, name: str, probe: Probe) -> dict[str, Any] | None:
        """The probe call's arguments when the endpoint made one (natively or in the text)."""
        if probe.status != 200:
            refused = probe.status in (400, 404, 422, 501)
            self.add(name, "fail", f"HTTP {probe.status}: {probe.error}", NO_TOOLS_FIX if refused else None)
            return None
        native = [c for c in probe.calls if c["name"] == PROBE_TOOL]
        if native:
            parsed = loads_lenient(native[0]["arguments"])
            notes = []
            if not native[0]["id"]:
                notes.append("calls come without an id (calagent adds one)")
            if parsed is not None and parsed[1]:
                notes.append("arguments are almost-JSON (calagent repairs them)")
            if parsed is None:
                self.add(name, "warn", f"arguments are not JSON: {native[0]['arguments'][:120]!r}")
                return None
            self.add(name, "warn" if notes else "ok", "; ".join(notes) or "a native tool call came back")
            return parsed[0]
        found, _ = calls_in_text(probe.text, {PROBE_TOOL})
        if found:
            self.add(
                name,
                "warn",
                "the call was written into the text, not the tool_calls field (calagent repairs it)",
                "vLLM: --enable-auto-tool-choice --tool-call-parser hermes, so the server parses calls itself",
            )
            parsed = loads_lenient(found[0].arguments)
            return parsed[0] if parsed is not None else None
        self.add(name, "fail", f"no tool call came back, only text: {probe.text[:120]!r}", NO_TOOLS_FIX)
        return None

    def _pattern_check(self, arguments: dict[str, Any]) -> None:
        date = arguments.get("date")
        if isinstance(date, str) and re.fullmatch(DATE_SYMBOL_PATTERN, date):
            self.add("schema pattern", "ok", f"date written as the symbol {date!r}")
        else:
            self.add(
                "schema pattern",
                "warn",
                f"date written as {date!r}, not as the schema's pattern asks; calagent resolves a natural "
                "date through the time service when it has one reading, else asks the model again",
            )

    async def _tool_choice(self, client: httpx.AsyncClient) -> None:
        forced = {"type": "function", "function": {"name": PROBE_TOOL}}
        probe = await self._chat(client, FORCED_MESSAGE, stream=False, tool_choice=forced)
        if probe.status != 200:
            self.add("tool_choice", "warn", f"a forced tool_choice was refused: HTTP {probe.status}")
        elif any(c["name"] == PROBE_TOOL for c in probe.calls) or calls_in_text(probe.text, {PROBE_TOOL})[0]:
            self.add("tool_choice", "ok", "a forced tool_choice is honoured")
        else:
            self.add(
                "tool_choice", "warn", "a forced tool_choice is ignored (calagent sends tool_choice=auto)"
            )

    def _usage_check(self, plain: Probe, streamed: Probe) -> None:
        missing = [
            kind
            for kind, p in (("plain", plain), ("streamed", streamed))
            if p.status == 200 and p.usage is None
        ]
        if not missing:
            self.add("usage", "ok", "token usage is reported")
        else:
            self.add(
                "usage",
                "warn",
                f"no token usage in {' and '.join(missing)} answers: calls are recorded as unreported, and "
                "CALAGENT_USER_DAILY_TOKENS cannot count them",
            )


def _from_message(payload: dict[str, Any]) -> Probe:
    choices = payload.get("choices") or [{}]
    message = choices[0].get("message") or {}
    calls = [
        {
            "id": str(c.get("id") or ""),
            "name": str((c.get("function") or {}).get("name") or ""),
            "arguments": str((c.get("function") or {}).get("arguments") or ""),
        }
        for c in message.get("tool_calls") or []
    ]
    return Probe(200, text=str(message.get("content") or ""), calls=calls, usage=payload.get("usage"))


def _events(lines: list[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                try:
                    yield json.loads(data)
                except ValueError:
                    continue


def _from_stream(lines: list[str]) -> Probe:
    probe = Probe(200)
    slots: dict[int, dict[str, str]] = {}
    for chunk in _events(lines):
        if chunk.get("usage"):
            probe.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            probe.text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                slot = slots.setdefault(int(tc.get("index", 0)), {"id": "", "name": "", "arguments": ""})
                slot["id"] = slot["id"] or str(tc.get("id") or "")
                function = tc.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
    probe.calls = [slots[i] for i in sorted(slots)]
    return probe


def render(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{c.verdict.upper():4}  {c.name:<{width}}  {c.detail}")
        if c.fix:
            lines.append(f"{'':4}  {'':<{width}}  fix: {c.fix}")
    return "\n".join(lines)


async def run_doctor(base_url: str, api_key: str, model: str) -> tuple[list[Check], bool]:
    doctor = Doctor(base_url, api_key, model)
    checks = await doctor.run()
    return checks, doctor.can_call_tools


def as_json(checks: list[Check]) -> str:
    return json.dumps([asdict(c) for c in checks], ensure_ascii=False, indent=2)
