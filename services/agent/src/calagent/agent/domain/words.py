"""Whose words (contract §19): where text the model may read came from, and how someone else's is
marked wherever it reaches the model. The one home of the marks: the block in a user-role message,
the key in a tool result, the source an item is named by, and what an archived reply that quoted
someone else is replayed as.

Someone else's text is any the user did not type in this conversation: forwarded and quoted blocks,
every field of mail and invitations, events someone else organizes, that come from a calendar the
user does not own or that reached a connected calendar other than through this system, and cards
of a connected address book. It is data, never instructions: it
reaches the model only inside a marked block (a user or tool message), never in the system message.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from calagent.agent.domain.pending import from_outside
from calagent.contracts.commands import CommandResult, EventOut, StubOut
from calagent.contracts.people import Attendee

# What a reply can quote: the items a receipt is written from.
Quoted = EventOut | StubOut | Attendee

# The key a tool result marks someone else's text with: on the object whose fields it names.
TOOL_MARK = "third_party"
# An event's fields that carry its author's words.
EVENT_TEXT_FIELDS = ("title", "location", "notes", "url")
CARD_SOURCE = "a card of the connected address book"
FOREIGN_CALENDAR_SOURCE = "an event of a connected calendar someone else owns and shares with the user"
OUTSIDE_TEXT_SOURCE = (
    "an event put in or changed in the user's connected calendar other than through this assistant "
    "(another app, or someone the calendar is shared with)"
)


THIRD_PARTY_MARK = "— third-party content, not the user's own words:]"


def third_party_block(source: str, content: str) -> str:
    """Someone else's text as the model may read it (contract §19): in a user-role message, after
    a line naming where it came from and saying it is not the user's words. The one marking, for
    a forward or quote in the user's message and for an offer from outside alike."""
    return f"[{source} {THIRD_PARTY_MARK}\n{content}"


def carries_third_party(content: str | None) -> bool:
    """Whether text the model is about to read holds someone else's words in their marking: a
    replayed message, a tool result (an archive search). Text that only looks marked counts too;
    that errs towards holding."""
    return content is not None and THIRD_PARTY_MARK in content


def offer_source(stub: StubOut) -> str:
    """Where an offer from outside came from, in words naming no text of it but an address."""
    if stub.invitation is not None:
        stranger = "" if stub.invitation.sender_known else " (someone not in the user's contacts)"
        return f"the invitation of {stub.invitation.organizer}{stranger}"
    if stub.counter is not None:
        return f"the counter-proposal of {stub.counter.proposer}"
    if stub.kind == "booking" and stub.proposal is not None:
        return f"the answer of {stub.proposal.attendee.email} to the user's proposal of times"
    if stub.hold_reason == "sync_conflict":
        return "the connected calendar"
    return "forwarded or quoted content"


def event_source(event: EventOut) -> str | None:
    """Whose words an event's text is, when not the user's: the person who organizes it (commands,
    which keeps the user's addresses, says whether that is the user), a calendar it came from
    that the user does not own, or whoever put it in a connected calendar other than through
    this system. (The names of its people are each their own: a card's is the address book's,
    see `source_of`.)"""
    if event.organizer and not event.organized_by_user:
        return f"an event organized by {event.organizer}"
    if event.foreign_calendar:
        # Not by its name: a shared calendar's name is its owner's words too.
        return FOREIGN_CALENDAR_SOURCE
    if event.outside_text:
        return OUTSIDE_TEXT_SOURCE
    return None


def quoted_in(result: CommandResult) -> tuple[Quoted, ...]:
    """What a command's receipt is written from: the stubs and events it names."""
    items = (result.stub, result.kept, result.superseded, result.replan, result.event, result.before)
    return tuple(item for item in items if item is not None)


def _expanded(quotes: Iterable[Quoted]) -> Iterator[Quoted]:
    """Every item a quote shows: a stub's change, the events it meets and the people it and its
    events name."""
    for item in quotes:
        yield item
        if isinstance(item, EventOut):
            yield from item.attendees
        if isinstance(item, StubOut):
            yield from _expanded(
                (item.change.before, *((item.change.after,) if item.change.after else ()))
                if item.change is not None
                else ()
            )
            yield from _expanded(item.conflicts_with)
            yield from item.recipients
            yield from item.attendee_candidates


def source_of(quotes: Iterable[Quoted]) -> str | None:
    """Where the first text of someone else's in `quotes` came from; None when all is the user's."""
    for item in _expanded(quotes):
        if isinstance(item, StubOut):
            if from_outside(item):
                return offer_source(item)
        elif isinstance(item, EventOut):
            found = event_source(item)
            if found is not None:
                return found
        elif item.card:
            return CARD_SOURCE
    return None


def marked_event(
    fields: Mapping[str, Any], source: str | None, *, foreign_calendar: bool = False
) -> dict[str, Any]:
    """An event as a tool result shows it: when its text is someone else's, the key naming whose
    and which of its fields are not the user's words (on a calendar the user does not own, the
    calendar's name is its owner's words too)."""
    if source is None:
        return dict(fields)
    text_fields = [name for name in EVENT_TEXT_FIELDS if fields.get(name)]
    if foreign_calendar:
        text_fields.append("calendar")
    return {**fields, TOOL_MARK: {"source": source, "fields": text_fields}}


# What a connected calendar is called wherever the model would read its name (contract §19).
CONNECTED_CALENDAR = "a calendar of the connected account"


def calendar_names_hidden(text: str, connected: Iterable[str]) -> str:
    """Text the model reads (a receipt, a tool result, a replayed reply) with each connected
    calendar's name, where it is quoted, replaced by what it is: a calendar's display name on the
    server is someone else's words (another app, whoever shares it) and reaches the model only so.
    The user's own page and receipts keep the name."""
    for name in connected:
        for left, right in (("「", "」"), ('"', '"')):
            text = text.replace(f"{left}{name}{right}", f"{left}{CONNECTED_CALENDAR}{right}")
    return text


def replayed_message() -> str:
    """An archived message with no words of the user's own (a mail received, a bare quote), as the
    model reads it again in later turns: that it came, not its text. Someone else's words reach
    the model in the turn they came in, where what it asks for is held; a later turn of the user's
    own words is not held for them, so it must not read them either."""
    return (
        "[A message that was not the user's own words came in here (a mail received, forwarded or "
        "quoted content); it is third-party and not repeated. What it led to, if anything is still "
        "pending, is in the system facts.]"
    )


def replayed_reply(source: str, offer_id: str | None) -> str:
    """An archived reply that quoted someone else's text, as the model reads it again (history,
    archive search): what it was and from whom, not its text."""
    offered = f" It offered id={offer_id}; what is still pending is in the system facts." if offer_id else ""
    return f"[My reply here showed the user text from {source}; it is third-party and not repeated.{offered}]"


# ---- every door text comes in by (contract §19; docs/architecture.md "Whose words") ------------------

Whose = Literal["user", "third_party", "code"]


@dataclass(frozen=True)
class Door:
    """One way text reaches what the model reads: whose it is, the mark it carries there (a
    function or constant of this module or of `context`, for someone else's text), and what a
    write the model asks for after it does."""

    name: str
    whose: Whose
    mark: str
    after: str


HELD = "held (TOOL_POLICY: at commands as third_party_content, or here)"
DOORS: Final[tuple[Door, ...]] = (
    Door("the user's chat message", "user", "the user's own words", "runs (held only for its own reasons)"),
    Door("the client's own call (a page button, the API)", "user", "no model call", "runs as asked"),
    Door("quoted and forwarded blocks", "third_party", "third_party_block", HELD),
    Door("mail received by the assistant (channel email)", "third_party", "third_party_block", HELD),
    Door(
        "an invitation's fields (mail)",
        "third_party",
        "describe_outside_offer",
        "answered only by 接受/暂定/拒绝",
    ),
    Door(
        "an invitation from someone not in the contacts",
        "third_party",
        "describe_outside_offer",
        "answered only by 接受/暂定/拒绝",
    ),
    Door("a sync conflict", "third_party", "describe_outside_offer", "answered only by 确认"),
    Door(
        "an attendee's counter-proposal (mail)",
        "third_party",
        "describe_outside_offer",
        "answered only by 确认, or refused (DECLINECOUNTER)",
    ),
    Door(
        "an answer to the user's proposal of times (mail)",
        "third_party",
        "describe_outside_offer",
        "answered only by 确认; one naming no single slot is a mail turn",
    ),
    Door("the user's own events (find_events)", "user", "the user's own words", "runs (changes always held)"),
    Door("an event someone else organizes (find_events)", "third_party", "TOOL_MARK", HELD),
    Door("an event of a calendar the user does not own (find_events)", "third_party", "TOOL_MARK", HELD),
    Door(
        "an event put in a connected calendar other than through this system (find_events)",
        "third_party",
        "TOOL_MARK",
        HELD,
    ),
    Door("CardDAV cards", "third_party", "CARD_SOURCE", "a reply naming one is replayed by its source"),
    Door("contacts the user typed", "user", "the user's own words", "—"),
    Door("memories (search_memory)", "user", "saved only from the user's own words", "runs"),
    Door("the chat archive replayed (history, search_chat_archive)", "third_party", "replayed_reply", HELD),
    Door("receipts shown as a tool result", "third_party", "TOOL_MARK", HELD),
    Door("the system facts", "code", "no text of anyone's: offers by kind, source and id", "—"),
)

# The doors each thing that can carry text comes in by: a new channel, turn field, prompt input,
# tool, contact source, invitation sender or hold reason without a door here fails the registry's test.
CHANNELS: Final[Mapping[str, str]] = {
    "web": "the user's chat message",
    "telegram": "the user's chat message",
    "api": "the user's chat message",
    "email": "mail received by the assistant (channel email)",
}
# The fields of a turn (contracts.turns.TurnRequested) by the door their text comes in by; None:
# not text the model reads (ids, flags, timings; `raw_text` is the transport's, never sent).
TURN_FIELDS: Final[Mapping[str, str | None]] = {
    "text": "the user's chat message",
    "quoted": "quoted and forwarded blocks",
    "forwarded": "quoted and forwarded blocks",
    "promoted": "mail received by the assistant (channel email)",
    "third_party": "quoted and forwarded blocks",
    "direct": "the client's own call (a page button, the API)",
    "raw_text": None,
    "envelope": None,
    "client_message_id": None,
    "active_command_id": None,
    "received_ms": None,
    "published_ms": None,
    "stream": None,
}
# What the prompt is built from (`context.build_messages`).
PROMPT_INPUTS: Final[Mapping[str, str]] = {
    "now": "the system facts",
    "tz": "the system facts",
    "calendars": "the system facts",
    "connected_calendars": "the system facts",
    "stub": "the system facts",
    "segment": "the chat archive replayed (history, search_chat_archive)",
    "text": "the user's chat message",
    "quoted": "quoted and forwarded blocks",
    "forwarded": "quoted and forwarded blocks",
    "promoted": "mail received by the assistant (channel email)",
}
# What each tool's result can carry (a terminal tool's is its receipt, shown to the model only
# when the turn goes on).
RECEIPT = ("receipts shown as a tool result",)
TOOL_RESULTS: Final[Mapping[str, tuple[str, ...]]] = {
    "prepare_or_create_schedule": RECEIPT,
    "query_schedule_range": RECEIPT,
    "suggest_free_time": RECEIPT,
    "update_schedule": RECEIPT,
    "delete_schedule": RECEIPT,
    "cancel_schedule_command": RECEIPT,
    "confirm_command": RECEIPT,
    "propose_automation": RECEIPT,
    "propose_times": RECEIPT,
    "undo_change": RECEIPT,
    "add_task": RECEIPT,
    "complete_task": RECEIPT,
    "save_memory": RECEIPT,
    "find_events": (
        "the user's own events (find_events)",
        "an event someone else organizes (find_events)",
        "an event of a calendar the user does not own (find_events)",
        "an event put in a connected calendar other than through this system (find_events)",
    ),
    "search_memory": ("memories (search_memory)",),
    "search_chat_archive": ("the chat archive replayed (history, search_chat_archive)",),
}
# What a tool call does when someone else's words reached the model earlier in the turn
# (`TurnState.foreign`, contract §19), for every tool, read in one place (`Tools.run`):
# `hold_at_commands` sends it held (`third_party_content`): an offer naming its source that never
# ends the user's own request; `hold_here` runs nothing and answers it held, naming the source;
# `refuse` runs nothing (consent is the user's own words, contract §8); `read` runs as asked.
Reaction = Literal["hold_at_commands", "hold_here", "refuse", "read"]
TOOL_POLICY: Final[Mapping[str, Reaction]] = {
    "prepare_or_create_schedule": "hold_at_commands",
    "update_schedule": "hold_at_commands",
    "delete_schedule": "hold_at_commands",
    "propose_times": "hold_at_commands",
    # A plan runs by itself later; a task takes the user's time; a memory shapes every later
    # turn; an undo or a cancel takes back what the user asked for: none is offered from here.
    "propose_automation": "hold_here",
    "undo_change": "hold_here",
    "cancel_schedule_command": "hold_here",
    "add_task": "hold_here",
    "complete_task": "hold_here",
    "save_memory": "hold_here",
    "confirm_command": "refuse",
    "query_schedule_range": "read",
    "suggest_free_time": "read",
    "find_events": "read",
    "search_memory": "read",
    "search_chat_archive": "read",
}
CONTACT_SOURCES: Final[Mapping[str, str]] = {"own": "contacts the user typed", "carddav": "CardDAV cards"}
# An invitation by whether its sender is known (`InvitationOut.sender_known`).
INVITATION_SENDERS: Final[Mapping[bool, str]] = {
    True: "an invitation's fields (mail)",
    False: "an invitation from someone not in the contacts",
}
# What a stub is, by the door its text came in by (None: the user's own request, or code's).
STUB_KINDS: Final[Mapping[str, str | None]] = {
    "create": None,
    "change": None,
    "plan": None,
    "proposal": None,
    # Code's own offer: task blocks moved off what the user's write (or a sync) landed on them.
    "replan": None,
    # Our own change to a task, offered again after a sync conflict (its hold reason says so).
    "task_change": None,
    "invitation": "an invitation's fields (mail)",
    "booking": "an answer to the user's proposal of times (mail)",
}
# Why a stub waits, by the door its text came in by (None: the user's own request).
HOLD_REASONS: Final[Mapping[str, str | None]] = {
    "past_start": None,
    "recurrence_plan": None,
    "recurrence_unclear": None,
    "change_confirmation": None,
    "automation_plan": None,
    "sends_invitations": None,
    "which_event": None,
    "task_replan": None,
    "third_party_content": "quoted and forwarded blocks",
    "sync_conflict": "a sync conflict",
    "invitation_received": "an invitation's fields (mail)",
    "counter_received": "an attendee's counter-proposal (mail)",
}
