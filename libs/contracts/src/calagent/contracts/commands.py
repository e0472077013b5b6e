"""Messages of the schedule-command service (the only writer of calendar state).

Every command carries the envelope (identity, zone, the moment the user spoke) and an
idempotency key; no field anywhere can name a user other than the envelope's.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal, TypeGuard, get_args

from pydantic import Field

from calagent.contracts.base import WireModel
from calagent.contracts.envelope import Envelope
from calagent.contracts.people import Attendee, CounterOut, InvitationAnswer, InvitationOut, ProposalOut
from calagent.contracts.tasks import BlockMove, ReplanOut, TaskChangeOut, TaskOut
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import AddTask, PrepareOrCreateSchedule, ProposeTimes, Scope, UpdateSchedule

# The stub and command-outcome vocabulary, each word declared once (issue 31): every set and
# every wider Literal below is built from these, so a new status must be placed in one of them.
# A stub waiting on the user.
ActiveStubStatus = Literal[
    "needs_date",
    "needs_time",
    # A name among the attendees matched no contact, or several (contract §16).
    "needs_attendee",
    "conflict",
    "held",
]
# A stub that ended as the calendar or plan changed; each is also a turn's outcome.
SettledStubStatus = Literal["created", "cancelled", "updated", "deleted", "planned"]
# A stub that ended with nothing done: its time ran out, or a new request replaced it.
LapsedStubStatus = Literal["expired", "superseded"]
FinalStubStatus = Literal[SettledStubStatus, LapsedStubStatus]
StubStatus = Literal[ActiveStubStatus, FinalStubStatus]
# What a command answers (`CommandResult.status`): a stub's state, `expired` for a stub whose time
# ran out on the way, or `error`. A new request's stub is never answered `superseded` (the
# superseded one rides along in `CommandResult.superseded`).
CommandOutcome = Literal[ActiveStubStatus, SettledStubStatus]
CommandStatus = Literal[CommandOutcome, "expired", "error"]
# Statuses that say the calendar really changed (sent by commands after its commit).
WrittenStatus = Literal["created", "updated", "deleted"]

ACTIVE_STUB_STATUSES: frozenset[StubStatus] = frozenset(get_args(ActiveStubStatus))
FINAL_STUB_STATUSES: frozenset[StubStatus] = frozenset(get_args(FinalStubStatus))
COMMAND_OUTCOMES: frozenset[CommandStatus] = frozenset(get_args(CommandOutcome))
WRITTEN_STATUSES: frozenset[CommandStatus] = frozenset(get_args(WrittenStatus))
# The stubs whose receipt ends with a proposed action a bare "好"/"yes" can accept (contract §8).
OFFER_STUB_STATUSES: frozenset[StubStatus] = frozenset({"conflict", "held"})


def is_command_outcome(status: CommandStatus) -> TypeGuard[CommandOutcome]:
    """A command's answer that is also its turn's outcome (not `expired`, not `error`)."""
    return status in COMMAND_OUTCOMES


HoldReason = Literal[
    "past_start",
    "third_party_content",
    # A repeating event is shown as a plan (rule in words, next occurrences) before it is created.
    "recurrence_plan",
    # The user's words carry a repetition or trigger marker the create did not encode.
    "recurrence_unclear",
    # Every update and delete waits for the user's word.
    "change_confirmation",
    # An automation request: stored as an offer, never run.
    "automation_plan",
    # The connected calendar changed the event too: its version was kept, the assistant's change
    # waits here for the user's word.
    "sync_conflict",
    # The write sends mail to other people (invitations, updates, cancellations): a message that
    # has left cannot be taken back.
    "sends_invitations",
    # An invitation (or its cancellation) mailed to the user's private address by someone else:
    # nothing is added, removed or answered until the user says so.
    "invitation_received",
    # An attendee's counter-proposal (iMIP COUNTER) for an event the user organizes: the event
    # moves, and everyone is told, only when the user says so.
    "counter_received",
    # The change was chosen from several events found for the same words (contract §20): it asks
    # which one (`event_candidates`), and no confirmation runs it until the user has picked.
    "which_event",
    # Blocks of the user's tasks a new or changed event landed on: the fewest moves that place
    # them again, offered; nothing moves until the user says so (contract §21).
    "task_replan",
]
# `proposal`: times to propose to someone outside, mailed on confirmation; `booking`: the time
# they chose, booked (the event created, the invitation sent) on confirmation (contract §20);
# `replan`: task blocks moved off what landed on them, moved on confirmation (contract §21);
# `task_change`: our change to a task the connected calendar changed too, made again on
# confirmation on top of the server's version (contract §22).
StubKind = Literal["create", "change", "plan", "invitation", "proposal", "booking", "replan", "task_change"]


def waits_beside(kind: StubKind, hold_reason: HoldReason | None) -> bool:
    """An offer from outside that waits beside the conversation (contract §19): an invitation, an
    attendee's counter-proposal or choice among proposed times, or the user's change the connected
    calendar changed too."""
    return kind in ("invitation", "booking") or hold_reason in ("sync_conflict", "counter_received")


ChangeAction = Literal["update", "delete"]
# The most events a change offers to choose among: a find that lists more is the model's to narrow.
MAX_EVENT_CANDIDATES = 20
# Who made a change (contract §15): a chat turn, a client's own call (the page, the API), or the
# connected calendar.
ChangeSource = Literal["chat", "api", "sync"]
ChangeKind = Literal["created", "updated", "deleted"]
# Where a write command came from: the model or the timed gate in a chat turn, or the client.
WriteSource = Literal["chat", "api"]


# What an event is: one of the user's, or a block of time placed for a task (contract §21).
EventKind = Literal["event", "task_block"]


class EventFields(WireModel):
    """An event as every door shows it (contract §4): the fields the client's view
    (`turns.EventView`) and the service's answer (`EventOut`) share, declared once."""

    id: str
    title: str
    start: datetime  # in the user's zone (offset included)
    end: datetime
    calendar: str
    completed: bool = False
    all_day: bool = False
    # A series occurrence names its series (its master) and rule (RRULE); a reminder its minutes
    # before the start.
    series_id: str | None = None
    recurrence: str | None = None
    reminder_minutes: int | None = None
    # 'rejected': the connected CalDAV server refused the last delivery of this event.
    sync_state: str | None = None
    # The UID the event was born with: the same in the feeds, in CalDAV and here (contract §14).
    uid: str | None = None
    location: str | None = None
    notes: str | None = None
    url: str | None = None
    # The people invited, with their answers, and the organizer's address (mailto: stripped, §16).
    attendees: tuple[Attendee, ...] = ()
    organizer: str | None = None
    # A block of a task (contract §21): `task_block`, naming its task; else an ordinary `event`.
    kind: EventKind = "event"
    task_id: str | None = None


class EventOut(EventFields):
    """An event as the commands service answers it: what code needs beyond the client's view."""

    weekday: int = Field(ge=1, le=7, description="ISO weekday of `start` in `tz`")
    tz: str
    # An occurrence of a series: `id` names the occurrence, `occurrence_start` the start the rule
    # gives it (an override may have moved it).
    occurrence_start: datetime | None = None
    # It came from a connected calendar the user does not own (contract §19): its text is the
    # words of whoever writes that calendar, like an event someone else organizes.
    foreign_calendar: bool = False
    # Its text reached a connected calendar other than through this system (another app, someone
    # the calendar is shared with): someone else's words though the calendar is the user's (§19).
    outside_text: bool = False
    # Its organizer is the user (one of their addresses: settings `email`, the private mail
    # address), as commands, which keeps those, says on every result that shows it; an event
    # someone else organizes is that person's words (§19).
    organized_by_user: bool = False


class EventCandidate(WireModel):
    """One of the events a held change may be about (contract §20), as the user picks among them."""

    event_id: str
    title: str
    start: datetime  # in the user's zone (offset included)
    end: datetime
    calendar: str
    all_day: bool = False


class StubSlots(WireModel):
    date: str | None = None  # a date symbol or an ISO date once chosen
    time: str | None = None
    end_time: str | None = None
    duration_minutes: int | None = None
    all_day: bool | None = None
    calendar: str | None = None
    end_date: str | None = None
    recurrence: str | None = None
    reminder_minutes: int | None = None
    location: str | None = None
    notes: str | None = None
    # The people as the model named them (names or addresses); code resolves them on every
    # evaluation against the user's contacts.
    attendees: tuple[str, ...] | None = None


class ChangeOut(WireModel):
    """A held update or delete: the event before, and after (update) or the occurrences that go."""

    action: ChangeAction
    scope: Scope
    before: EventOut
    after: EventOut | None = None
    # For a delete of a series (following / all): the next starts that would go, and how many in all
    # (None: the series has no end).
    removed_starts: tuple[datetime, ...] = ()
    removed_count: int | None = None


class PlanOut(WireModel):
    id: str
    trigger: str
    steps: tuple[str, ...]
    status: Literal["offered", "confirmed", "deleted"]
    created_at: datetime


class StubFields(WireModel):
    """The pending command as every door shows it (contract §4): the fields the client's view
    (`turns.StubView`) and the service's answer (`StubOut`) share, declared once."""

    id: str
    status: StubStatus
    title: str
    candidates: tuple[date, ...] = ()
    expires_at: datetime
    kind: StubKind = "create"
    hold_reason: HoldReason | None = None
    proposed_start: datetime | None = None
    proposed_end: datetime | None = None
    change: ChangeOut | None = None
    # A repeating create held as a plan: the next occurrences the rule gives (local starts).
    next_occurrences: tuple[datetime, ...] = ()
    # `needs_attendee`: the name asked for and the contacts it matched (empty: none did).
    attendee_query: str | None = None
    attendee_candidates: tuple[Attendee, ...] = ()
    # Whom confirming this stub sends mail to (hold_reason `sends_invitations`).
    recipients: tuple[Attendee, ...] = ()
    # An invitation received by mail (kind `invitation`): what it asks, and from whom.
    invitation: InvitationOut | None = None
    # An attendee's counter-proposal (a `change` held `counter_received`): who proposes what.
    counter: CounterOut | None = None
    # Times proposed to someone outside (kind `proposal`), or the one they chose (kind `booking`).
    proposal: ProposalOut | None = None
    # A change asking which event it is about (hold reason `which_event`, contract §20): every
    # event found for the same words, the model's pick first; the user's reply names one. Named
    # apart from `candidates`, which are a create's candidate days.
    event_candidates: tuple[EventCandidate, ...] = ()
    # Task blocks to move off what landed on them (kind `replan`): each block's old and new time.
    replan: ReplanOut | None = None
    # Our change to a task offered again after a sync conflict (kind `task_change`).
    task_change: TaskChangeOut | None = None


class StubOut(StubFields):
    """The pending command as the commands service answers it: its slots, the events it meets and
    its plan, beyond the client's view."""

    slots: StubSlots
    conflicts_with: tuple[EventOut, ...] = ()
    plan: PlanOut | None = None


class ChangedRow(WireModel):
    """One stored row a change touched: as it was and as it became (None: it did not exist)."""

    event_id: str
    before: EventOut | None = None
    after: EventOut | None = None


class LoggedChangeOut(WireModel):
    """One committed change to the user's calendar (contract §15). `event_id`, `uid`, `before` and
    `after` are the row that stands for it (the event, or the series' master); `rows` every row
    it touched (a series edit: the master, overrides, a split's new series)."""

    id: str
    at: datetime
    source: ChangeSource
    kind: ChangeKind
    event_id: str
    uid: str | None = None
    scope: Scope | None = None
    before: EventOut | None = None
    after: EventOut | None = None
    turn_id: str | None = None
    undone_by: str | None = None
    # The change this one reverted, when it is an undo.
    undoes: str | None = None
    rows: tuple[ChangedRow, ...] = ()


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
        "invalid_recurrence",
        "not_found",
        # A series change its rule cannot say (one weekday of several, a month day some months
        # lack): refused, nothing changed.
        "inexpressible_change",
        # An undo of a change whose rows were changed again since: nothing is written.
        "changed_since",
        "already_undone",
        "nothing_to_undo",
        # A proposal of times found none to offer (the reason in the message), or none of its
        # times is free any more at confirmation: nothing was written or sent.
        "no_free_time",
        # A write broke a constraint of the store: a defect, answered at once (never retried);
        # nothing was written.
        "internal_error",
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
    source: WriteSource = "chat"
    # The words of the turn that asks for the write: when they carry a recurrence or trigger
    # marker and the write has no `recurrence`, commands holds it (`recurrence_unclear`, §9).
    words: str | None = Field(default=None, max_length=4000)


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
    # The answer to an invitation offer (kind `invitation`): a confirmation alone accepts.
    partstat: InvitationAnswer | None = None
    # The event the user singled out among a change's `event_candidates` (contract §20): code's
    # reading of the user's reply, never the model's. The change is prepared again for it.
    pick: str | None = Field(default=None, min_length=1, max_length=80)
    source: WriteSource = "chat"


class CancelStub(WireModel):
    kind: Literal["cancel"] = "cancel"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    command_id: str | None = None


class PrepareChange(WireModel):
    """The model's `update_schedule` / `delete_schedule`: prepared and held, never run at once.
    An id that is not the caller's is answered exactly like one that does not exist."""

    kind: Literal["change"] = "change"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    action: ChangeAction
    event_id: str = Field(min_length=1, max_length=80)
    # The update's fields (event_id and scope inside are ignored: the ones above and below count).
    update: UpdateSchedule | None = None
    scope: Scope = "this"
    hold: HoldReason | None = None
    # Every event the `find_events` result the change was chosen from listed for the same words,
    # `event_id` among them (contract §20): with more than one, the change asks which. Just
    # `event_id`: the user named it themselves (a client's own call). Empty: no find listed it.
    candidates: tuple[Annotated[str, Field(min_length=1, max_length=80)], ...] = Field(
        default=(), max_length=MAX_EVENT_CANDIDATES
    )


class ProposePlan(WireModel):
    """The model's `propose_automation`: stored as an offer; nothing runs."""

    kind: Literal["plan"] = "plan"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    trigger: str = Field(min_length=1, max_length=500)
    steps: tuple[str, ...] = Field(min_length=1, max_length=10)


class ProposeTimesCommand(WireModel):
    """The model's `propose_times`: the free times found are held as an offer; nothing is held on
    the calendar or mailed before the user confirms it (contract §20)."""

    kind: Literal["propose"] = "propose"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    args: ProposeTimes
    hold: HoldReason | None = None


class RevertChange(WireModel):
    """Revert one committed change (contract §15): `change_id`, else the latest change `turn_id`
    made (the receipt just shown), else the caller's latest change made by the assistant. An undo
    is itself a change, and can be undone."""

    kind: Literal["undo"] = "undo"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    change_id: str | None = Field(default=None, max_length=64)
    turn_id: str | None = Field(default=None, max_length=64)
    source: WriteSource = "chat"


class AddTaskCommand(WireModel):
    """The model's `add_task`: the task kept and placed as blocks in free time (contract §21)."""

    kind: Literal["add_task"] = "add_task"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    args: AddTask


class CompleteTaskCommand(WireModel):
    """The model's `complete_task`: the task done, its later blocks freed (contract §21)."""

    kind: Literal["complete_task"] = "complete_task"
    envelope: Envelope
    idempotency_key: str = Field(min_length=1, max_length=200)
    task_id: str = Field(min_length=1, max_length=64)


AnyCommand = (
    PrepareOrCreate
    | MergeStub
    | CancelStub
    | PrepareChange
    | ProposePlan
    | ProposeTimesCommand
    | RevertChange
    | AddTaskCommand
    | CompleteTaskCommand
)
Command = Annotated[AnyCommand, Field(discriminator="kind")]


class CommandRequest(WireModel):
    command: Command


class CommandResult(WireModel):
    status: CommandStatus
    # True only when this reply was sent after a commit that wrote the event row.
    persisted: bool = False
    event: EventOut | None = None
    stub: StubOut | None = None
    calendar_fallback: CalendarFallback | None = None
    error: CommandError | None = None
    # The stub this command ended as `superseded` because it was a new request, not an answer.
    superseded: StubOut | None = None
    # A new request from third-party content while the user has a pending one: held without a stub
    # of its own, and the user's pending request kept exactly as it was (not superseded).
    kept: StubOut | None = None
    # A confirmed change: the event as it was, and as it is now (None after a delete).
    before: EventOut | None = None
    removed_count: int | None = None
    # The change this write was logged as (contract §15), for an Undo button on its receipt.
    change_id: str | None = None
    # An undo: the change it reverted.
    undid: LoggedChangeOut | None = None
    # A confirmation of an offer whose event changed since: nothing was written, and `stub` is
    # the offer made again with the event as it is now.
    reoffered: bool = False
    # A task added or completed (contract §21), as it now is (at_risk: minutes missing).
    task: TaskOut | None = None
    # Its blocks from now on (kind `task_block`), in time order.
    blocks: tuple[EventOut, ...] = ()
    # Other tasks' blocks its placing moved (contract §21: never silently), each old and new time.
    moved_blocks: tuple[BlockMove, ...] = ()
    # The event written landed on task blocks: their re-plan, held as the user's pending offer.
    replan: StubOut | None = None
    replayed: bool = False  # the idempotency key was seen before: this is the first answer again
    db_ms: float = 0.0
