"""What a pending command keeps until the user answers it, one type per stub kind.

A `create` stub keeps its request in its own columns (title, slots, candidates); the other kinds
keep a payload: a `change` the event before and after and where the change lands, a `plan` the
plan offered, an `invitation` the iMIP message received, a `task_change` our change to a task
offered again. The payload is parsed once when a stub is read and dumped once when it is written
(`payload_of`, `payload_json`), so every step works on attributes and a misspelt or mistyped key
is refused at the storage boundary.

Stored payloads keep their keys: a key a row was written without (one added to the payload since)
stays absent on the way back, so an old row reads as it always did and is written back as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from calagent.contracts.commands import (
    ChangeAction,
    ChangeOut,
    EventCandidate,
    HoldReason,
    PlanOut,
    StubKind,
)
from calagent.contracts.people import Attendee, CounterOut, InvitationOut, ProposalOut, ProposedSlot
from calagent.contracts.tasks import ReplanOut, TaskChangeOut, TaskOut, TaskPatch
from calagent.contracts.tools import Scope, UpdateSchedule

if TYPE_CHECKING:
    from calagent.commands.domain.model import Event


def _from_iso(value: object) -> object:
    # The standard library's reading of the stored text: the same value the rules always compared.
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def _to_iso(value: datetime) -> str:
    return value.isoformat()


# A moment as the payload stores it: ISO 8601 with its offset, read back to the same value.
StoredMoment = Annotated[
    AwareDatetime, BeforeValidator(_from_iso), PlainSerializer(_to_iso, return_type=str, when_used="json")
]

# The fields a change may set, each of which an occurrence may also have of its own. Place, notes,
# address and people were added after the first changes were held: a stub without them leaves
# them as they are.
OwnField = Literal[
    "title",
    "all_day",
    "calendar",
    "reminder_minutes",
    "location",
    "notes",
    "url",
    "attendees",
    "organizer",
]
OWN_FIELDS: tuple[OwnField, ...] = get_args(OwnField)
# What the user asked an update to change: the fields a series' master takes, and its time parts.
AskedField = Literal[OwnField, "date", "time", "duration"]


class StoredPayload(BaseModel):
    """A payload's part as stored: no unknown key, and only the keys it was given are written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_serializer(mode="wrap")
    def _given_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if key in self.model_fields_set}

    def given(self, name: str) -> bool:
        """Whether the stored payload has this key (a row older than the key has not)."""
        return name in self.model_fields_set


class ChangeAfter(StoredPayload):
    """The event after an update, as held until confirm. A field absent (a row held before it
    existed, a sync conflict that leaves the people alone) is left as the event has it."""

    title: str
    start: StoredMoment
    end: StoredMoment
    all_day: bool
    calendar: str
    reminder_minutes: int | None
    location: str | None = None
    notes: str | None = None
    url: str | None = None
    attendees: tuple[Attendee, ...] = ()
    organizer: str | None = None
    # None: held before what was asked was recorded; such a change applies everything it shows.
    asked: tuple[AskedField, ...] | None = None

    @classmethod
    def of(cls, event: Event, asked: Iterable[AskedField]) -> ChangeAfter:
        """An update's event as the stub holds it until confirm: every field this payload names,
        read from the event by the same name, with what the user asked."""
        values = {name: getattr(event, name) for name in cls.model_fields if name != "asked"}
        return cls(**values, asked=tuple(sorted(asked)))


class ChangeRequest(StoredPayload):
    """The request that prepared a change, to prepare it again when its target changed since."""

    action: ChangeAction
    event_id: str
    update: UpdateSchedule | None = None
    scope: Scope = "this"
    hold: HoldReason | None = None


class HeldChange(StoredPayload):
    """A held update or delete (kind `change`): what the user was shown and where it lands."""

    view: ChangeOut
    action: ChangeAction
    scope: Scope
    row_id: str
    master_id: str | None
    occurrence_start: StoredMoment | None
    after: ChangeAfter | None
    # Bound to the offer (contract §15): the target's version when offered, and the request. A
    # change held before offers were bound, or one a sync conflict offers, has neither.
    version: str | None = None
    request: ChangeRequest | None = None
    # An attendee's counter-proposal offered as this move (hold `counter_received`): refusing it
    # sends them a DECLINECOUNTER.
    counter: CounterOut | None = None
    # Asking which event (contract §20): every event found for the same words, the one this change
    # was prepared for first; empty once the user has picked (or when only one was found).
    candidates: tuple[EventCandidate, ...] = ()
    # Events a connected calendar stopped showing, kept here until the user answers (a calendar
    # that suddenly looks empty, an object gone under our write; contract §22): confirming the
    # delete removes every one of them here (`row_id` is the one shown); refusing keeps them, and
    # the sync writes them to the server again.
    gone_ids: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _update_has_after(self) -> HeldChange:
        if self.action == "update" and self.after is None:
            raise ValueError("a held update keeps the event after it")
        return self

    @property
    def bound(self) -> bool:
        return self.version is not None

    @property
    def target_ids(self) -> tuple[str, ...]:
        return tuple(i for i in (self.row_id, self.master_id) if i)

    @property
    def asks_which(self) -> bool:
        return len(self.candidates) > 1


class HeldPlan(StoredPayload):
    """An automation plan offered (kind `plan`)."""

    plan: PlanOut


class HeldInvitation(StoredPayload):
    """An iMIP REQUEST or CANCEL received (kind `invitation`): as shown, the message itself, and
    the user's address it was sent to (the attendee who answers)."""

    invitation: InvitationOut
    ical: str
    attendee: str


class HeldProposal(StoredPayload):
    """Times to propose to someone outside (kind `proposal`), mailed once the user confirms."""

    proposal: ProposalOut


class HeldBooking(StoredPayload):
    """The time the attendee chose among those proposed (kind `booking`, `proposal.chosen` set):
    booked once the user confirms."""

    proposal: ProposalOut

    @property
    def slot(self) -> ProposedSlot:
        assert self.proposal.chosen is not None, "a booking names the slot chosen"
        return self.proposal.slots[self.proposal.chosen]


class HeldReplan(StoredPayload):
    """Task blocks to move off what landed on them (kind `replan`), as offered (contract §21)."""

    replan: ReplanOut


class HeldTaskChange(StoredPayload):
    """Our change to a task the connected calendar changed too (kind `task_change`, contract
    §22): as shown, and the patch confirming applies to the task as it is then — None for our
    removal of the task (`change.after` None), which confirming carries out."""

    change: TaskChangeOut
    patch: TaskPatch | None

    @classmethod
    def removal(cls, theirs: TaskOut) -> HeldTaskChange:
        return cls(change=TaskChangeOut(before=theirs, after=None), patch=None)

    @property
    def task_id(self) -> str:
        return self.change.before.id


PendingChange = (
    HeldChange | HeldPlan | HeldInvitation | HeldProposal | HeldBooking | HeldReplan | HeldTaskChange
)

# How long a stub of a kind waits for the user: `chat`, a request's time from its last step; `mail`,
# the week mail gets to be read in, never past its event's start (`PendingCommand.answerable_until`).
Expiry = Literal["chat", "mail"]


@dataclass(frozen=True)
class KindRules:
    """One kind of stub: what it keeps and how long it waits. What the user's word does to it
    (confirm, refuse) is the commands' row of the same kind (`writes.Writes.kinds`)."""

    payload: type[PendingChange] | None  # None: a create keeps its request in its own columns
    expiry: Expiry


KINDS: Mapping[StubKind, KindRules] = {
    "create": KindRules(None, "chat"),
    # An attendee's counter-proposal is a change someone mailed (`hold_reason` counter_received).
    "change": KindRules(HeldChange, "chat"),
    "plan": KindRules(HeldPlan, "chat"),
    "invitation": KindRules(HeldInvitation, "mail"),
    "proposal": KindRules(HeldProposal, "chat"),
    "booking": KindRules(HeldBooking, "mail"),
    "replan": KindRules(HeldReplan, "chat"),
    "task_change": KindRules(HeldTaskChange, "chat"),
}


class PayloadKindError(ValueError):
    pass


def payload_of(kind: str, stored: Mapping[str, Any] | None) -> PendingChange | None:
    """A stored stub's payload as its kind's type; a kind without one, or a payload its kind does
    not have, is refused (pydantic's ValidationError, a ValueError, for a wrong key or type)."""
    rules = KINDS.get(kind)  # type: ignore[call-overload]
    if rules is None:
        raise PayloadKindError(f"no stub of kind {kind!r}")
    if rules.payload is None:
        if stored is not None:
            raise PayloadKindError(f"a {kind} stub keeps no payload")
        return None
    return rules.payload.model_validate(stored) if stored is not None else None


def payload_json(kind: StubKind, payload: PendingChange | None) -> dict[str, Any] | None:
    """The payload as stored: only the type its stub's kind keeps."""
    if payload is None:
        return None
    if KINDS[kind].payload is not type(payload):
        raise PayloadKindError(f"a stub of kind {kind!r} cannot keep a {type(payload).__name__}")
    return payload.model_dump(mode="json")
