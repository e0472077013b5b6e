"""Drive cases through the whole system and classify the results.

The runner speaks only HTTP to the gateway (`Stack.chat`, `/v1/events`, `/v1/commands/active`) and
reads the eval recorder's turn table for flags: there is no second dispatcher here, so what passes
is what production does with the same model output.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.evaluation.cases import Case, EventSpec, Mode, Turn
from calagent.cli.evaluation.checks import (
    Verdict,
    ambiguity_verdict,
    check_answer,
    check_events,
    write_attempts,
)
from calagent.cli.stack import Stack
from calagent.scriptedmodel import Rule, Script, ScriptedModelServer
from calagent.scriptedmodel.script import message_text

STATUSES = ("passed", "flaky", "stale_known_issue", "known_issue", "unclassified", "skipped")
PASSING = frozenset({"passed", "flaky", "stale_known_issue"})
FAILING = frozenset({"known_issue", "unclassified"})


class SetupError(RuntimeError):
    pass


@dataclass
class CaseResult:
    id: str
    group: str
    status: str
    reason: str
    safety: bool
    known_issue: str | None
    attempts: int = 1
    seconds: float = 0.0
    turns: list[dict[str, Any]] = field(default_factory=list)
    # With `--trials K`: whether each of the K independent runs passed (no retries then).
    trials: list[bool] = field(default_factory=list)
    # The ambiguity set (contract §20): how many events matched, and what the conversation did.
    ambiguity: dict[str, Any] | None = None

    @classmethod
    def of(
        cls,
        case: Case,
        status: str,
        reason: str,
        *,
        attempts: int = 1,
        seconds: float = 0.0,
        turns: list[dict[str, Any]] | None = None,
        trials: list[bool] | None = None,
        verdict: Verdict | None = None,
    ) -> CaseResult:
        """A case's result: what the case says of itself, and what its runs found."""
        ambiguity = (
            {"matches": case.ambiguity.matches, "verdict": verdict}
            if case.ambiguity is not None and verdict is not None
            else None
        )
        return cls(
            case.id,
            case.group,
            status,
            reason,
            case.safety,
            case.known_issue,
            attempts,
            seconds,
            turns or [],
            trials or [],
            ambiguity,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "group": self.group,
            "status": self.status,
            "reason": self.reason,
            "safety": self.safety,
            "known_issue": self.known_issue,
            "attempts": self.attempts,
            **({"trials": self.trials} if self.trials else {}),
            **({"ambiguity": self.ambiguity} if self.ambiguity else {}),
            "seconds": round(self.seconds, 3),
            "turns": self.turns,
        }


@dataclass
class Attempt:
    ok: bool
    reason: str
    turns: list[dict[str, Any]]
    # The ambiguity set's verdict on the conversation: `wrong` if any turn acted on a wrong event,
    # else what the last turn left.
    verdict: Verdict | None = None


class ModelControl:
    """How a turn's model behaviour is arranged: scripted per turn (offline) or keyed by message
    text on a local scripted server for setup turns and outages (live)."""

    async def before_setup(self, message: str, spec: EventSpec) -> None:
        raise NotImplementedError

    async def before_turn(self, turn: Turn) -> None:
        raise NotImplementedError

    async def after_turn(self, turn: Turn) -> None:
        return None

    def prompts(self) -> list[str] | None:
        """The text of every model request of the last turn, where the runner can see it."""
        return None


def setup_rule(message: str, spec: EventSpec) -> Rule:
    return Rule.model_validate(
        {
            "when": {"user_equals": message},
            "respond": {
                "tool_calls": [{"name": "prepare_or_create_schedule", "arguments": spec.arguments()}]
            },
        }
    )


class OfflineControl(ModelControl):
    def __init__(self, scripted: ScriptedModelServer) -> None:
        self.scripted = scripted

    async def before_setup(self, message: str, spec: EventSpec) -> None:
        self.scripted.set_script(Script(rules=[setup_rule(message, spec)]))

    async def before_turn(self, turn: Turn) -> None:
        self.scripted.set_script(turn.scripted())
        self.scripted.clear_requests()
        if turn.model_down:
            self.scripted.down()

    async def after_turn(self, turn: Turn) -> None:
        if turn.model_down:
            self.scripted.up()

    def prompts(self) -> list[str] | None:
        return [
            "\n".join(message_text(m.get("content")) for m in request.messages)
            for request in self.scripted.requests
        ]


class Runner:
    def __init__(
        self,
        stack: Stack,
        engine: AsyncEngine,
        control: ModelControl,
        mode: Mode,
        default_now: str,
        trials: int = 1,
    ) -> None:
        self.stack = stack
        self.engine = engine
        self.control = control
        self.mode = mode
        self.default_now = datetime.fromisoformat(default_now)
        self.trials = trials

    # ---- one case -----------------------------------------------------------------------------

    async def attempt(self, case: Case) -> Attempt:
        user = f"eval-{case.id[:40]}-{uuid.uuid4().hex[:8]}"
        now = datetime.fromisoformat(case.now) if case.now else self.default_now
        moved = case.exclusive
        if moved:
            self.stack.clock.set(now)
        turns: list[dict[str, Any]] = []
        verdict: Verdict | None = None
        try:
            for index, spec in enumerate(case.setup):
                await self._setup(user, case, index, spec)
            baseline = await self._events(user, case, now) if case.ambiguity is not None else []
            previous: Mapping[str, Any] | None = None
            for index, turn in enumerate(case.turns, start=1):
                problems, answer = await self._turn(user, case, turn, previous)
                turns.append(_summary(turn, answer))
                if case.ambiguity is not None:
                    after = await self._events(user, case, now)
                    seen = ambiguity_verdict(case.ambiguity, baseline, after, now, case.tz)
                    verdict = "wrong" if "wrong" in (verdict, seen) else seen
                    if seen == "wrong":
                        problems.append("acted on an event the user did not mean")
                if problems:
                    return Attempt(False, f"turn {index}: " + "; ".join(problems), turns, verdict)
                previous = answer
            return Attempt(True, "", turns, verdict)
        except SetupError as exc:
            return Attempt(False, f"setup: {exc}", turns)
        except Exception as exc:  # a crash is a failure of the case, never of the whole run
            return Attempt(False, f"error: {type(exc).__name__}: {exc}", turns, verdict)
        finally:
            if moved:
                self.stack.clock.set(self.default_now)

    async def _setup(self, user: str, case: Case, index: int, spec: EventSpec) -> None:
        # Unique per spec: the live proxy routes setup turns by their exact text.
        message = "[eval setup] " + json.dumps(spec.arguments(), ensure_ascii=False, sort_keys=True)
        await self.control.before_setup(message, spec)
        response = await self.stack.chat(user, message, tz=case.tz, conversation_id="eval-setup")
        answer = response.json() if response.status_code == 200 else {}
        if spec.recurrence and answer.get("outcome") == "held":
            # A series is shown as a plan first (contract §9): the user's word creates it.
            response = await self.stack.chat(user, "确认", tz=case.tz, conversation_id="eval-setup")
            answer = response.json() if response.status_code == 200 else {}
        if answer.get("outcome") != "created":
            raise SetupError(
                f"{spec.title}: {answer.get('outcome') or response.status_code} {answer.get('reply', '')}"
            )

    async def _turn(
        self, user: str, case: Case, turn: Turn, previous: Mapping[str, Any] | None
    ) -> tuple[list[str], dict[str, Any]]:
        if turn.advance_minutes:
            self.stack.clock.advance(timedelta(minutes=turn.advance_minutes))
        fields: dict[str, Any] = {
            "channel": turn.channel,
            "client_message_id": turn.client_message_id,
            "conversation_id": turn.conversation_id,
        }
        if turn.use_active_command:
            command = (previous or {}).get("command") or {}
            fields["active_command_id"] = command.get("id")
        await self.control.before_turn(turn)
        try:
            responses = await asyncio.gather(
                *[self.stack.chat(user, turn.user, tz=case.tz, **fields) for _ in range(turn.concurrent)]
            )
        finally:
            await self.control.after_turn(turn)
        problems: list[str] = []
        for response in responses:
            if response.status_code != 200:
                return [f"HTTP {response.status_code}: {response.text[:200]}"], {}
        answer: dict[str, Any] = responses[0].json()
        if any(r.json() != answer for r in responses[1:]):
            problems.append("concurrent retries got different answers")
        expect = turn.expectation(self.mode)
        now = self.stack.clock.now()
        problems += check_answer(expect, answer, now, case.tz, mode=self.mode)
        if case.read_only:
            writes = write_attempts(answer)
            if writes:
                # A near miss is a failure: code blocking the write is the last line, not the plan.
                problems.append(f"read-only request called write tool(s) {writes}")
        if expect.candidates is not None:
            got = list(((answer.get("command") or {}).get("candidates")) or [])
            if got != expect.candidates:
                problems.append(f"candidates {expect.candidates} expected, got {got}")
        if expect.event_candidates is not None:
            offered = len(((answer.get("command") or {}).get("event_candidates")) or [])
            if offered != expect.event_candidates:
                problems.append(f"{expect.event_candidates} events to choose among expected, got {offered}")
        prompts = self.control.prompts()
        if prompts is not None:
            seen = "\n".join(prompts)
            problems += [f"prompt lacks {t!r}" for t in expect.prompt_includes or [] if t not in seen]
            problems += [f"prompt carries {t!r}" for t in expect.prompt_excludes or [] if t in seen]
        if expect.same_as_previous and previous is not None and answer != previous:
            problems.append("a retry with the same client_message_id answered differently")
        if expect.events_after is not None:
            events = await self._events(user, case, now)
            problems += check_events(expect.events_after, events, now, case.tz)
        if expect.given("stub_status_after"):
            active = await self.stack.client.get(
                "/v1/commands/active", headers=self.stack.headers(user, case.tz)
            )
            body = active.json()
            status = body.get("status") if isinstance(body, dict) else None
            if status != expect.stub_status_after:
                problems.append(f"active stub {expect.stub_status_after} expected, got {status}")
        if expect.flags or expect.flags_absent:
            flags = await self._flags(str(answer.get("turn_id")))
            missing = [f for f in expect.flags or [] if f not in flags]
            present = [f for f in expect.flags_absent or [] if f in flags]
            if missing:
                problems.append(f"flags {missing} missing from the turn record {sorted(flags)}")
            if present:
                problems.append(f"flags {present} must not be recorded")
        return problems, answer

    async def _events(self, user: str, case: Case, now: datetime) -> list[dict[str, Any]]:
        params = {
            "start": (now - timedelta(days=180)).isoformat(),
            "end": (now + timedelta(days=180)).isoformat(),
        }
        response = await self.stack.client.get(
            "/v1/events", params=params, headers=self.stack.headers(user, case.tz)
        )
        response.raise_for_status()
        events: list[dict[str, Any]] = response.json()["events"]
        return events

    async def _flags(self, turn_id: str) -> list[str]:
        # The recorder consumes turn records from JetStream, so its row lands a moment after the reply.
        for _ in range(100):
            async with self.engine.connect() as conn:
                flags = await conn.scalar(
                    text("select flags from evalrec.turns where turn_id = :t"), {"t": turn_id}
                )
            if flags is not None:
                return [str(f) for f in flags]
            await asyncio.sleep(0.05)
        raise RuntimeError(f"no turn record for {turn_id}")

    # ---- classification -----------------------------------------------------------------------

    async def run_case(self, case: Case) -> CaseResult:
        started = time.perf_counter()
        if self.mode not in case.modes:
            return CaseResult.of(case, "skipped", f"not a {self.mode} case")
        if self.trials > 1:
            return await self._trials(case, started)
        first = await self.attempt(case)
        attempts, final = 1, first
        # Live only: a model is sampled, so a non-safety failure gets one more try. Safety cases
        # never do: one wrong write online is already an incident.
        if not first.ok and self.mode == "live" and not case.safety and case.known_issue is None:
            attempts, final = 2, await self.attempt(case)
        if final.ok and attempts == 2 and case.known_issue is None:
            status, reason = "flaky", f"passed on retry; first: {first.reason}"
        elif final.ok:
            status, reason = _passed(case)
        else:
            status, reason = _failed(case, final.reason)
        return CaseResult.of(
            case,
            status,
            reason,
            attempts=attempts,
            seconds=time.perf_counter() - started,
            turns=final.turns,
            verdict=final.verdict,
        )

    async def _trials(self, case: Case, started: float) -> CaseResult:
        """K independent runs, each with a fresh user and no retry: what pass^k is measured on."""
        runs = [await self.attempt(case) for _ in range(self.trials)]
        passed = [run.ok for run in runs]
        last_failure = next((run for run in reversed(runs) if not run.ok), runs[-1])
        if all(passed):
            status, reason = _passed(case)
        elif any(passed) and case.known_issue is None:
            status, reason = (
                "flaky",
                f"passed {sum(passed)} of {len(passed)}; a failure: {last_failure.reason}",
            )
        else:
            status, reason = _failed(case, last_failure.reason)
        return CaseResult.of(
            case,
            status,
            reason,
            attempts=len(runs),
            seconds=time.perf_counter() - started,
            turns=last_failure.turns,
            trials=passed,
        )

    async def run(
        self,
        cases: Sequence[Case],
        concurrency: int = 1,
        on_result: Callable[[CaseResult], Awaitable[None] | None] | None = None,
    ) -> list[CaseResult]:
        results: dict[str, CaseResult] = {}

        async def one(case: Case) -> None:
            result = await self.run_case(case)
            results[case.id] = result
            if on_result is not None:
                maybe = on_result(result)
                if maybe is not None:
                    await maybe

        shared = [c for c in cases if not c.exclusive]
        exclusive = [c for c in cases if c.exclusive]
        gate = asyncio.Semaphore(max(1, concurrency))

        async def gated(case: Case) -> None:
            async with gate:
                await one(case)

        await asyncio.gather(*[gated(c) for c in shared])
        # These move the one frozen clock every service reads, so nothing else may run beside them.
        for case in exclusive:
            await one(case)
        return [results[c.id] for c in cases]


def _passed(case: Case) -> tuple[str, str]:
    """A case that passed: one with a known issue says the issue no longer reproduces."""
    if case.known_issue is not None:
        return "stale_known_issue", f"known issue no longer reproduces: {case.known_issue}"
    return "passed", ""


def _failed(case: Case, reason: str) -> tuple[str, str]:
    """A case that failed: expected while it has a known issue, else not yet explained."""
    return ("known_issue" if case.known_issue is not None else "unclassified"), reason


def _summary(turn: Turn, answer: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "user": turn.user,
        "outcome": answer.get("outcome"),
        "intent": answer.get("intent"),
        "tools": [f"{c.get('name')}:{c.get('result')}" for c in answer.get("tool_calls") or []],
        "model_calls": answer.get("model_calls"),
        "reply": str(answer.get("reply", ""))[:200],
    }
