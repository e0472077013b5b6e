"""What a tool call answered: the result a handler returns, the errors the model is told, what the
model sees of a terminal result when the turn goes on, and a commands reply applied to the turn's
facts with its code-written receipt (contract §5, §8). Shared by the tool table and the gates."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from calagent.agent.domain import receipts, words
from calagent.agent.ports import EventSink
from calagent.agent.state import Finished, TurnState
from calagent.contracts.commands import WRITTEN_STATUSES, CommandResult, is_command_outcome
from calagent.contracts.queries import QueryResult
from calagent.contracts.turns import Outcome, ToolCallOut, TurnEvent, event_view
from calagent.runtime.bus import BusRequestError
from calagent.runtime.settle import is_transient
from calagent.runtime.timeline import epoch_ms

# Errors the user is told about by a receipt rather than sent back to the model to retry: there is
# nothing a better argument would fix.
TERMINAL_ERRORS: frozenset[str] = frozenset(
    {"no_active_command", "changed_since", "already_undone", "nothing_to_undo"}
)


@dataclass(frozen=True)
class ToolResult:
    label: str
    content: str = ""
    finished: Finished | None = None
    # A write held because someone else's words reached the model: the turn goes on, so the
    # request the user made in their own words can still be made (contract §19).
    goes_on: bool = False


# The note a held write's result carries back to the model, so it goes on with the user's request.
HELD_NOTE = (
    "not done: asked for after someone else's words reached you in this turn. Do not ask for it "
    "again; do what the user asked in their own words, if anything, or answer."
)


def result_label(result: CommandResult) -> str:
    """What a tool call's record says of a command's result: its status, or `error:<code>` for a
    refusal (a terminal one too, told to the user by a receipt), so a client reads why."""
    return result.status if result.error is None else f"error:{result.error.code}"


def error_content(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False)


def tool_error(code: str, message: str) -> ToolResult:
    """A call the model is told failed, with the code it is recorded under."""
    return ToolResult(f"error:{code}", error_content(code, message))


def finished_content(finished: Finished, source: str | None, *, held_note: bool = False) -> str:
    """What the model sees of a terminal result when the turn goes on (one write per response, a
    write held for someone else's words); a receipt that quotes someone else's text (`source`)
    says so (contract §19)."""
    content: dict[str, Any] = {"outcome": finished.outcome, "receipt": finished.reply}
    if held_note:
        content["note"] = HELD_NOTE
    if source is not None:
        content[words.TOOL_MARK] = {"source": source, "fields": ["receipt"]}
    return json.dumps(content, ensure_ascii=False)


def add_db_segment(state: TurnState, db_ms: float) -> None:
    if db_ms > 0:
        end = epoch_ms()
        state.timeline.add_span("db.commands", end - db_ms, end)


Answer = TypeVar("Answer", CommandResult, QueryResult)


async def answered(state: TurnState, request: Awaitable[Answer], failed_code: str) -> Answer | ToolResult:
    """The commands service's answer to a command or a read, its database time on the timeline.

    A transient failure (`is_transient`: commands could not serve the request this time) raises:
    the turn is worth redelivering. Any other (`internal`, `malformed`) fails again on every retry,
    so it goes back to the model as a tool error (`failed_code`) and the turn ends with an answer,
    not a redelivery loop."""
    try:
        result = await request
    except BusRequestError as exc:
        if is_transient(exc):
            raise
        return ToolResult(f"error:{exc.code}", error_content(failed_code, exc.message))
    add_db_segment(state, result.db_ms)
    return result


async def record_call(state: TurnState, sink: EventSink, call: ToolCallOut) -> None:
    state.tool_calls.append(call)
    await sink(TurnEvent(turn_id=state.env.turn_id, type="tool.called", tool=call))


def apply_command_result(state: TurnState, result: CommandResult) -> Finished:
    """Record a commands reply in the turn's facts and write its receipt."""
    if result.kept is None:
        # A kept stub was not touched: it stays what the turn found (and this reply offers nothing).
        state.stub_touched = True
        state.stub_after = result.stub
    if result.event is not None:
        state.events.append(event_view(result.event))
    # The only source of "persisted": a commands reply sent after its commit.
    state.persisted = state.persisted or (result.status in WRITTEN_STATUSES and result.persisted)
    if result.persisted and result.change_id is not None and result.change_id not in state.change_ids:
        state.change_ids.append(result.change_id)
    if result.status == "held":
        state.flag("held")
    if result.replan is not None:
        # The write landed on task blocks: their re-plan is the user's pending offer now.
        state.stub_touched = True
        state.stub_after = result.replan
        state.flag("held")
    if result.superseded is not None:
        state.flag("stub_superseded")
    with state.timeline.segment("receipt"):
        reply = receipts.command_receipt(result, state.view)
    outcome: Outcome = result.status if is_command_outcome(result.status) else "answered"
    if result.status in WRITTEN_STATUSES and not result.persisted:
        outcome = "answered"
    return Finished(outcome, reply, words.quoted_in(result))
