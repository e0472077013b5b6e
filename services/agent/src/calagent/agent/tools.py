"""The tool table: one handler per argument model of `libs/contracts` (contract §5, §8).

A handler runs one validated call and says what happened: the label recorded for the call, the
content the model sees if the conversation goes on, and — for a terminal tool that produced a
result for the user — the outcome and the code-written receipt.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from calagent.agent.domain import fixed_replies, reads, receipts, words
from calagent.agent.domain.choosing import Found, candidates_for
from calagent.agent.domain.pending import consent_to, speaks_for_user, write_hold
from calagent.agent.ports import AgentCommand, AgentQuery, CommandsPort, StorePort
from calagent.agent.results import (
    TERMINAL_ERRORS,
    ToolResult,
    answered,
    apply_command_result,
    result_label,
    tool_error,
)
from calagent.agent.state import Finished, TurnState
from calagent.contracts.commands import (
    AddTaskCommand,
    CancelStub,
    ChangeAction,
    CommandError,
    CommandResult,
    CompleteTaskCommand,
    MergeStub,
    PrepareChange,
    PrepareOrCreate,
    ProposePlan,
    ProposeTimesCommand,
    RevertChange,
)
from calagent.contracts.queries import FindEventsQuery, QueryRange, QueryResult, SuggestFree
from calagent.contracts.suggestions import SuggestedSlot
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import (
    TOOL_MODELS,
    AddTask,
    CancelScheduleCommand,
    CompleteTask,
    ConfirmCommand,
    DeleteSchedule,
    FindEvents,
    PrepareOrCreateSchedule,
    ProposeAutomation,
    ProposeTimes,
    QueryScheduleRange,
    SaveMemory,
    Scope,
    SearchChatArchive,
    SearchMemory,
    SuggestFreeTime,
    ToolArgs,
    UndoChange,
    UpdateSchedule,
)
from calagent.contracts.turns import event_view
from calagent.runtime.clock import Clock

Handler = Callable[[TurnState, Any], Awaitable[ToolResult]]
TOOL_NAMES: dict[type[ToolArgs], str] = {model: name for name, model in TOOL_MODELS.items()}


class Tools:
    def __init__(self, commands: CommandsPort, store: StorePort, clock: Clock) -> None:
        self.commands = commands
        self.store = store
        self.clock = clock
        self.table: dict[type[ToolArgs], Handler] = {
            PrepareOrCreateSchedule: self.prepare_or_create,
            QueryScheduleRange: self.query_range,
            SuggestFreeTime: self.suggest_free_time,
            FindEvents: self.find_events,
            UpdateSchedule: self.update,
            DeleteSchedule: self.delete,
            CancelScheduleCommand: self.cancel,
            ConfirmCommand: self.confirm,
            ProposeAutomation: self.propose_automation,
            ProposeTimes: self.propose_times,
            UndoChange: self.undo,
            AddTask: self.add_task,
            CompleteTask: self.complete_task,
            SaveMemory: self.save_memory,
            SearchMemory: self.search_memory,
            SearchChatArchive: self.search_archive,
        }

    async def run(self, state: TurnState, args: ToolArgs) -> ToolResult:
        """Run a call as its tool's whose-words policy says (`words.TOOL_POLICY`, contract §19):
        the one place where someone else's words reaching the model changes what a tool does."""
        name = TOOL_NAMES[type(args)]
        reaction = words.TOOL_POLICY[name] if state.foreign else "read"
        source = state.foreign_source
        if reaction == "refuse":
            # Consent is the user's own words (contract §8): never what follows someone else's.
            reply = fixed_replies.confirmation_not_own_words(source or "", state.lang)
            return ToolResult("refused:third_party", finished=Finished("answered", reply))
        if reaction == "hold_here":
            state.flag("held")
            stub = state.current_stub
            reply = fixed_replies.held_not_own_words(name, source or "", stub, state.lang)
            quotes = (stub,) if stub is not None else ()
            return ToolResult("held:third_party", finished=Finished("held", reply, quotes), goes_on=True)
        result = await self.table[type(args)](state, args)
        if (
            reaction == "hold_at_commands"
            and result.finished is not None
            and result.finished.outcome == "held"
        ):
            # Held at commands (`execute` sent it so): the offer names where its words came from.
            if state.stub_touched and state.stub_after is not None:
                state.held_for_others.append(state.stub_after.id)
            finished = result.finished
            named = f"{finished.reply}{fixed_replies.held_after(source or '', state.lang)}"
            return replace(result, finished=replace(finished, reply=named), goes_on=True)
        return result

    async def execute(self, state: TurnState, command: AgentCommand) -> ToolResult:
        if state.foreign and "hold" in type(command).model_fields:
            # Every write commands can hold is held when someone else's words reached the model
            # (`Tools.run`'s `hold_at_commands`): no handler passes it, so none can forget it.
            command = command.model_copy(update={"hold": write_hold(True)})
        result = await answered(state, self.commands.execute(command), "command_failed")
        if isinstance(result, ToolResult):
            return result
        if result.status == "error" and result.error is not None and result.error.code not in TERMINAL_ERRORS:
            # Bad symbols are never guessed into correctness: the model gets the error and retries.
            return tool_error(result.error.code, result.error.message)
        return ToolResult(result_label(result), finished=apply_command_result(state, result))

    # ---- writes --------------------------------------------------------------------------------

    async def prepare_or_create(self, state: TurnState, args: PrepareOrCreateSchedule) -> ToolResult:
        # The stub the turn saw; commands decides from facts (title, id) whether the call continues
        # it or supersedes it, and never executes a held stub as a side effect of a create.
        return await self.execute(
            state,
            PrepareOrCreate(
                envelope=state.env,
                idempotency_key=state.next_key(),
                args=args,
                active_command_id=state.stub.id if state.stub is not None else None,
                source=state.source,
                # Commands holds a one-off these words asked to repeat (contract §9).
                words=state.turn.text,
            ),
        )

    async def update(self, state: TurnState, args: UpdateSchedule) -> ToolResult:
        return await self._change(state, "update", args.event_id, args.scope, args)

    async def delete(self, state: TurnState, args: DeleteSchedule) -> ToolResult:
        return await self._change(state, "delete", args.event_id, args.scope, None)

    async def _change(
        self,
        state: TurnState,
        action: ChangeAction,
        event_id: str,
        scope: Scope,
        update: UpdateSchedule | None,
    ) -> ToolResult:
        # Held, never run now: the user sees before and after and confirms (contract §9); chosen
        # from several found for the same words, it asks which first (§20).
        return await self.execute(
            state,
            PrepareChange(
                envelope=state.env,
                idempotency_key=state.next_key(),
                action=action,
                event_id=event_id,
                update=update,
                scope=scope,
                # The client's own call names the event the user chose on the page.
                candidates=(event_id,)
                if state.turn.direct is not None
                else candidates_for(event_id, state.found),
            ),
        )

    async def propose_automation(self, state: TurnState, args: ProposeAutomation) -> ToolResult:
        return await self.execute(
            state,
            ProposePlan(
                envelope=state.env,
                idempotency_key=state.next_key(),
                trigger=args.trigger,
                steps=tuple(args.steps),
            ),
        )

    async def propose_times(self, state: TurnState, args: ProposeTimes) -> ToolResult:
        # A proposal mails someone once confirmed: held like any write, and held as someone
        # else's when their words reached the model in this turn (contract §19).
        return await self.execute(
            state,
            ProposeTimesCommand(
                envelope=state.env,
                idempotency_key=state.next_key(),
                args=args,
            ),
        )

    async def confirm(self, state: TurnState, args: ConfirmCommand) -> ToolResult:
        stub = state.current_stub
        if state.turn.direct is not None:
            # The client's own call (a button on the page, the API) is the user's consent itself.
            command_id = args.command_id or (stub.id if stub is not None else "")
            return await self.execute(state, confirm_command(state, command_id))
        if stub is None:
            # Nothing the user was shown is pending: never "the active one", whatever it is now.
            error = CommandError(code="no_active_command", message="no active schedule command")
            return ToolResult(
                "error:no_active_command",
                finished=apply_command_result(state, CommandResult(status="error", error=error)),
            )
        own_words = speaks_for_user(promoted=state.turn.promoted, forwarded=state.turn.forwarded)
        consent = consent_to(state.turn.text, stub, own_words=own_words)
        if args.command_id not in (None, stub.id) or not state.shown(stub.id) or consent is None:
            # Consent is bound to its offer (contract §19): the one the user was last shown, and
            # the user's own words consenting to its kind. Nothing is written; it is shown again.
            state.flag("held")
            state.stub_touched, state.stub_after = True, stub
            reply = receipts.command_receipt(CommandResult(status=stub.status, stub=stub), state.view)
            return ToolResult(
                "refused:not_consent",
                finished=Finished("held", fixed_replies.not_consent(state.lang) + reply, (stub,)),
            )
        command = confirm_command(state, stub.id)
        if consent != "confirm":
            command = command.model_copy(update={"partstat": consent})
        return await self.execute(state, command)

    async def add_task(self, state: TurnState, args: AddTask) -> ToolResult:
        return await self.execute(
            state, AddTaskCommand(envelope=state.env, idempotency_key=state.next_key(), args=args)
        )

    async def complete_task(self, state: TurnState, args: CompleteTask) -> ToolResult:
        return await self.execute(
            state,
            CompleteTaskCommand(envelope=state.env, idempotency_key=state.next_key(), task_id=args.task_id),
        )

    async def undo(self, state: TurnState, args: UndoChange) -> ToolResult:
        return await self.execute(state, undo_command(state, change_id=args.change_id))

    async def cancel(self, state: TurnState, args: CancelScheduleCommand) -> ToolResult:
        return await self.execute(
            state,
            CancelStub(envelope=state.env, idempotency_key=state.next_key(), command_id=args.command_id),
        )

    async def save_memory(self, state: TurnState, args: SaveMemory) -> ToolResult:
        env = state.env
        with state.timeline.segment("db.save_memory"):
            await self.store.save_memory(env.user_id, args.content, state.next_key(), self.clock.now())
        return ToolResult(
            "saved",
            finished=Finished("memory_saved", fixed_replies.memory_saved_receipt(args.content, state.lang)),
        )

    # ---- reads ---------------------------------------------------------------------------------

    async def read(self, state: TurnState, query: AgentQuery) -> QueryResult | ToolResult:
        """Run a read; a refused range goes back to the model as a tool error. Only a read that
        really ran counts as one for the exit check."""
        result = await answered(state, self.commands.query(query), "query_failed")
        if isinstance(result, ToolResult):
            return result
        if result.error is not None:
            return tool_error(result.error.code, result.error.message)
        state.read_ran = True
        return result

    async def query_range(self, state: TurnState, args: QueryScheduleRange) -> ToolResult:
        result = await self.read(
            state,
            QueryRange(
                envelope=state.env,
                start_symbol=args.start,
                end_symbol=args.end,
                incomplete_only=args.incomplete_only,
            ),
        )
        if isinstance(result, ToolResult):
            return result
        state.events.extend(event_view(e) for e in result.events)
        with state.timeline.segment("receipt"):
            reply = reads.query_receipt(result, state.view)
            return ToolResult("queried", finished=Finished("queried", reply, result.events))

    async def suggest_free_time(self, state: TurnState, args: SuggestFreeTime) -> ToolResult:
        result = await self.read(
            state,
            SuggestFree(
                envelope=state.env,
                start_symbol=args.start,
                end_symbol=args.end,
                duration_minutes=args.duration_minutes,
                attendees=tuple(args.attendees or ()),
            ),
        )
        if isinstance(result, ToolResult):
            return result
        # The answer's slots are the query's, less the weekday that is only for the words.
        state.slots = [
            SuggestedSlot.model_validate(s.model_dump(exclude={"weekday"})) for s in result.free_slots
        ]
        state.empty_reason = result.empty_reason
        with state.timeline.segment("receipt"):
            reply = reads.free_time_receipt(
                result.free_slots,
                args.duration_minutes,
                state.view,
                people=result.people,
                empty_reason=result.empty_reason,
            )
        return ToolResult("suggested", finished=Finished("suggested", reply))

    async def find_events(self, state: TurnState, args: FindEvents) -> ToolResult:
        result = await self.read(
            state,
            FindEventsQuery(envelope=state.env, start_symbol=args.start, end_symbol=args.end, text=args.text),
        )
        if isinstance(result, ToolResult):
            return result
        state.found.append(Found(args.text, result.events))
        if state.third_party_seen is None:
            state.third_party_seen = words.source_of(result.events)
        found = [
            words.marked_event(
                {
                    "id": e.id,
                    "title": e.title,
                    "start": e.start.isoformat(),
                    "end": e.end.isoformat(),
                    "when": state.view.for_model().span(e.start, e.end, e.all_day),
                    "all_day": e.all_day,
                    "calendar": e.calendar,
                    **({"series_id": e.series_id} if e.series_id else {}),
                    **({"occurrence_start": e.occurrence_start.isoformat()} if e.occurrence_start else {}),
                    **({"recurrence": e.recurrence} if e.recurrence else {}),
                    **{k: v for k in ("location", "notes", "url") if (v := getattr(e, k))},
                },
                words.event_source(e),
                foreign_calendar=e.foreign_calendar,
            )
            for e in result.events
        ]
        return ToolResult(f"found:{len(found)}", json.dumps({"events": found}, ensure_ascii=False))

    async def search_memory(self, state: TurnState, args: SearchMemory) -> ToolResult:
        with state.timeline.segment("db.search_memory"):
            found = await self.store.search_memory(state.env.user_id, args.query)
        return ToolResult(f"found:{len(found)}", json.dumps({"memories": found}, ensure_ascii=False))

    async def search_archive(self, state: TurnState, args: SearchChatArchive) -> ToolResult:
        with state.timeline.segment("db.search_chat_archive"):
            found = await self.store.search_archive(state.env.user_id, args.query, state.env.turn_id)
        return ToolResult(f"found:{len(found)}", json.dumps({"messages": found}, ensure_ascii=False))


def confirm_command(state: TurnState, command_id: str) -> MergeStub:
    """The one way a pending offer is accepted: by the model's confirm_command or the timed gate."""
    return MergeStub(
        envelope=state.env,
        idempotency_key=state.next_key(),
        command_id=command_id,
        patch=SlotPatch(),
        confirm=True,
        source=state.source,
    )


def undo_command(
    state: TurnState, *, change_id: str | None = None, turn_id: str | None = None
) -> RevertChange:
    """The one way a change is taken back: the model's (or the client's) undo_change, or a bare
    "撤销" right after the receipt of the turn that made it."""
    return RevertChange(
        envelope=state.env,
        idempotency_key=state.next_key(),
        change_id=change_id,
        turn_id=turn_id,
        source=state.source,
    )
