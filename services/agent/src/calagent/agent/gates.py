"""The answers that need no model: a bare undo right after a receipt, and the answers to the active
stub (an invitation's answer, the timed gate, the short-reply fast path)."""

from __future__ import annotations

from datetime import datetime, timedelta

from calagent.agent.domain import fixed_replies, receipts
from calagent.agent.domain.choosing import asks_which, choose
from calagent.agent.domain.pending import (
    bare_answer,
    fast_path_patch,
    invitation_answer,
    offer_open,
    speaks_for_user,
    timed_gate,
    undo_gate,
)
from calagent.agent.ports import CommandsPort, EventSink
from calagent.agent.results import add_db_segment, apply_command_result, record_call, result_label
from calagent.agent.state import Finished, TurnState
from calagent.agent.tools import confirm_command, undo_command
from calagent.contracts.commands import CancelStub, CommandResult, MergeStub, RevertChange, StubOut
from calagent.contracts.time import SlotPatch
from calagent.contracts.turns import ToolCallOut


async def answer_undo(
    state: TurnState, sink: EventSink, now: datetime, *, commands: CommandsPort, window: timedelta
) -> Finished | None:
    """A bare "撤销" right after a receipt takes back that receipt's change with zero model
    calls; when that turn changed nothing, the model reads the word like any other."""
    turn_id = undo_gate(
        state.turn.text,
        last_assistant=state.last_assistant,
        now=now,
        window=window,
        own_words=speaks_for_user(promoted=state.turn.promoted, forwarded=state.turn.forwarded),
    )
    if turn_id is None:
        return None
    result = await execute(state, commands, "undo_change", undo_command(state, turn_id=turn_id))
    if result.error is not None and result.error.code == "nothing_to_undo":
        return None
    state.flag("timed_gate")
    call = ToolCallOut(
        name="undo_change",
        arguments={"change_id": result.undid.id} if result.undid is not None else {},
        result=result_label(result),
    )
    await record_call(state, sink, call)
    return apply_command_result(state, result)


async def answer_pending(
    state: TurnState, sink: EventSink, now: datetime, *, commands: CommandsPort, window: timedelta
) -> Finished | None:
    """Zero-model answers to the active stub: the timed gate, then the short-reply fast path."""
    stub = state.stub
    if stub is None:
        return None
    own_words = speaks_for_user(promoted=state.turn.promoted, forwarded=state.turn.forwarded)
    answer = invitation_answer(state.turn.text, stub=stub, own_words=own_words)
    if answer is not None:
        state.flag("timed_gate")
        reply = confirm_command(state, stub.id).model_copy(update={"partstat": answer})
        result = await execute(state, commands, "confirm_command", reply)
        await record_call(
            state,
            sink,
            ToolCallOut(name="confirm_command", arguments={"command_id": stub.id}, result=result.status),
        )
        return apply_command_result(state, result)
    gate = timed_gate(
        state.turn.text,
        stub=stub,
        last_assistant=state.last_assistant,
        now=now,
        window=window,
        own_words=own_words,
    )
    if gate is not None:
        state.flag("timed_gate")
        command: MergeStub | CancelStub
        if gate == "confirm":
            name, command = "confirm_command", confirm_command(state, stub.id)
        else:
            name = "cancel_schedule_command"
            command = CancelStub(envelope=state.env, idempotency_key=state.next_key(), command_id=stub.id)
        result = await execute(state, commands, name, command)
        await record_call(
            state, sink, ToolCallOut(name=name, arguments={"command_id": stub.id}, result=result.status)
        )
        return apply_command_result(state, result)
    if asks_which(stub):
        return await answer_which(state, sink, stub, now, commands=commands, window=window)

    env = state.env
    patch = (
        fast_path_patch(
            stub,
            state.parsed,
            own_words=own_words,
            # The moment the commands service resolves the patch's symbols against.
            now=env.occurred_at,
            tz=env.tz,
        )
        if state.parsed is not None
        else None
    )
    if patch is None:
        return None
    merge = MergeStub(envelope=state.env, idempotency_key=state.next_key(), command_id=stub.id, patch=patch)
    result = await execute(state, commands, "merge_stub", merge)
    if result.status == "error":
        # A patch the resolver refuses is not guessed into a date: the model, which sees the
        # stub and the message, takes over instead.
        return None
    state.flag("fast_path")
    call = ToolCallOut(name="merge_stub", arguments=patch.model_dump(exclude_none=True), result=result.status)
    await record_call(state, sink, call)
    return apply_command_result(state, result)


async def answer_which(
    state: TurnState,
    sink: EventSink,
    stub: StubOut,
    now: datetime,
    *,
    commands: CommandsPort,
    window: timedelta,
) -> Finished | None:
    """Zero-model answers to a change asking which event it is about (contract §20): a reply that
    names one picks it (the change is prepared again for it, and still waits for the user's word);
    a bare confirmation, or a reply that names none or several, asks again; anything else is the
    model's to read."""
    if not speaks_for_user(promoted=state.turn.promoted, forwarded=state.turn.forwarded):
        return None
    text = state.turn.text
    if bare_answer(text) == "confirm":
        if not offer_open(stub, state.last_assistant, now=now, window=window):
            return None
        return which_again(state, stub)
    pick = choose(text, stub, state.parsed, state.env.tz)
    if pick is None:
        return None
    if pick == "ask_again":
        return which_again(state, stub)
    merge = MergeStub(
        envelope=state.env, idempotency_key=state.next_key(), command_id=stub.id, patch=SlotPatch(), pick=pick
    )
    result = await execute(state, commands, "merge_stub", merge)
    if result.status == "error":
        # The change is no longer what the reply answered (it ended, its event went): the model,
        # which sees the stub and the message, takes over.
        return None
    state.flag("fast_path")
    await record_call(
        state, sink, ToolCallOut(name="merge_stub", arguments={"pick": pick}, result=result.status)
    )
    return apply_command_result(state, result)


def which_again(state: TurnState, stub: StubOut) -> Finished:
    """The question asked again, with nothing written and no model called."""
    state.flag("fast_path")
    state.flag("held")
    state.stub_touched, state.stub_after = True, stub
    reply = receipts.command_receipt(CommandResult(status="held", stub=stub), state.view)
    return Finished("held", fixed_replies.which_again(state.lang) + reply, (stub,))


async def execute(
    state: TurnState, commands: CommandsPort, name: str, command: MergeStub | CancelStub | RevertChange
) -> CommandResult:
    """A command code issues on its own (no model call), timed like a tool of that name."""
    with state.timeline.segment(f"tool.{name}"):
        result = await commands.execute(command)
    add_db_segment(state, result.db_ms)
    return result
