"""One turn, end to end: context, fast path, the tool loop, receipts, exit checks.

Terminal versus intermediate tools is decided here, in the runtime, not by prompts: after a
terminal tool code writes the reply from the real result and the model is not called again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from opentelemetry import trace
from pydantic import ValidationError

from calagent.agent.adapters.model import ModelClient, ModelResponse, ModelUnavailable
from calagent.agent.domain import receipts
from calagent.agent.domain.claims import claims_creation, claims_schedule_read
from calagent.agent.domain.context import build_messages
from calagent.agent.domain.intent import infer_post_hoc_intent
from calagent.agent.domain.language import Lang, detect_language
from calagent.agent.domain.route import MERGEABLE_STATUSES, decide_route, write_hold
from calagent.agent.domain.session import ArchivedMessage, latest_segment
from calagent.contracts.commands import (
    ACTIVE_STUB_STATUSES,
    CancelStub,
    CommandResult,
    GetActiveStub,
    ListCalendars,
    MergeStub,
    PrepareOrCreate,
    QueryRange,
    QueryResult,
    StubOut,
    SuggestFree,
)
from calagent.contracts.envelope import Envelope
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import (
    TOOL_KINDS,
    TOOL_MODELS,
    WRITE_TOOLS,
    CancelScheduleCommand,
    PrepareOrCreateSchedule,
    QueryScheduleRange,
    SaveMemory,
    SearchChatArchive,
    SearchMemory,
    SuggestFreeTime,
    tool_schemas,
)
from calagent.contracts.turns import (
    EventView,
    Flag,
    Outcome,
    StubView,
    ToolCallOut,
    TurnAnswer,
    TurnEvent,
    TurnRecord,
    TurnRequested,
    event_view,
    stub_view,
)
from calagent.runtime.clock import Clock
from calagent.runtime.timeline import Timeline, epoch_ms

log = logging.getLogger("calagent.agent.runner")

MAX_MODEL_STEPS = 6
# An invalid tool call goes back to the model; after two failed retries the turn asks the user.
MAX_TOOL_ERRORS = 3


class CommandsPort(Protocol):
    async def execute(self, command: PrepareOrCreate | MergeStub | CancelStub) -> CommandResult: ...

    async def query(self, query: QueryRange | SuggestFree | GetActiveStub | ListCalendars) -> QueryResult: ...


class TimePort(Protocol):
    async def parse_reply(self, text: str) -> SlotPatch: ...


class StorePort(Protocol):
    async def history(self, user_id: str, conversation_id: str) -> list[ArchivedMessage]: ...

    async def archive(
        self, user_id: str, conversation_id: str, role: str, content: str, turn_id: str, at: Any
    ) -> None: ...

    async def save_memory(self, user_id: str, content: str, key: str, at: Any) -> None: ...

    async def search_memory(self, user_id: str, query: str) -> list[str]: ...

    async def search_archive(self, user_id: str, query: str, before_turn: str) -> list[str]: ...


EventSink = Callable[[TurnEvent], Awaitable[None]]


@dataclass
class TurnState:
    turn: TurnRequested
    turn_key: str
    lang: Lang
    timeline: Timeline
    stub: StubOut | None = None
    calendars: tuple[str, ...] = ()
    tool_calls: list[ToolCallOut] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    model_calls: int = 0
    write_index: int = 0
    persisted: bool = False
    read_ran: bool = False
    tool_errors: int = 0
    events: list[EventView] = field(default_factory=list)
    stub_after: StubOut | None = None
    stub_touched: bool = False
    replaced_reply: str | None = None
    error: str | None = None

    @property
    def env(self) -> Envelope:
        return self.turn.envelope

    def next_key(self) -> str:
        # Deterministic per turn, so a redelivered turn re-run after a crash reuses the same keys
        # and commands answers the first result instead of writing again.
        self.write_index += 1
        return f"{self.turn_key}:w{self.write_index}"


@dataclass
class Finished:
    outcome: Outcome
    reply: str


def _active_stub_view(stub: StubOut | None) -> StubView | None:
    if stub is None or stub.status not in ACTIVE_STUB_STATUSES:
        return None
    return stub_view(stub)


class TurnRunner:
    def __init__(
        self,
        *,
        clock: Clock,
        model: ModelClient | None,
        commands: CommandsPort,
        time: TimePort,
        store: StorePort,
        session_gap_minutes: int,
    ) -> None:
        self.clock = clock
        self.model = model
        self.commands = commands
        self.time = time
        self.store = store
        self.session_gap = timedelta(minutes=session_gap_minutes)
        self.tools = tool_schemas()
        self.tracer = trace.get_tracer("calagent.agent")

    async def run(
        self, turn: TurnRequested, turn_key: str, sink: EventSink, *, cold_start: bool = False
    ) -> tuple[TurnAnswer, TurnRecord]:
        consumed = epoch_ms()
        origin = turn.received_ms or turn.published_ms or consumed
        state = TurnState(
            turn=turn,
            turn_key=turn_key,
            lang=detect_language(turn.text),
            timeline=Timeline(origin, self.tracer),
        )
        if turn.published_ms:
            state.timeline.add_span("bus.wait", turn.published_ms, consumed)
        await sink(TurnEvent(turn_id=turn.envelope.turn_id, type="turn.started"))
        try:
            finished = await self._run(state, sink)
        except ModelUnavailable as exc:
            state.flags.append("model_unavailable")
            state.error = str(exc)
            finished = Finished("model_unavailable", receipts.model_unavailable_reply(state.lang))

        env = state.env
        await self.store.archive(
            env.user_id, env.conversation_id, "assistant", finished.reply, env.turn_id, self.clock.now()
        )
        had_stub = state.stub is not None
        intent = infer_post_hoc_intent(
            [c.name for c in state.tool_calls], had_active_stub=had_stub, fast_path="fast_path" in state.flags
        )
        stub_after = state.stub_after if state.stub_touched else state.stub
        answer = TurnAnswer(
            turn_id=env.turn_id,
            conversation_id=env.conversation_id,
            outcome=finished.outcome,
            reply=finished.reply,
            intent=intent,
            tool_calls=tuple(state.tool_calls),
            command=_active_stub_view(stub_after),
            events=tuple(state.events),
            model_calls=state.model_calls,
        )
        with state.timeline.segment("reply.publish"):
            await sink(TurnEvent(turn_id=env.turn_id, type="turn.done", answer=answer))
        record = TurnRecord(
            envelope=env,
            text=turn.text,
            outcome=finished.outcome,
            intent=intent,
            reply=finished.reply,
            tool_calls=tuple(state.tool_calls),
            flags=tuple(dict.fromkeys(state.flags)),
            model_calls=state.model_calls,
            segments=tuple(state.timeline.segments),
            total_ms=round(epoch_ms() - origin, 3),
            cold_start=cold_start,
            replaced_reply=state.replaced_reply,
            error=state.error,
        )
        return answer, record

    # ---- the turn ---------------------------------------------------------------------------------

    async def _run(self, state: TurnState, sink: EventSink) -> Finished:
        env = state.env
        with state.timeline.segment("context.build"):
            # Independent reads: one round trip's worth of waiting instead of three. The user's
            # message is archived only after the history read so it is not its own history.
            stub_result, calendars, history = await asyncio.gather(
                self.commands.query(GetActiveStub(envelope=env)),
                self.commands.query(ListCalendars(envelope=env)),
                self.store.history(env.user_id, env.conversation_id),
            )
            now = self.clock.now()
            await self.store.archive(
                env.user_id, env.conversation_id, "user", state.turn.text, env.turn_id, now
            )
        state.stub = stub_result.stub
        if state.turn.active_command_id and (
            state.stub is None or state.stub.id != state.turn.active_command_id
        ):
            # The stub this message answers has ended (expired, created, cancelled): nothing to merge.
            state.stub = None
        state.calendars = calendars.calendars

        fast = await self._fast_path(state, sink)
        if fast is not None:
            return fast
        if self.model is None:
            raise ModelUnavailable("no model is configured")

        segment = latest_segment(history, now, self.session_gap)
        messages = build_messages(
            now=env.occurred_at,
            tz=env.tz,
            calendars=state.calendars,
            stub=state.stub,
            segment=segment,
            text=state.turn.text,
            quoted=state.turn.quoted,
            forwarded=state.turn.forwarded,
        )
        return await self._tool_loop(state, messages, sink)

    async def _fast_path(self, state: TurnState, sink: EventSink) -> Finished | None:
        """An active stub plus a short reply code can parse: merged with zero model calls."""
        stub = state.stub
        if stub is None or stub.status not in MERGEABLE_STATUSES:
            return None
        with state.timeline.segment("fastpath.parse"):
            patch = await self.time.parse_reply(state.turn.text)
        weekdays = frozenset(day.isoweekday() for day in stub.candidates)
        if decide_route(stub.status, patch, weekdays) != "fast_path":
            return None
        state.flags.append("fast_path")
        command = MergeStub(
            envelope=state.env, idempotency_key=state.next_key(), command_id=stub.id, patch=patch
        )
        with state.timeline.segment("tool.merge_stub"):
            result = await self.commands.execute(command)
        self._add_db_segment(state, result.db_ms)
        call = ToolCallOut(
            name="merge_stub", arguments=patch.model_dump(exclude_none=True), result=result.status
        )
        state.tool_calls.append(call)
        await sink(TurnEvent(turn_id=state.env.turn_id, type="tool.called", tool=call))
        if result.status == "error":
            # A patch the resolver refuses (e.g. a weekday outside the candidates) is not guessed
            # into a date: the model, which sees the stub and the error, takes over instead.
            state.tool_calls.pop()
            state.flags.remove("fast_path")
            return None
        return self._finish_command(state, result)

    async def _tool_loop(self, state: TurnState, messages: list[dict[str, Any]], sink: EventSink) -> Finished:
        assert self.model is not None
        env = state.env

        stream = ClaimGuardedStream(
            lambda delta: sink(TurnEvent(turn_id=env.turn_id, type="reply.delta", delta=delta))
        )

        for _ in range(MAX_MODEL_STEPS):
            stream.reset()
            on_delta = stream.feed
            response = await self._call_model(state, messages, on_delta)
            if not response.tool_calls:
                return self._exit_check(state, response.text)
            messages.append(
                {
                    "role": "assistant",
                    "content": response.text or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in response.tool_calls
                    ],
                }
            )
            finished: Finished | None = None
            writes = 0
            for call in response.tool_calls:
                if finished is not None:
                    # The turn already ended on a terminal tool; what follows is not run.
                    state.tool_calls.append(
                        ToolCallOut(name=call.name, arguments=_loads(call.arguments), result="skipped")
                    )
                    continue
                if call.name in WRITE_TOOLS:
                    writes += 1
                    if writes > 1:
                        state.flags.append("write_refused")
                        outcome = self._tool_error(
                            state,
                            messages,
                            call.id,
                            call.name,
                            call.arguments,
                            "refused",
                            "one write per model response: this second write was not executed",
                        )
                        await sink(TurnEvent(turn_id=env.turn_id, type="tool.called", tool=outcome))
                        continue
                finished = await self._dispatch(state, messages, call.id, call.name, call.arguments, sink)
            if finished is not None:
                return finished
            if state.tool_errors >= MAX_TOOL_ERRORS:
                return Finished("rejected", receipts.ask_user_after_errors(state.lang))
        return Finished("rejected", receipts.ask_user_after_errors(state.lang))

    async def _call_model(
        self, state: TurnState, messages: list[dict[str, Any]], on_delta: Callable[[str], Awaitable[None]]
    ) -> ModelResponse:
        assert self.model is not None
        start = epoch_ms()
        try:
            response = await self.model.complete(messages, self.tools, on_delta)
        finally:
            state.model_calls += 1
        attrs = {
            "gen_ai.system": "openai",
            "gen_ai.request.model": self.model.model,
            "gen_ai.usage.input_tokens": response.prompt_tokens,
            "gen_ai.usage.output_tokens": response.completion_tokens,
        }
        state.timeline.add_span("model.request", start, response.end_ms, attrs)
        state.timeline.add_span("model.ttft", response.start_ms, response.first_token_ms)
        state.timeline.add_span("model.generation", response.first_token_ms, response.end_ms)
        return response

    def _tool_error(
        self,
        state: TurnState,
        messages: list[dict[str, Any]],
        call_id: str,
        name: str,
        raw_arguments: str,
        code: str,
        message: str,
    ) -> ToolCallOut:
        state.tool_errors += 1
        state.flags.append("tool_error")
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "content": json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False),
            }
        )
        out = ToolCallOut(name=name, arguments=_loads(raw_arguments), result=f"error:{code}")
        state.tool_calls.append(out)
        return out

    async def _dispatch(
        self,
        state: TurnState,
        messages: list[dict[str, Any]],
        call_id: str,
        name: str,
        raw_arguments: str,
        sink: EventSink,
    ) -> Finished | None:
        env = state.env
        model = TOOL_MODELS.get(name)
        if model is None:
            out = self._tool_error(
                state, messages, call_id, name, raw_arguments, "unknown_tool", f"no tool {name!r}"
            )
            await sink(TurnEvent(turn_id=env.turn_id, type="tool.called", tool=out))
            return None
        try:
            args = model.model_validate_json(raw_arguments or "{}")
        except ValidationError as exc:
            detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            out = self._tool_error(state, messages, call_id, name, raw_arguments, "invalid_arguments", detail)
            await sink(TurnEvent(turn_id=env.turn_id, type="tool.called", tool=out))
            return None

        with state.timeline.segment(f"tool.{name}"):
            finished, content, result_label = await self._execute(state, args)
        out = ToolCallOut(name=name, arguments=args.model_dump(exclude_none=True), result=result_label)
        if result_label.startswith("error:"):
            state.tool_errors += 1
            state.flags.append("tool_error")
        state.tool_calls.append(out)
        await sink(TurnEvent(turn_id=env.turn_id, type="tool.called", tool=out))
        if finished is not None and TOOL_KINDS[name] == "terminal":
            return finished
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        return None

    async def _execute(self, state: TurnState, args: Any) -> tuple[Finished | None, str, str]:
        """Run one validated tool call. Returns (terminal finish or None, content for the model, label)."""
        env = state.env
        if isinstance(args, PrepareOrCreateSchedule):
            return await self._create(state, args)
        if isinstance(args, QueryScheduleRange):
            query: QueryRange | SuggestFree = QueryRange(
                envelope=env,
                start_symbol=args.start,
                end_symbol=args.end,
                incomplete_only=args.incomplete_only,
            )
        elif isinstance(args, SuggestFreeTime):
            query = SuggestFree(
                envelope=env,
                start_symbol=args.start,
                end_symbol=args.end,
                duration_minutes=args.duration_minutes,
            )
        else:
            return await self._execute_other(state, args)
        q = await self.commands.query(query)
        self._add_db_segment(state, q.db_ms)
        if q.error is not None:
            return None, _error_content(q.error.code, q.error.message), f"error:{q.error.code}"
        state.read_ran = True
        with state.timeline.segment("receipt"):
            if isinstance(query, QueryRange):
                state.events.extend(event_view(e) for e in q.events)
                return Finished("queried", receipts.query_receipt(q, env.tz, state.lang)), "", "queried"
            reply = receipts.free_time_receipt(q.free_slots, query.duration_minutes, env.tz, state.lang)
            return Finished("suggested", reply), "", "suggested"

    async def _execute_other(self, state: TurnState, args: Any) -> tuple[Finished | None, str, str]:
        env = state.env
        if isinstance(args, CancelScheduleCommand):
            result = await self.commands.execute(
                CancelStub(envelope=env, idempotency_key=state.next_key(), command_id=args.command_id)
            )
            self._add_db_segment(state, result.db_ms)
            state.stub_touched = True
            state.stub_after = None
            with state.timeline.segment("receipt"):
                reply = receipts.command_receipt(result, env.tz, state.lang)
            return (
                Finished("cancelled" if result.status == "cancelled" else "answered", reply),
                "",
                result.status,
            )
        if isinstance(args, SaveMemory):
            with state.timeline.segment("db.save_memory"):
                await self.store.save_memory(env.user_id, args.content, state.next_key(), self.clock.now())
            return (
                Finished("memory_saved", receipts.memory_saved_receipt(args.content, state.lang)),
                "",
                "saved",
            )
        if isinstance(args, SearchMemory):
            with state.timeline.segment("db.search_memory"):
                found = await self.store.search_memory(env.user_id, args.query)
            return None, json.dumps({"memories": found}, ensure_ascii=False), f"found:{len(found)}"
        if isinstance(args, SearchChatArchive):
            with state.timeline.segment("db.search_chat_archive"):
                found = await self.store.search_archive(env.user_id, args.query, env.turn_id)
            return None, json.dumps({"messages": found}, ensure_ascii=False), f"found:{len(found)}"
        raise AssertionError(f"unhandled tool arguments {type(args).__name__}")

    async def _create(
        self, state: TurnState, args: PrepareOrCreateSchedule
    ) -> tuple[Finished | None, str, str]:
        env = state.env
        stub = state.stub
        command: PrepareOrCreate | MergeStub
        if stub is not None and stub.status == "held" and not state.turn.third_party:
            # Code proves a held stub exists and this turn is the user's own words; the model's
            # renewed create is its reading that the user confirmed. Both facts → execute.
            command = MergeStub(
                envelope=env,
                idempotency_key=state.next_key(),
                command_id=stub.id,
                patch=SlotPatch(),
                confirm=True,
            )
        else:
            command = PrepareOrCreate(
                envelope=env,
                idempotency_key=state.next_key(),
                args=args,
                active_command_id=stub.id if stub is not None else None,
                hold=write_hold(state.turn.third_party),
            )
        result = await self.commands.execute(command)
        self._add_db_segment(state, result.db_ms)
        if result.status == "error" and result.error is not None:
            # Bad symbols are never guessed into correctness: the model gets the error and retries.
            return None, _error_content(result.error.code, result.error.message), f"error:{result.error.code}"
        finished = self._finish_command(state, result)
        return finished, "", result.status

    def _finish_command(self, state: TurnState, result: CommandResult) -> Finished:
        state.stub_touched = True
        state.stub_after = result.stub
        if result.event is not None:
            state.events.append(event_view(result.event))
        # The only source of "persisted": a commands reply sent after its commit.
        state.persisted = state.persisted or (result.status == "created" and result.persisted)
        if result.status == "held":
            state.flags.append("held")
        with state.timeline.segment("receipt"):
            reply = receipts.command_receipt(result, state.env.tz, state.lang)
        outcome: Outcome
        if result.status in ("created", "needs_date", "needs_time", "conflict", "held", "cancelled"):
            outcome = result.status
        else:
            outcome = "answered"
        if result.status == "created" and not result.persisted:
            outcome = "answered"
        return Finished(outcome, reply)

    def _exit_check(self, state: TurnState, text: str) -> Finished:
        """Facts, not wording, decide: a claim is replaced (never appended to) when the fact is absent."""
        with state.timeline.segment("exit_check"):
            if not state.persisted and claims_creation(text):
                state.flags.append("unverified_create_claim")
                state.replaced_reply = text
                return Finished("claim_replaced", receipts.replaced_create_claim(state.lang))
            if not state.read_ran and claims_schedule_read(text):
                state.flags.append("unverified_read_claim")
                state.replaced_reply = text
                return Finished("claim_replaced", receipts.replaced_read_claim(state.lang))
        reply = text.strip() or ("好的。" if state.lang == "zh" else "OK.")
        return Finished("answered", reply)

    def _add_db_segment(self, state: TurnState, db_ms: float) -> None:
        if db_ms > 0:
            end = epoch_ms()
            state.timeline.add_span("db.commands", end - db_ms, end)


class ClaimGuardedStream:
    """Streams the model's text to the client while keeping a fabricated claim off the wire.

    The exit check replaces a false claim after the response ends; without this guard the client
    would already have seen it in `reply.delta` events. The last few characters are held back
    (a claim needs a handful of them to be recognised), and once the text seen so far looks like a
    create or read claim nothing more is streamed: `turn.done` carries the authoritative reply.
    """

    HOLD_BACK = 12

    def __init__(self, emit: Callable[[str], Awaitable[None]]) -> None:
        self.emit = emit
        self.reset()

    def reset(self) -> None:
        self.text = ""
        self.sent = 0
        self.stopped = False

    async def feed(self, delta: str) -> None:
        self.text += delta
        if self.stopped:
            return
        if claims_creation(self.text) or claims_schedule_read(self.text):
            self.stopped = True
            return
        safe = len(self.text) - self.HOLD_BACK
        if safe > self.sent:
            chunk = self.text[self.sent : safe]
            self.sent = safe
            await self.emit(chunk)


def _loads(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_raw": raw[:500]}
    return value if isinstance(value, dict) else {"_raw": raw[:500]}


def _error_content(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False)


def tool_names() -> Sequence[str]:
    return list(TOOL_MODELS)
