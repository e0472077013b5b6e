"""One turn, end to end: context, the pending-command gates, the tool loop, the reply.

Terminal versus intermediate tools is decided here, in the runtime, not by prompts: after a
terminal tool code writes the reply from the real result and the model is not called again —
unless a second write in the same response was refused, in which case the results go back to the
model so it can issue that write in its next step (one write per model response, contract §8).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from opentelemetry import trace
from pydantic import ValidationError

from calagent.agent.adapters.model import ModelClient, ModelResponse, ModelToolCall, ModelUnavailable
from calagent.agent.domain import fixed_replies, receipts
from calagent.agent.domain.context import build_messages
from calagent.agent.domain.intent import infer_post_hoc_intent
from calagent.agent.domain.language import detect_language
from calagent.agent.domain.pending import LastAssistant
from calagent.agent.domain.session import ArchivedMessage, latest_segment
from calagent.agent.domain.view import View
from calagent.agent.domain.words import calendar_names_hidden, carries_third_party, source_of
from calagent.agent.exit_check import ClaimGuardedStream, exit_check
from calagent.agent.gates import answer_pending, answer_undo
from calagent.agent.ports import CommandsPort, EventSink, StorePort, TimePort, TurnFinish
from calagent.agent.repairs import natural_dates, repaired_calls
from calagent.agent.results import ToolResult, error_content, finished_content, record_call, tool_error
from calagent.agent.state import Finished, TurnState
from calagent.agent.tools import Tools
from calagent.contracts.commands import ACTIVE_STUB_STATUSES, StubOut
from calagent.contracts.queries import TurnContext
from calagent.contracts.text import storable
from calagent.contracts.tools import TOOL_KINDS, TOOL_MODELS, WRITE_TOOLS, tool_schemas
from calagent.contracts.turns import (
    DirectCall,
    ModelUsage,
    StubView,
    ToolCallOut,
    TurnAnswer,
    TurnEvent,
    TurnRecord,
    TurnRequested,
    stub_view,
)
from calagent.runtime.clock import Clock
from calagent.runtime.timeline import Timeline, epoch_ms

MAX_MODEL_STEPS = 6
# Kept back from the turn's timeout for what follows the model (tools, the reply, publishing).
TURN_RESERVE_S = 2.0
# An invalid tool call goes back to the model; after two failed retries the turn asks the user.
MAX_TOOL_ERRORS = 3
ONE_WRITE = "one_write_per_response"


def _active_stub_view(stub: StubOut | None) -> StubView | None:
    if stub is None or stub.status not in ACTIVE_STUB_STATUSES:
        return None
    return stub_view(stub)


def _last_assistant(history: Sequence[ArchivedMessage]) -> LastAssistant | None:
    """The assistant's message right before this one; if the user spoke since, there is no offer
    pending an answer."""
    if not history or history[-1].role != "assistant":
        return None
    last = history[-1]
    return LastAssistant(at=last.created_at, offer_command_id=last.offer_command_id, turn_id=last.turn_id)


def _last_offer(history: Sequence[ArchivedMessage]) -> str | None:
    """The offer the user was last shown: the newest an assistant message recorded."""
    for message in reversed(history):
        if message.role == "assistant" and message.offer_command_id is not None:
            return message.offer_command_id
    return None


def _loads(raw: str) -> dict[str, Any]:
    """The model's arguments as recorded with the call, even when invalid; never with a NUL,
    which the answer's storage cannot hold."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_raw": storable(raw[:500])}
    return storable(value) if isinstance(value, dict) else {"_raw": storable(raw[:500])}


def _error_message(messages: Sequence[dict[str, Any]]) -> str:
    """The message of the structured error a tool answered (what the model would have read)."""
    for message in reversed(messages):
        try:
            error = json.loads(message.get("content") or "{}").get("error")
        except (json.JSONDecodeError, AttributeError):
            continue
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return ""


def _combined(finished: Sequence[Finished]) -> Finished:
    """Every terminal result of the turn in one reply; the last one names the outcome."""
    quotes = tuple(q for f in finished for q in f.quotes)
    return Finished(finished[-1].outcome, "\n".join(f.reply for f in finished), quotes)


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
        offer_window_minutes: int = 30,
        turn_timeout_s: float = 90.0,
        model_timeout_s: float = 60.0,
    ) -> None:
        self.clock = clock
        self.model = model
        self.commands = commands
        self.time = time
        self.store = store
        self.session_gap = timedelta(minutes=session_gap_minutes)
        self.offer_window = timedelta(minutes=offer_window_minutes)
        self.turn_timeout_s = turn_timeout_s
        self.model_timeout_s = model_timeout_s
        self.tools = Tools(commands, store, clock)
        self.schemas = tool_schemas()
        self.tool_names = frozenset(TOOL_MODELS)
        self.tracer = trace.get_tracer("calagent.agent")

    async def run(
        self,
        turn: TurnRequested,
        turn_key: str,
        sink: EventSink,
        *,
        history: Sequence[ArchivedMessage] = (),
        finish: TurnFinish | None = None,
        cold_start: bool = False,
    ) -> tuple[TurnAnswer, TurnRecord]:
        """Run the turn over `history` (read with the turn's claim, without this turn's messages);
        `finish` stores its end before `turn.done` tells it, so a client that heard the answer
        finds it in the archive and under its key."""
        consumed = epoch_ms()
        origin = turn.received_ms or turn.published_ms or consumed
        state = self._start(turn, turn_key, origin, consumed)
        await sink(TurnEvent(turn_id=turn.envelope.turn_id, type="turn.started"))
        try:
            finished = await self._run(state, sink, history)
        except ModelUnavailable as exc:
            state.flag("model_unavailable")
            if exc.circuit_open:
                state.flag("circuit_open")
                state.retry_after_s = round(max(exc.retry_after_s or 1.0, 1.0), 3)
            state.error = str(exc)
            finished = Finished("model_unavailable", fixed_replies.model_unavailable_reply(state.lang))
        if state.sync_notices:
            # Told once, after the turn's own answer: what the connected calendar did not take.
            notes = receipts.sync_notice_lines(state.sync_notices, state.view)
            noticed = tuple(n.event for n in state.sync_notices if n.event is not None)
            finished = Finished(finished.outcome, f"{finished.reply}\n{notes}", finished.quotes + noticed)

        intent = infer_post_hoc_intent(
            [c.name for c in state.tool_calls],
            had_active_stub=state.stub is not None,
            fast_path="fast_path" in state.flags,
        )
        answer = _turn_answer(state, finished, intent)
        if finish is not None:
            # Archived with whose words it carries, if anyone's: the model reads it again by that.
            quoted = source_of(finished.quotes) or state.foreign_source
            await finish(answer, state.offered_stub_id, quoted)
        tokens = sum(u.total_tokens for u in state.model_usage)
        with state.timeline.segment("reply.publish"):
            await sink(TurnEvent(turn_id=state.env.turn_id, type="turn.done", answer=answer, tokens=tokens))
        record = _turn_record(
            state, finished, intent, total_ms=round(epoch_ms() - origin, 3), cold_start=cold_start
        )
        return answer, record

    def _start(self, turn: TurnRequested, turn_key: str, origin: float, consumed: float) -> TurnState:
        """The turn's state, its timeline starting where the user's wait did (`origin`)."""
        # A command without words is answered in the language of the door it came through.
        lang = (turn.envelope.lang if turn.direct is not None else None) or detect_language(turn.text)
        state = TurnState(
            turn=turn,
            turn_key=turn_key,
            lang=lang,
            timeline=Timeline(origin, self.tracer),
            view=View.at(turn.envelope.occurred_at, turn.envelope.tz, lang),
            # The gateway stops waiting `turn_timeout_s` after it received the request.
            model_deadline_ms=origin + (self.turn_timeout_s - TURN_RESERVE_S) * 1000.0,
        )
        if turn.received_ms and turn.published_ms:
            # The gateway's share before the bus, so the record's timeline starts where the user's
            # wait did. A segment only: the gateway traces its own receive span.
            state.timeline.add("gateway.receive", turn.received_ms, turn.published_ms)
        if turn.published_ms:
            state.timeline.add_span("bus.wait", turn.published_ms, consumed)
        return state

    # ---- the turn ---------------------------------------------------------------------------------

    async def _run(self, state: TurnState, sink: EventSink, history: Sequence[ArchivedMessage]) -> Finished:
        env = state.env
        with state.timeline.segment("context.build"):
            # One request: the stub, the calendars and, only when a stub is active, the time
            # service's reading of the words (the fast path merges its patch). A direct call is
            # no answer to a stub: nothing to read.
            now = self.clock.now()
            # A new user's calendars are named in the language the turn is answered in.
            context_env = env if env.lang is not None else env.model_copy(update={"lang": state.lang})
            words = None if state.turn.direct is not None else state.turn.text
            context = await self.commands.query(
                TurnContext(envelope=context_env, text=words, command_id=state.turn.active_command_id)
            )
        state.stub = context.stub
        if state.turn.active_command_id and (
            state.stub is None or state.stub.id != state.turn.active_command_id
        ):
            # The stub this message answers has ended (expired, created, cancelled): nothing to merge.
            state.stub = None
        state.calendars = context.calendars
        state.connected_calendars = context.connected_calendars
        state.sync_notices = context.sync_notices
        state.last_assistant = _last_assistant(history)
        state.shown_offer_id = _last_offer(history)
        state.parsed = context.parsed

        if state.turn.direct is not None:
            return await self._run_direct(state, state.turn.direct, sink)
        undone = await answer_undo(state, sink, now, commands=self.commands, window=self.offer_window)
        if undone is not None:
            return undone
        pending = await answer_pending(state, sink, now, commands=self.commands, window=self.offer_window)
        if pending is not None:
            return pending
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
            promoted=state.turn.promoted,
            connected_calendars=state.connected_calendars,
        )
        return await self._tool_loop(state, messages, sink)

    async def _run_direct(self, state: TurnState, direct: DirectCall, sink: EventSink) -> Finished:
        """The client's own tool call, through the dispatch a model's call takes (the same argument
        models, the same commands, held where a chat request is held), with no model call; an
        error is the answer, since there is no model to retry."""
        call = ModelToolCall(
            id="direct", name=direct.tool, arguments=json.dumps(direct.arguments, ensure_ascii=False)
        )
        messages: list[dict[str, Any]] = []
        await self._dispatch(state, messages, call, sink)
        if state.finished:
            return _combined(state.finished)
        return Finished("rejected", fixed_replies.direct_call_refused(_error_message(messages), state.lang))

    async def _tool_loop(self, state: TurnState, messages: list[dict[str, Any]], sink: EventSink) -> Finished:
        env = state.env
        stream = ClaimGuardedStream(
            lambda delta: sink(TurnEvent(turn_id=env.turn_id, type="reply.delta", delta=delta))
        )
        for _ in range(MAX_MODEL_STEPS):
            stream.reset()
            response = await self._call_model(state, messages, stream.feed)
            calls, text = repaired_calls(state, response, self.tool_names)
            if not calls:
                return self._final_text(state, text)
            messages.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in calls
                    ],
                }
            )
            finished_before = len(state.finished)
            goes_on = await self._run_calls(state, messages, calls, sink)
            if len(state.finished) > finished_before and not goes_on:
                return _combined(state.finished)
            if state.tool_errors >= MAX_TOOL_ERRORS:
                break
        if state.finished:
            return _combined(state.finished)
        return Finished("rejected", fixed_replies.ask_user_after_errors(state.lang))

    async def _run_calls(
        self,
        state: TurnState,
        messages: list[dict[str, Any]],
        calls: Sequence[ModelToolCall],
        sink: EventSink,
    ) -> bool:
        """Run one response's calls in order; at most one write. Returns whether the turn goes on
        after a terminal result: a write was refused (so the model can issue it again), or every
        write was held for someone else's words (so the user's own request can still be made)."""
        writes = 0
        refused = False
        held: list[bool] = []
        for call in calls:
            if call.name in WRITE_TOOLS:
                writes += 1
                if writes > 1:
                    refused = True
                    state.flag("write_refused")
                    result = ToolResult(
                        f"refused:{ONE_WRITE}",
                        error_content(
                            ONE_WRITE,
                            "one write per model response: this write was not executed; issue it again in your next step",
                        ),
                    )
                    await self._answer_call(state, messages, sink, call, _loads(call.arguments), result)
                    continue
            ran = await self._dispatch(state, messages, call, sink)
            if ran is not None and ran.finished is not None:
                held.append(ran.goes_on)
        return refused or (bool(held) and all(held))

    async def _dispatch(
        self, state: TurnState, messages: list[dict[str, Any]], call: ModelToolCall, sink: EventSink
    ) -> ToolResult | None:
        """Run one call and answer it in the conversation; the result, when a tool ran."""
        model = TOOL_MODELS.get(call.name)
        if model is None:
            result = tool_error("unknown_tool", f"no tool {call.name!r}")
            await self._answer_call(state, messages, sink, call, _loads(call.arguments), result)
            return None
        try:
            args = model.model_validate_json(call.arguments or "{}")
        except ValidationError as exc:
            repaired = await natural_dates(state, self.time, model, call, exc)
            if repaired is None:
                detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                result = tool_error("invalid_arguments", detail)
                await self._answer_call(state, messages, sink, call, _loads(call.arguments), result)
                return None
            args = repaired
        with state.timeline.segment(f"tool.{call.name}"):
            result = await self.tools.run(state, args)
        await self._answer_call(state, messages, sink, call, args.model_dump(exclude_none=True), result)
        return result

    async def _answer_call(
        self,
        state: TurnState,
        messages: list[dict[str, Any]],
        sink: EventSink,
        call: ModelToolCall,
        arguments: dict[str, Any],
        result: ToolResult,
    ) -> None:
        if result.label.startswith("error:") and result.finished is None:
            # A refusal with a receipt (a terminal error) ends the turn; no retry is owed.
            state.tool_errors += 1
            state.flag("tool_error")
        await record_call(state, sink, ToolCallOut(name=call.name, arguments=arguments, result=result.label))
        content = result.content
        if result.finished is not None and TOOL_KINDS.get(call.name) == "terminal":
            state.finished.append(result.finished)
            quoted = source_of(result.finished.quotes) or state.foreign_source
            content = finished_content(result.finished, quoted, held_note=result.goes_on)
            if state.third_party_seen is None and quoted is not None:
                # A receipt quoting someone else's text reaches the model as a tool result.
                state.third_party_seen = quoted
        if state.third_party_seen is None and carries_third_party(content):
            state.third_party_seen = f"third-party content in the result of {call.name}"
        # Every call gets its answer in the conversation, so the model can be asked again.
        content = calendar_names_hidden(content, state.connected_calendars)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": content})

    def _final_text(self, state: TurnState, text: str) -> Finished:
        """The model answered in words: checked against the facts; after earlier writes of this
        turn, their receipts come first so no write goes unmentioned."""
        checked = exit_check(state, text)
        if not state.finished:
            return checked
        done = _combined(state.finished)
        if checked.outcome == "claim_replaced" or not text.strip():
            return done
        return Finished(done.outcome, f"{done.reply}\n{checked.reply}", done.quotes)

    async def _call_model(
        self, state: TurnState, messages: list[dict[str, Any]], on_delta: Callable[[str], Awaitable[None]]
    ) -> ModelResponse:
        assert self.model is not None
        start = epoch_ms()
        # Retries stay inside what is left of the turn; but a turn run after its client stopped
        # waiting (redelivered after an outage) still gets one whole attempt: its answer is stored
        # for the client's retry with the same key.
        budget_s = max((state.model_deadline_ms - start) / 1000.0, self.model_timeout_s)
        try:
            response = await self.model.complete(messages, self.schemas, on_delta, budget_s=budget_s)
        except ModelUnavailable as exc:
            if not exc.circuit_open:
                state.model_calls += 1
            raise
        state.model_calls += 1
        if response.failed_attempts:
            state.flag("model_retried")
        model = response.model or self.model.model
        if model != self.model.model:
            state.flag("model_fallback")
        state.model_usage.append(
            ModelUsage(
                model=model,
                prompt_tokens=response.prompt_tokens,
                completion_tokens=response.completion_tokens,
                cached_tokens=response.cached_tokens,
                reported=response.usage_reported,
            )
        )
        attrs = {
            "gen_ai.system": "openai",
            "gen_ai.request.model": self.model.model,
            "gen_ai.response.model": model,
            "gen_ai.usage.input_tokens": response.prompt_tokens,
            "gen_ai.usage.output_tokens": response.completion_tokens,
            "gen_ai.usage.cached_tokens": response.cached_tokens,
        }
        state.timeline.add_span("model.request", start, response.end_ms, attrs)
        state.timeline.add_span("model.ttft", response.start_ms, response.first_token_ms)
        state.timeline.add_span("model.generation", response.first_token_ms, response.end_ms)
        return response


def _turn_answer(state: TurnState, finished: Finished, intent: str) -> TurnAnswer:
    env = state.env
    return TurnAnswer(
        turn_id=env.turn_id,
        conversation_id=env.conversation_id,
        outcome=finished.outcome,
        reply=finished.reply,
        intent=intent,
        tool_calls=tuple(state.tool_calls),
        command=_active_stub_view(state.current_stub),
        events=tuple(state.events),
        model_calls=state.model_calls,
        retry_after_s=state.retry_after_s,
        change_ids=tuple(state.change_ids),
        slots=None if state.slots is None else tuple(state.slots),
        empty_reason=state.empty_reason,
    )


def _turn_record(
    state: TurnState, finished: Finished, intent: str, *, total_ms: float, cold_start: bool
) -> TurnRecord:
    return TurnRecord(
        envelope=state.env,
        text=state.turn.text,
        outcome=finished.outcome,
        intent=intent,
        reply=finished.reply,
        tool_calls=tuple(state.tool_calls),
        flags=tuple(state.flags),
        model_calls=state.model_calls,
        segments=tuple(state.timeline.segments),
        total_ms=total_ms,
        cold_start=cold_start,
        replaced_reply=state.replaced_reply,
        error=state.error,
        model_usage=tuple(state.model_usage),
        repairs=tuple(state.repairs),
    )
