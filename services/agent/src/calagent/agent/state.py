"""What one turn knows as it runs: the facts code decides on, gathered in one place."""

from __future__ import annotations

from dataclasses import dataclass, field

from calagent.agent.domain.choosing import Found
from calagent.agent.domain.language import Lang
from calagent.agent.domain.pending import LastAssistant
from calagent.agent.domain.view import View
from calagent.agent.domain.words import Quoted
from calagent.contracts.commands import OFFER_STUB_STATUSES, StubOut, WriteSource
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import SyncNotice
from calagent.contracts.suggestions import EmptyReason, SuggestedSlot
from calagent.contracts.time import ParsedReply
from calagent.contracts.turns import (
    EventView,
    Flag,
    ModelUsage,
    Outcome,
    ToolCallOut,
    TurnRequested,
)
from calagent.runtime.timeline import Timeline


@dataclass(frozen=True)
class Finished:
    outcome: Outcome
    reply: str
    # What the reply is written from (the stubs, events and people it names): whose words it
    # quotes is read from these (contract §19).
    quotes: tuple[Quoted, ...] = ()


@dataclass
class TurnState:
    turn: TurnRequested
    turn_key: str
    lang: Lang
    timeline: Timeline
    view: View
    stub: StubOut | None = None  # the active stub as the turn found it
    calendars: tuple[str, ...] = ()
    # Those a connected account named: the model reads them by what they are, not their names.
    connected_calendars: tuple[str, ...] = ()
    # CalDAV deliveries since the last turn that did not go through as written (told once).
    sync_notices: tuple[SyncNotice, ...] = ()
    last_assistant: LastAssistant | None = None
    # The time service's reading of the user's words, sent with the context only when a stub is active.
    parsed: ParsedReply | None = None
    tool_calls: list[ToolCallOut] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    model_calls: int = 0
    write_index: int = 0
    # Facts the exit check compares a free-text reply with: only commands replies sent after a
    # commit set `persisted`; only a read that really ran sets `read_ran`.
    persisted: bool = False
    read_ran: bool = False
    tool_errors: int = 0
    events: list[EventView] = field(default_factory=list)
    # What each find_events of the turn listed: a change chosen from several asks which (§20).
    found: list[Found] = field(default_factory=list)
    change_ids: list[str] = field(default_factory=list)  # the changes the turn's writes committed
    slots: list[SuggestedSlot] | None = None  # the times a suggestion offered
    empty_reason: EmptyReason | None = None  # why it offered none
    # Every terminal result of the turn, in order: a turn may write once per model response, and
    # the reply lists every one of them.
    finished: list[Finished] = field(default_factory=list)
    stub_after: StubOut | None = None
    stub_touched: bool = False
    replaced_reply: str | None = None
    error: str | None = None
    # Epoch ms by which the model must have answered for the turn to end inside its timeout.
    model_deadline_ms: float = 0.0
    model_usage: list[ModelUsage] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    # Set when the turn was refused without calling the model (its circuit is open).
    retry_after_s: float | None = None
    # The offer the user was last shown: the newest one an assistant message recorded.
    shown_offer_id: str | None = None
    # Where someone else's text reached the model in this turn (an offer from outside, an event
    # someone else organizes), if it did: the writes the model asks for afterwards are held.
    third_party_seen: str | None = None
    # The offers commands held in this turn because someone else's words reached the model.
    held_for_others: list[str] = field(default_factory=list)

    @property
    def foreign(self) -> bool:
        """Whether someone else's words may be behind what the model asks for (contract §19)."""
        return self.turn.third_party or self.third_party_seen is not None

    @property
    def foreign_source(self) -> str | None:
        """Where someone else's words reached the model in this turn, if they did."""
        if self.third_party_seen is not None:
            return self.third_party_seen
        return "forwarded or quoted content" if self.turn.third_party else None

    def shown(self, stub_id: str) -> bool:
        """Whether the user was last shown this offer: by an assistant message, or by the page's
        card whose id the message carries."""
        return stub_id in (self.shown_offer_id, self.turn.active_command_id)

    @property
    def env(self) -> Envelope:
        return self.turn.envelope

    @property
    def source(self) -> WriteSource:
        """Who asks for the turn's writes: a chat turn, or the client's own call (contract §15)."""
        return "api" if self.turn.direct is not None else "chat"

    def next_key(self) -> str:
        # Deterministic per turn, so a redelivered turn re-run after a crash reuses the same keys
        # and commands answers the first result instead of writing again.
        self.write_index += 1
        return f"{self.turn_key}:w{self.write_index}"

    def repaired(self, what: str) -> None:
        self.repairs.append(what)
        self.flag("repaired")

    def flag(self, flag: Flag) -> None:
        if flag not in self.flags:
            self.flags.append(flag)

    @property
    def current_stub(self) -> StubOut | None:
        return self.stub_after if self.stub_touched else self.stub

    @property
    def offered_stub_id(self) -> str | None:
        """The stub this turn's reply offers for a bare "好"/"no" (a held write, a conflicting time).
        A stub the turn did not touch was offered by an earlier message, not by this one."""
        if len(set(self.held_for_others)) > 1:
            # Several writes held after someone else's words, each its own offer: which one the
            # user asked for in their own words code cannot tell, so a bare "好" answers none of
            # them — the user picks one (its card, or the offer shown again alone) (contract §19).
            return None
        stub = self.stub_after
        if self.stub_touched and stub is not None and stub.status in OFFER_STUB_STATUSES:
            return stub.id
        return None
