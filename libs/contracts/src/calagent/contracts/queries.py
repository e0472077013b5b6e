"""Queries of the schedule-command service (`calagent.command.query`): what a client or the agent
reads, and the one answer they all get."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, model_validator

from calagent.contracts.base import WireModel
from calagent.contracts.commands import (
    CommandError,
    EventOut,
    LoggedChangeOut,
    PlanOut,
    StubOut,
)
from calagent.contracts.envelope import Envelope
from calagent.contracts.suggestions import EmptyReason, FreeSlot, SuggestionPeople
from calagent.contracts.tasks import BlockMove, ListTasks, SaveTask, TaskOut
from calagent.contracts.time import ParsedReply

# ---- queries (calagent.command.query) -----------------------------------------------------------


class QueryRange(WireModel):
    kind: Literal["range"] = "range"
    envelope: Envelope
    start_symbol: str | None = None
    end_symbol: str | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    incomplete_only: bool = False


class SuggestFree(WireModel):
    kind: Literal["suggest_free"] = "suggest_free"
    envelope: Envelope
    start_symbol: str
    end_symbol: str
    duration_minutes: int = Field(ge=5, le=24 * 60)
    max_suggestions: int = Field(default=3, ge=1, le=10)
    # The people the time must suit, as the model named them (contract §16).
    attendees: tuple[Annotated[str, Field(min_length=1, max_length=254)], ...] = Field(
        default=(), max_length=20
    )


class GetActiveStub(WireModel):
    kind: Literal["active_stub"] = "active_stub"
    envelope: Envelope


class ListCalendars(WireModel):
    kind: Literal["calendars"] = "calendars"
    envelope: Envelope


class TurnContext(WireModel):
    """What a turn needs to know before the model is asked, in one request: the active stub (with
    the events it conflicts with), the user's calendars and, when there is an active stub and
    `text` is given, the time service's reading of `text` (`QueryResult.parsed`)."""

    kind: Literal["context"] = "context"
    envelope: Envelope
    # The user's words, read only as an answer to an active stub (a reply merged with no model).
    text: str | None = Field(default=None, max_length=4000)
    # The offer the message answers, by the id its card sent (`active_command_id`): that stub in
    # place of the active one while it waits for an answer — an offer waiting beside the
    # conversation too (contract §19).
    command_id: str | None = Field(default=None, max_length=64)


class ExportIcs(WireModel):
    kind: Literal["ics"] = "ics"
    envelope: Envelope


class FindEventsQuery(WireModel):
    """The model's `find_events`: events and series occurrences in a range, optionally by title words."""

    kind: Literal["find"] = "find"
    envelope: Envelope
    start_symbol: str
    end_symbol: str
    text: str | None = Field(default=None, max_length=200)


class RotateFeed(WireModel):
    """Create the caller's private feed secret, or replace it (the old address stops working)."""

    kind: Literal["rotate_feed"] = "rotate_feed"
    envelope: Envelope


class FeedCalendar(WireModel):
    """The feed behind a secret: the secret is the only identity (calendar apps send no token)."""

    kind: Literal["feed"] = "feed"
    secret: str = Field(min_length=16, max_length=128)


class ListPlans(WireModel):
    kind: Literal["plans"] = "plans"
    envelope: Envelope


class DeletePlan(WireModel):
    kind: Literal["delete_plan"] = "delete_plan"
    envelope: Envelope
    plan_id: str = Field(min_length=1, max_length=64)


class ListChanges(WireModel):
    """The caller's change log, newest first (`GET /v1/changes`); `before`: a change id, for the
    page after it."""

    kind: Literal["changes"] = "changes"
    envelope: Envelope
    limit: int = Field(default=50, ge=1, le=200)
    before: str | None = Field(default=None, max_length=64)


class ListWaiting(WireModel):
    """The offers from outside that wait beside the conversation (contract §19): an invitation
    or a sync conflict being offered now, and invitations set aside until the user's own request
    is settled."""

    kind: Literal["waiting"] = "waiting"
    envelope: Envelope


AnyQuery = (
    ListChanges
    | ListWaiting
    | TurnContext
    | QueryRange
    | SuggestFree
    | GetActiveStub
    | ListCalendars
    | ExportIcs
    | FindEventsQuery
    | RotateFeed
    | FeedCalendar
    | ListPlans
    | DeletePlan
    | ListTasks
    | SaveTask
)
Query = Annotated[AnyQuery, Field(discriminator="kind")]


class QueryRequest(WireModel):
    query: Query


class SyncNotice(WireModel):
    """A delivery to the connected calendar that did not go through as written, told once in the
    next receipt: refused by the server, or kept in the server's version (both sides changed it).
    It names an event (`event`) or a task (`task`, contract §21), as stored now: exactly one."""

    outcome: Literal["rejected", "conflict"]
    event: EventOut | None = None
    task: TaskOut | None = None

    @model_validator(mode="after")
    def _names_one(self) -> SyncNotice:
        if (self.event is None) == (self.task is None):
            raise ValueError("a sync notice names exactly one of event and task")
        return self


class QueryResult(WireModel):
    events: tuple[EventOut, ...] = ()
    range_start: datetime | None = None
    range_end: datetime | None = None
    stub: StubOut | None = None
    calendars: tuple[str, ...] = ()
    # With the turn's context: those of `calendars` a connected account named (its display names
    # are someone else's words, contract §19: the model is not shown them).
    connected_calendars: tuple[str, ...] = ()
    free_slots: tuple[FreeSlot, ...] = ()
    ics: str | None = None
    feed_secret: str | None = None
    plans: tuple[PlanOut, ...] = ()
    deleted: bool = False
    # With the turn's context: CalDAV deliveries since the last turn that need saying.
    sync_notices: tuple[SyncNotice, ...] = ()
    # With the turn's context, when a stub is active: the time service's reading of the words.
    parsed: ParsedReply | None = None
    changes: tuple[LoggedChangeOut, ...] = ()
    # `ListWaiting`: the offers from outside, oldest first.
    waiting: tuple[StubOut, ...] = ()
    # A suggestion: with attendees, who counted; with no slot, why (contract §20).
    people: SuggestionPeople | None = None
    empty_reason: EmptyReason | None = None
    # `ListTasks` and `SaveTask` (contract §21): the caller's tasks; a save's task is the first.
    tasks: tuple[TaskOut, ...] = ()
    # `SaveTask`: other tasks' blocks its placing moved (as `CommandResult.moved_blocks`).
    moved_blocks: tuple[BlockMove, ...] = ()
    error: CommandError | None = None
    db_ms: float = 0.0
