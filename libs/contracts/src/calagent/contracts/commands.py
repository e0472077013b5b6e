"""Messages of the schedule-command service (the only writer of calendar state).

Every command carries the envelope (identity, zone, the moment the user spoke) and an
idempotency key; no field anywhere can name a user other than the envelope's.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import Field

from calagent.contracts.base import WireModel
from calagent.contracts.envelope import Envelope
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import PrepareOrCreateSchedule

StubStatus = Literal[
    "needs_date", "needs_time", "conflict", "held", "created", "cancelled", "expired", "superseded"
]
ACTIVE_STUB_STATUSES: frozenset[str] = frozenset({"needs_date", "needs_time", "conflict", "held"})
FINAL_STUB_STATUSES: frozenset[str] = frozenset({"created", "cancelled", "expired", "superseded"})
# The stubs whose receipt ends with a proposed action a bare "好"/"yes" can accept (contract §8).
OFFER_STUB_STATUSES: frozenset[str] = frozenset({"conflict", "held"})
HoldReason = Literal["past_start", "third_party_content"]


class EventOut(WireModel):
    id: str
    title: str
    start: datetime  # in the user's zone (offset included)
    end: datetime
    all_day: bool = False
    calendar: str
    completed: bool = False
    weekday: int = Field(ge=1, le=7, description="ISO weekday of `start` in `tz`")
    tz: str


class StubSlots(WireModel):
    date: str | None = None  # a date symbol or an ISO date once chosen
    time: str | None = None
    end_time: str | None = None
    duration_minutes: int | None = None
    all_day: bool | None = None
    calendar: str | None = None


class StubOut(WireModel):
    id: str
    status: StubStatus
    title: str
    slots: StubSlots
    candidates: tuple[date, ...] = ()
    conflicts_with: tuple[EventOut, ...] = ()
    hold_reason: HoldReason | None = None
    proposed_start: datetime | None = None
    proposed_end: datetime | None = None
    expires_at: datetime


class CalendarFallback(WireModel):
    requested: str
    used: str


class CommandError(WireModel):
    code: Literal[
        "invalid_symbol",
        "invalid_time",
        "invalid_range",
        "unknown_holiday",
        "invalid_zone",
        "no_active_command",
        "stub_expired",
        "invalid_arguments",
    ]
    message: str


# ---- commands (calagent.command.execute) --------------------------------------------------------


class PrepareOrCreate(WireModel):
    """The model's `prepare_or_create_schedule` call, plus what code knows around it."""

    kind: Literal["prepare_or_create"] = "prepare_or_create"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    args: PrepareOrCreateSchedule
    # The stub this message answers; `allow_conflict` only counts when this stub is in `conflict`.
    active_command_id: str | None = None
    # The short-reply parser's patch, applied over the model's slots (code beats the model here).
    patch: SlotPatch | None = None
    # Set by the agent from envelope facts (forwarded/quoted content): the write is held, not run.
    hold: HoldReason | None = None


class MergeStub(WireModel):
    """Code's own merge of a short reply into the active stub, with no model call."""

    kind: Literal["merge"] = "merge"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    command_id: str
    patch: SlotPatch
    # The user accepted the stub's offer: a `held` stub's hold is lifted, a `conflict` stub keeps its
    # proposed time. Set only by code (confirm_command, the timed gate), never from slot wording.
    confirm: bool = False


class CancelStub(WireModel):
    kind: Literal["cancel"] = "cancel"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    command_id: str | None = None


Command = Annotated[PrepareOrCreate | MergeStub | CancelStub, Field(discriminator="kind")]


class CommandRequest(WireModel):
    command: Command


class CommandResult(WireModel):
    status: Literal[
        "created", "needs_date", "needs_time", "conflict", "held", "cancelled", "expired", "error"
    ]
    # True only when this reply was sent after a commit that wrote the event row.
    persisted: bool = False
    event: EventOut | None = None
    stub: StubOut | None = None
    calendar_fallback: CalendarFallback | None = None
    error: CommandError | None = None
    # The stub this command ended as `superseded` because it was a new request, not an answer.
    superseded: StubOut | None = None
    replayed: bool = False  # the idempotency key was seen before: this is the first answer again
    db_ms: float = 0.0


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


class GetActiveStub(WireModel):
    kind: Literal["active_stub"] = "active_stub"
    envelope: Envelope


class ListCalendars(WireModel):
    kind: Literal["calendars"] = "calendars"
    envelope: Envelope


class ExportIcs(WireModel):
    kind: Literal["ics"] = "ics"
    envelope: Envelope


Query = Annotated[
    QueryRange | SuggestFree | GetActiveStub | ListCalendars | ExportIcs, Field(discriminator="kind")
]


class QueryRequest(WireModel):
    query: Query


class FreeSlot(WireModel):
    start: datetime
    end: datetime
    weekday: int


class QueryResult(WireModel):
    events: tuple[EventOut, ...] = ()
    range_start: datetime | None = None
    range_end: datetime | None = None
    stub: StubOut | None = None
    calendars: tuple[str, ...] = ()
    free_slots: tuple[FreeSlot, ...] = ()
    ics: str | None = None
    error: CommandError | None = None
    db_ms: float = 0.0
