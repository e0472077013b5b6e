"""Messages of one chat turn: the request the gateway publishes, the progress events and answer
the agent streams back, and the record the eval recorder keeps."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from calagent.contracts.base import WireModel
from calagent.contracts.commands import CommandOutcome, EventFields, EventOut, StubFields, StubOut
from calagent.contracts.envelope import Envelope
from calagent.contracts.suggestions import EmptyReason, SuggestedSlot

MAX_MESSAGE_CHARS = 4000
_TURN_KEY_NAMESPACE = uuid.UUID("5f0c1e0e-8a7b-4f0e-9c55-0f8f3a6c2d11")


def turn_key(user_id: str, client_message_id: str | None) -> str:
    """The one key of a turn, derived once by the gateway: the turn's id, its JetStream message
    id, the agent's claim, the prefix of its writes' idempotency keys in commands and the answer
    cache's key. A message without a `client_message_id` gets a fresh key; a keyed one always the
    same, so every retry names the same turn and no layer needs the raw client key again."""
    if client_message_id is None:
        return uuid.uuid4().hex
    # Length-prefixed, so no (user, key) pair can spell another's: "eve:x"+"y" ≠ "eve"+"x:y".
    return uuid.uuid5(_TURN_KEY_NAMESPACE, f"{len(user_id)}:{user_id}{client_message_id}").hex


# A turn's outcome: what its command answered (the stub statuses, declared once in `commands`), or
# what a turn without a write ended as.
Outcome = Literal[
    CommandOutcome,
    "queried",
    "suggested",
    "memory_saved",
    "answered",
    "claim_replaced",
    "model_unavailable",
    "rejected",
]

Flag = Literal[
    "unverified_create_claim",
    "unverified_read_claim",
    "held",
    "model_unavailable",
    "tool_error",
    "write_refused",
    "fast_path",
    "timed_gate",
    "stub_superseded",
    "read_only_write_attempt",
    # Provider faults and tool-call repairs (contract §17).
    "model_retried",
    "model_fallback",
    "circuit_open",
    "repaired",
]


DirectTool = Literal[
    "prepare_or_create_schedule",
    "update_schedule",
    "delete_schedule",
    "cancel_schedule_command",
    "confirm_command",
    "undo_change",
]


class DirectCall(WireModel):
    """A tool call the client makes itself (`POST /v1/commands`, a button on the page): the agent
    runs it exactly as it runs the model's call of that tool, and calls no model."""

    tool: DirectTool
    arguments: dict[str, Any] = Field(default_factory=dict)


class TurnRequested(WireModel):
    """Published by the gateway to JetStream; `text` is the user's own words, transport stripped."""

    envelope: Envelope
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    raw_text: str = Field(max_length=4 * MAX_MESSAGE_CHARS)
    # Lines quoted from an earlier message (`> …`) and forwarded blocks: not the user's words.
    quoted: tuple[str, ...] = ()
    forwarded: str | None = None
    third_party: bool = False
    # `text` is quoted or forwarded content standing in for a message with nothing of the user's own.
    promoted: bool = False
    client_message_id: str | None = Field(default=None, max_length=200)
    active_command_id: str | None = Field(default=None, max_length=64)
    # Set for a command without the model; `text` then describes it for the archive.
    direct: DirectCall | None = None
    # Epoch milliseconds at which the gateway received the HTTP request (latency segments only).
    received_ms: float = 0.0
    published_ms: float = 0.0
    # A client follows the turn as it runs (SSE): only then are `turn.started`, `tool.called` and
    # `reply.delta` worth publishing. `turn.done` carries the answer and always goes.
    stream: bool = False


class ToolCallOut(WireModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str  # the outcome of that call: created, needs_date, error:invalid_symbol, refused, …


# Keys beyond the contract's §4 example are sent only when they say something, so a client that
# reads the documented shape sees exactly it for a plain event or stub.
_STUB_EXTRAS = (
    "kind",
    "hold_reason",
    "proposed_start",
    "proposed_end",
    "change",
    "next_occurrences",
    "recurrence",
    "attendee_query",
    "attendee_candidates",
    "recipients",
    "invitation",
    "counter",
    "proposal",
    "event_candidates",
    "replan",
    "task_change",
)
_EVENT_EXTRAS = (
    "series_id",
    "recurrence",
    "reminder_minutes",
    "sync_state",
    "location",
    "notes",
    "url",
    "attendees",
    "organizer",
    "kind",
    "task_id",
)


def _says_nothing(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_says_nothing(v) for v in value.values())
    # "create" is the ordinary kind of stub, "event" of an event: only the others are worth naming.
    return value in (None, (), [], "create", "event")


def _drop_empty(data: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = dict(data)
    for key in keys:
        if key in out and _says_nothing(out[key]):
            del out[key]
    return out


class StubView(StubFields):
    """The client's view of the pending command (contract §4): the shared fields, and the rule of
    a repeating create so a client shows a series as one."""

    recurrence: str | None = None

    @model_serializer(mode="wrap")
    def _without_empty_extras(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _drop_empty(handler(self), _STUB_EXTRAS)


class EventView(EventFields):
    """The client's view of an event (contract §4): the shared fields, with empty extras left out."""

    @model_serializer(mode="wrap")
    def _without_empty_extras(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _drop_empty(handler(self), _EVENT_EXTRAS)


_EVENT_FIELDS = tuple(EventFields.model_fields)
_STUB_FIELDS = tuple(StubFields.model_fields)


def event_view(event: EventOut) -> EventView:
    """The client's view of an event row (contract §4), shared by every door that shows events.
    Built without validating again: every field comes from an `EventOut` of the same types."""
    return EventView.model_construct(**{name: getattr(event, name) for name in _EVENT_FIELDS})


def stub_view(stub: StubOut) -> StubView:
    view = {name: getattr(stub, name) for name in _STUB_FIELDS}
    return StubView.model_construct(**view, recurrence=stub.slots.recurrence)


class ModelUsage(WireModel):
    """One model call's tokens as the endpoint reported them (contract §17)."""

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # False when the endpoint sent no `usage` (the counts are then zero, not measured).
    reported: bool = True

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class TurnAnswer(WireModel):
    """The body of `POST /v1/chat` (contract §4)."""

    turn_id: str
    conversation_id: str
    outcome: Outcome
    reply: str
    intent: str
    tool_calls: tuple[ToolCallOut, ...] = ()
    command: StubView | None = None
    events: tuple[EventView, ...] = ()
    model_calls: int = 0
    # The changes this turn committed, in order (contract §15): what an Undo on its receipt reverts.
    change_ids: tuple[str, ...] = ()
    # Set only when the turn was refused at once because the model endpoint is treated as down
    # (its circuit is open): the gateway answers 503 `model_unavailable` with this `Retry-After`.
    retry_after_s: float | None = None
    # A suggestion's slots (contract §16, §20): present, possibly empty, on a turn that suggested
    # times; with none, why.
    slots: tuple[SuggestedSlot, ...] | None = None
    empty_reason: EmptyReason | None = None

    @model_serializer(mode="wrap")
    def _without_empty_extras(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = _drop_empty(handler(self), ("retry_after_s", "change_ids", "empty_reason"))
        if data.get("slots") is None:
            data.pop("slots", None)
        return data


class TurnEvent(WireModel):
    """Progress of one turn on `calagent.turn.events.<turn_id>`; `turn.done` carries the answer."""

    turn_id: str
    type: Literal["turn.started", "tool.called", "reply.delta", "turn.done"]
    tool: ToolCallOut | None = None
    delta: str | None = None
    answer: TurnAnswer | None = None
    # On `turn.done`: the tokens this turn's model calls used, charged to the user's daily budget.
    tokens: int = 0


class Segment(WireModel):
    name: str
    start_ms: float  # offset from the turn's start (the gateway receiving the request)
    ms: float


class TurnRecord(WireModel):
    """What the agent reports about a finished turn to the eval recorder."""

    envelope: Envelope
    text: str
    outcome: Outcome
    intent: str
    reply: str
    tool_calls: tuple[ToolCallOut, ...] = ()
    flags: tuple[Flag, ...] = ()
    model_calls: int = 0
    segments: tuple[Segment, ...] = ()
    total_ms: float = 0.0
    cold_start: bool = False
    replaced_reply: str | None = None  # what the model claimed, when an exit check replaced it
    error: str | None = None
    model_usage: tuple[ModelUsage, ...] = ()
    # What was repaired in the model's tool calls, e.g. "text_tool_call", "almost_json",
    # "missing_call_id", "natural_date:date" (contract §17).
    repairs: tuple[str, ...] = ()


class TurnLookup(WireModel):
    """Gateway → agent: the stored answer of an earlier turn with this key (`turn_key`)."""

    user_id: str
    turn_key: str


class TurnLookupResult(WireModel):
    answer: TurnAnswer | None = None
    pending: bool = False


MAX_HISTORY_PAGE = 200


class HistoryRequest(WireModel):
    """Gateway → agent: one page of the caller's conversation, newest page first (`before` is a
    message id of an earlier page: the page ends before it)."""

    user_id: str = Field(min_length=1, max_length=128)
    conversation_id: str = Field(min_length=1, max_length=128)
    before: int | None = Field(default=None, ge=1)
    limit: int = Field(default=50, ge=1, le=MAX_HISTORY_PAGE)


class HistoryMessage(WireModel):
    """One archived message with what its turn came to: the outcome, the command it left pending,
    and (for the assistant's message) the tool calls and model calls behind it."""

    id: int
    role: Literal["user", "assistant"]
    text: str
    turn_id: str
    at: datetime
    outcome: Outcome | None = None
    command: StubView | None = None
    tool_calls: tuple[ToolCallOut, ...] = ()
    model_calls: int | None = None


class HistoryResult(WireModel):
    """Oldest first within the page; `before` is where the next older page ends (None: no more)."""

    messages: tuple[HistoryMessage, ...] = ()
    before: int | None = None
