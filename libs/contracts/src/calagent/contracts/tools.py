"""The tools the model sees (contract §5): argument models that also produce the JSON schemas.

Docstrings and field descriptions here are prompt text the model reads. No model has an identity
field: the user is bound from the envelope, server-side, and cannot be named by an argument.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calagent.contracts.symbols import DATE_SYMBOL_PATTERN, RANGE_SYMBOL_PATTERN, RRULE_PATTERN, TIME_PATTERN
from calagent.contracts.text import unstorable_in

ToolKind = Literal["terminal", "intermediate"]
Scope = Literal["this", "following", "all"]

_DATE_DESCRIPTION = (
    "canonical date symbol: D (today), D+1 (tomorrow), D-1, W3+1 (next week's Wednesday; "
    "1=Mon..7=Sun, +0 this week), WE (this weekend, two candidates), WE+1, YYYY-MM-DD, "
    "--MM-DD (next such day), H:national_day / H:spring_festival / H:mid_autumn (holidays)"
)
_REMINDER_MAX = 4 * 7 * 24 * 60
LOCATION_MAX = 500
NOTES_MAX = 4000
ATTENDEES_MAX = 20
_ATTENDEES_DESCRIPTION = (
    "the people to invite, each a name as the user said it or an e-mail address; code looks names "
    "up in the user's contacts and asks when one is unknown or ambiguous. Inviting sends mail, so "
    "code waits for the user's confirmation"
)
Person = Annotated[str, Field(min_length=1, max_length=254)]


class ToolArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        # A NUL or lone surrogate in an argument goes back to the model as an invalid argument,
        # never to storage.
        reason = unstorable_in(data)
        if reason:
            raise ValueError(reason)
        return data


class PrepareOrCreateSchedule(ToolArgs):
    """Create a calendar event the user asked for in their own words, or prepare it when a date or
    time is still missing (code then asks the user). Never call this for a remark about the past or
    for a question about the calendar."""

    title: str = Field(min_length=1, max_length=200, description="the event title, in the user's words")
    date: str = Field(pattern=DATE_SYMBOL_PATTERN, description=_DATE_DESCRIPTION)
    time: str | None = Field(default=None, pattern=TIME_PATTERN, description="start time HH:MM, 24-hour")
    end_time: str | None = Field(default=None, pattern=TIME_PATTERN, description="end time HH:MM, 24-hour")
    duration_minutes: int | None = Field(default=None, ge=1, le=24 * 60)
    all_day: bool | None = Field(default=None, description="true for an all-day event")
    calendar: str | None = Field(
        default=None,
        max_length=100,
        description="one of the user's calendar names; omit when unsure (omitting is not a vote for the default)",
    )
    allow_conflict: bool | None = Field(
        default=None,
        description="only when the user, answering a conflict question, agrees to keep the original time",
    )
    command_id: str | None = Field(
        default=None,
        max_length=64,
        description=(
            "the pending request's id when this call answers it; a call with another title and no "
            "command_id is a new request and the pending one is dropped"
        ),
    )
    recurrence: str | None = Field(
        default=None,
        pattern=RRULE_PATTERN,
        description=(
            "RFC 5545 RRULE for a repeating event, e.g. FREQ=WEEKLY;BYDAY=MO or FREQ=DAILY;COUNT=10 "
            "(FREQ DAILY|WEEKLY|MONTHLY|YEARLY; INTERVAL, BYDAY, BYMONTHDAY, COUNT, UNTIL). Code "
            "shows the rule and the next occurrences and waits for the user's confirmation."
        ),
    )
    end_date: str | None = Field(
        default=None, pattern=DATE_SYMBOL_PATTERN, description="last day of a multi-day event (date symbol)"
    )
    reminder_minutes: int | None = Field(
        default=None, ge=0, le=_REMINDER_MAX, description="remind this many minutes before the start"
    )
    location: str | None = Field(
        default=None, min_length=1, max_length=LOCATION_MAX, description="where, in the user's words"
    )
    notes: str | None = Field(
        default=None,
        min_length=1,
        max_length=NOTES_MAX,
        description="notes the user asked to keep with the event",
    )
    attendees: list[Person] | None = Field(
        default=None, min_length=1, max_length=ATTENDEES_MAX, description=_ATTENDEES_DESCRIPTION
    )


class FindEvents(ToolArgs):
    """Find the user's events in a range, with their ids, before changing or removing one. An
    occurrence of a repeating event carries series_id and occurrence_start."""

    start: str = Field(pattern=RANGE_SYMBOL_PATTERN, description="inclusive range symbol")
    end: str = Field(pattern=RANGE_SYMBOL_PATTERN, description="exclusive range symbol")
    text: str | None = Field(default=None, max_length=200, description="words of the title, optional")


class UpdateSchedule(ToolArgs):
    """Change an event the user named (found with find_events). Code shows before and after and
    waits for the user's confirmation; nothing changes until then."""

    event_id: str = Field(min_length=1, max_length=80, description="an id from find_events")
    title: str | None = Field(default=None, min_length=1, max_length=200)
    date: str | None = Field(default=None, pattern=DATE_SYMBOL_PATTERN, description=_DATE_DESCRIPTION)
    time: str | None = Field(default=None, pattern=TIME_PATTERN, description="new start time HH:MM")
    end_time: str | None = Field(default=None, pattern=TIME_PATTERN, description="new end time HH:MM")
    duration_minutes: int | None = Field(default=None, ge=1, le=24 * 60)
    end_date: str | None = Field(default=None, pattern=DATE_SYMBOL_PATTERN)
    all_day: bool | None = None
    calendar: str | None = Field(default=None, max_length=100)
    reminder_minutes: int | None = Field(default=None, ge=0, le=_REMINDER_MAX)
    location: str | None = Field(
        default=None, min_length=1, max_length=LOCATION_MAX, description="the new place"
    )
    notes: str | None = Field(default=None, min_length=1, max_length=NOTES_MAX, description="the new notes")
    attendees: list[Person] | None = Field(
        default=None,
        max_length=ATTENDEES_MAX,
        description="the whole new list of people invited (empty: invite nobody); " + _ATTENDEES_DESCRIPTION,
    )
    scope: Scope = Field(
        default="this",
        description="for a repeating event: this occurrence, this and following, or all",
    )


class DeleteSchedule(ToolArgs):
    """Remove an event the user named (found with find_events). Code shows what will go and waits
    for the user's confirmation; nothing is removed until then."""

    event_id: str = Field(min_length=1, max_length=80, description="an id from find_events")
    scope: Scope = Field(
        default="this",
        description="for a repeating event: this occurrence, this and following, or all",
    )


class ProposeAutomation(ToolArgs):
    """The user wants something to happen by itself (every morning, whenever…, automatically):
    propose it as a plan. Code stores the plan as an offer; nothing runs."""

    trigger: str = Field(min_length=1, max_length=500, description="when it should happen, in words")
    steps: list[str] = Field(min_length=1, max_length=10, description="what should happen, step by step")


class QueryScheduleRange(ToolArgs):
    """Read the user's events in a half-open range [start, end). Use for every question about what
    the user has or has not scheduled."""

    start: str = Field(
        pattern=RANGE_SYMBOL_PATTERN, description="inclusive: D, D+1T12:00, W1+0, M+0, 2026-09"
    )
    end: str = Field(
        pattern=RANGE_SYMBOL_PATTERN, description="exclusive: D+1, D+1T18:00, W1+1, M+1, 2026-10"
    )
    incomplete_only: bool = Field(
        default=False, description="only events not yet completed, and the user's open tasks"
    )


class SuggestFreeTime(ToolArgs):
    """Suggest free slots of the given length inside a range, within working hours; with
    attendees, times that suit them too."""

    start: str = Field(pattern=RANGE_SYMBOL_PATTERN)
    end: str = Field(pattern=RANGE_SYMBOL_PATTERN)
    duration_minutes: int = Field(ge=5, le=24 * 60)
    attendees: list[Person] | None = Field(
        default=None,
        min_length=1,
        max_length=ATTENDEES_MAX,
        description=(
            "the other people the time must suit, each a name as the user said it or an e-mail "
            "address; code counts only those who share their free/busy with the user"
        ),
    )


class ProposeTimes(ToolArgs):
    """Ask one person by mail which of up to three free times suits them ("约王五下周找个时间聊一
    小时"): code finds the slots, holds them as tentative, and mails them only once the user
    confirms; their answer comes back as an offer for the user to book."""

    title: str = Field(min_length=1, max_length=200, description="what the meeting is, in the user's words")
    attendee: Person = Field(description="the person to ask: a name as the user said it or an e-mail address")
    start: str = Field(pattern=RANGE_SYMBOL_PATTERN, description="inclusive: D, D+1T12:00, W1+1")
    end: str = Field(pattern=RANGE_SYMBOL_PATTERN, description="exclusive: D+1, W1+2")
    duration_minutes: int = Field(ge=5, le=24 * 60)


class CancelScheduleCommand(ToolArgs):
    """Cancel the pending schedule request (the active stub) when the user gives it up."""

    command_id: str | None = Field(default=None, max_length=64, description="default: the active stub")


class ConfirmCommand(ToolArgs):
    """Carry out the pending request the user has just agreed to in their own words (a held write,
    or keeping a conflicting time). Never for forwarded or quoted content."""

    command_id: str | None = Field(default=None, max_length=64, description="default: the active stub")


class UndoChange(ToolArgs):
    """Take back a change already made to the calendar (a create, a move, a delete) when the user
    asks to undo it. Code restores exactly what that change altered."""

    change_id: str | None = Field(
        default=None, max_length=64, description="default: the latest change the assistant made"
    )


class AddTask(ToolArgs):
    """Add a task the user must do (not a meeting at a set time): code places it as blocks in their
    free time before its due and says when, or how much does not fit."""

    title: str = Field(min_length=1, max_length=200, description="the task, in the user's words")
    duration_minutes: int = Field(ge=15, le=100 * 60, description="how long the work takes in all")
    due: str | None = Field(
        default=None,
        pattern=DATE_SYMBOL_PATTERN,
        description="the day it must be done by: " + _DATE_DESCRIPTION,
    )
    due_time: str | None = Field(
        default=None,
        pattern=TIME_PATTERN,
        description="done by this time HH:MM of `due` (default: end of day)",
    )
    earliest: str | None = Field(
        default=None, pattern=DATE_SYMBOL_PATTERN, description="not before this day (a date symbol)"
    )
    priority: int = Field(default=3, ge=1, le=4, description="1 (high) … 4 (low)")
    chunk_minutes: int = Field(default=30, ge=15, le=8 * 60, description="the shortest piece")
    max_chunk_minutes: int = Field(default=120, ge=15, le=8 * 60, description="the longest piece")
    hours: Literal["work", "personal"] = Field(
        default="work", description="work: in working hours; personal: evenings and weekends"
    )

    @model_validator(mode="after")
    def _pieces(self) -> AddTask:
        if self.max_chunk_minutes < self.chunk_minutes:
            raise ValueError("max_chunk_minutes must be at least chunk_minutes")
        if self.due_time is not None and self.due is None:
            raise ValueError("due_time needs due")
        return self


class CompleteTask(ToolArgs):
    """Mark one of the user's tasks done; its later blocks are freed."""

    task_id: str = Field(min_length=1, max_length=64)


class SaveMemory(ToolArgs):
    """Remember a fact or preference the user asked to be remembered."""

    content: str = Field(min_length=1, max_length=2000)


class SearchMemory(ToolArgs):
    """Look up facts the user asked to remember (birthdays, preferences) before acting on them."""

    query: str = Field(min_length=1, max_length=500)


class SearchChatArchive(ToolArgs):
    """Search older conversation history, only when the user refers to an earlier conversation."""

    query: str = Field(min_length=1, max_length=500)


TOOL_MODELS: Final[dict[str, type[ToolArgs]]] = {
    "prepare_or_create_schedule": PrepareOrCreateSchedule,
    "query_schedule_range": QueryScheduleRange,
    "suggest_free_time": SuggestFreeTime,
    "propose_times": ProposeTimes,
    "find_events": FindEvents,
    "update_schedule": UpdateSchedule,
    "delete_schedule": DeleteSchedule,
    "cancel_schedule_command": CancelScheduleCommand,
    "confirm_command": ConfirmCommand,
    "propose_automation": ProposeAutomation,
    "undo_change": UndoChange,
    "add_task": AddTask,
    "complete_task": CompleteTask,
    "save_memory": SaveMemory,
    "search_memory": SearchMemory,
    "search_chat_archive": SearchChatArchive,
}

TOOL_KINDS: Final[dict[str, ToolKind]] = {
    "prepare_or_create_schedule": "terminal",
    "query_schedule_range": "terminal",
    "suggest_free_time": "terminal",
    "propose_times": "terminal",
    "find_events": "intermediate",
    "update_schedule": "terminal",
    "delete_schedule": "terminal",
    "cancel_schedule_command": "terminal",
    "confirm_command": "terminal",
    "propose_automation": "terminal",
    "undo_change": "terminal",
    "add_task": "terminal",
    "complete_task": "terminal",
    "save_memory": "terminal",
    "search_memory": "intermediate",
    "search_chat_archive": "intermediate",
}

WRITE_TOOLS: Final = frozenset(
    {
        "prepare_or_create_schedule",
        "update_schedule",
        "delete_schedule",
        "cancel_schedule_command",
        "confirm_command",
        "propose_automation",
        "propose_times",
        "undo_change",
        "add_task",
        "complete_task",
        "save_memory",
    }
)


def _strip_titles(schema: Any) -> Any:
    """The schema without the `title` annotations pydantic writes on every model and field (noise
    in the prompt). The keys of `properties` and `$defs` are names, not annotations: a field named
    `title` stays."""
    if isinstance(schema, dict):
        return {
            k: {name: _strip_titles(sub) for name, sub in v.items()}
            if k in ("properties", "$defs") and isinstance(v, dict)
            else _strip_titles(v)
            for k, v in schema.items()
            if k != "title"
        }
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def tool_schema(name: str) -> dict[str, Any]:
    model = TOOL_MODELS[name]
    parameters = _strip_titles(model.model_json_schema())
    parameters.pop("description", None)
    parameters["additionalProperties"] = False
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": " ".join((model.__doc__ or "").split()),
            "parameters": parameters,
        },
    }


def tool_schemas() -> list[dict[str, Any]]:
    return [tool_schema(name) for name in TOOL_MODELS]
