"""The pending command: every rule of a stub's life, as pure code (contract §8, §9, §15, §16).

    (new) ──> needs_date | needs_time | needs_attendee | conflict | held | created
    an active stub ──> any status (asked again, run, cancelled, expired, superseded)
    created, updated, deleted, planned, cancelled, expired, superseded: final

A user has at most one active pending command. The rules, each decided here and nowhere else:

- **Opening** a new request supersedes the active one (which never lends its title or slots), unless
  the new request is someone else's words: those never end the user's own pending request
  (`gives_way_to`). An offer from outside (an invitation, a sync conflict) is set aside, not
  dropped: it waits beside the conversation until it is answered, offered again or its event
  starts (`waits_beside`, `set_aside`, `come_back`).
- **Continuing**: a create answers the stub only on facts — the same title, or its id passed back
  (`continued_by`).
- **Holding**: why a write waits is one list of reasons in one order for creates and changes alike
  (`HOLD_PRECEDENCE`); a write held for a reason is held whatever else it meets, and shows the
  conflicts it meets (`decide`). "In the past" is one rule (`is_past`).
- **Consent**: only an explicit confirmation lifts a hold; the conflict override needs both code's
  fact (the stub is in `conflict`) and the model's flag (`consent_of_reply`, `consent_of_create`).
  A change chosen from several events found for the same words runs on no confirmation until the
  user has said which (`asks_which`, `picks`; contract §20).
- **Binding** (§15): a held change runs only while its target is the version the offer showed and
  nothing new stands where it would go (`offer_stands`).
- **Ending**: run, cancelled, expired, superseded — each a method returning the stub to store. A step
  of an active stub keeps it alive `ttl` from then (or until its own deadline); an ended stub keeps
  the moment it ended.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from datetime import date, datetime, timedelta
from typing import Literal

from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.payloads import KINDS, HeldBooking, HeldChange, HeldInvitation, PendingChange
from calagent.commands.domain.proposals import Proposal
from calagent.contracts.commands import (
    ACTIVE_STUB_STATUSES,
    ActiveStubStatus,
    HoldReason,
    SettledStubStatus,
    StubKind,
    StubSlots,
    StubStatus,
    waits_beside,
)
from calagent.contracts.people import Attendee
from calagent.contracts.text import normalise_title

# Why a write waits, strongest first: when several reasons hold, the user is told the first. Someone
# else's words come before everything (the user must know whose request it is); then what came
# from outside; then which event the user means and what their own words left unclear; then what
# the write would do beyond the calendar (mail); then what the user is shown before it exists; "in
# the past" and the plain confirmation every change waits for come last.
HOLD_PRECEDENCE: tuple[HoldReason, ...] = (
    "third_party_content",
    "invitation_received",
    "counter_received",
    "sync_conflict",
    "which_event",
    "recurrence_unclear",
    "sends_invitations",
    "recurrence_plan",
    "automation_plan",
    "task_replan",
    "past_start",
    "change_confirmation",
)


# An invitation waits for the user's answer longer than a chat request: mail is read later.
OUTSIDE_OFFER_TTL = timedelta(days=7)


class IllegalTransitionError(ValueError):
    pass


def can_transition(current: StubStatus | None, target: StubStatus) -> bool:
    if current is None:
        return target in ACTIVE_STUB_STATUSES or target == "created"
    return current in ACTIVE_STUB_STATUSES


def check_transition(current: StubStatus | None, target: StubStatus) -> None:
    if not can_transition(current, target):
        raise IllegalTransitionError(f"a stub cannot go from {current} to {target}")


def lapsed(stub: Stub, now: datetime) -> bool:
    """Whether an active stub's time ran out: it no longer answers anything and ends `expired`."""
    return stub.active and stub.expires_at < now


def shown_conflicts(conflicts: Iterable[Event]) -> tuple[str, ...]:
    """The ids an offer records of what it meets: single events (a series' occurrences are shown by
    their series, never as events of their own)."""
    return tuple(c.id for c in conflicts if c.series_id is None)


def strongest(reasons: Iterable[HoldReason | None]) -> HoldReason | None:
    """The reason the user is told among those that hold (`HOLD_PRECEDENCE`)."""
    present = {r for r in reasons if r is not None}
    return next((r for r in HOLD_PRECEDENCE if r in present), None)


def is_past(start: datetime, end: datetime, all_day: bool, now: datetime) -> bool:
    """Whether a write would put an event in the past, for a create and a change alike. An all-day
    entry for today is not "in the past" just because its midnight has gone by."""
    if all_day:
        return end <= now
    return start < now


def unclear_recurrence(marker: str | None, rule: str | None) -> HoldReason | None:
    """Contract §9's backstop: the words that asked for the write carry a repetition or trigger
    marker (the time service's lexicon) and the write has no rule. Holding costs one "好"; a one-off
    where a series was meant is a silent miss."""
    return "recurrence_unclear" if marker and not rule else None


@dataclass(frozen=True)
class Decision:
    outcome: Literal["run", "conflict", "held"]
    conflicts: tuple[Event, ...] = ()
    hold_reason: HoldReason | None = None


def decide(
    proposal: Proposal | None,
    conflicts: tuple[Event, ...],
    now: datetime,
    *,
    reasons: Iterable[HoldReason | None] = (),
    confirmed: bool = False,
    override_conflict: bool = False,
) -> Decision:
    """Held beats conflict beats run, for a create and a change alike: a write whose preconditions
    code cannot prove is never run (and shows what it would meet), and a confirmation lifts only the
    hold, never the conflict check of a time the user was not shown. `proposal`: where the write
    puts an event (None: a delete, which puts nothing anywhere)."""
    if not confirmed:
        past: HoldReason | None = (
            "past_start"
            if proposal is not None and is_past(proposal.start, proposal.end, proposal.all_day, now)
            else None
        )
        reason = strongest((*reasons, past))
        if reason is not None:
            return Decision("held", conflicts, reason)
    if conflicts and not override_conflict:
        return Decision("conflict", conflicts)
    return Decision("run", conflicts)


@dataclass(frozen=True)
class Consent:
    """What the user's word lifts for the next evaluation of a stub: the hold (for good), or the
    conflict check of the time the stub proposes (a new time is a new question)."""

    confirmed: bool
    override_conflict: bool


@dataclass(frozen=True)
class Ask:
    """What an active stub asks the user and keeps until it is answered: one typed step."""

    title: str
    slots: StubSlots = field(default_factory=StubSlots)
    candidates: tuple[date, ...] = ()
    conflict_event_ids: tuple[str, ...] = ()
    # Why the stub is `held` right now (None for every other status).
    hold_reason: HoldReason | None = None
    # A hold asked for by the caller (someone else's words) sticks to the stub across
    # clarifications until the user confirms.
    requested_hold: HoldReason | None = None
    confirmed: bool = False
    proposed_start: datetime | None = None
    proposed_end: datetime | None = None
    attendee_query: str | None = None
    attendee_candidates: tuple[Attendee, ...] = ()
    recipients: tuple[Attendee, ...] = ()
    payload: PendingChange | None = None


@dataclass(frozen=True)
class PendingCommand:
    """One stored stub and the rules of its next step; every step returns the stub to store."""

    stub: Stub
    ttl: timedelta

    @classmethod
    def open(
        cls,
        *,
        stub_id: str,
        user_id: str,
        status: ActiveStubStatus | Literal["created"],
        ask: Ask,
        now: datetime,
        ttl: timedelta,
        turn_id: str | None,
        kind: StubKind = "create",
    ) -> PendingCommand:
        """A new request's stub (the active one, if any, is ended by `gives_way_to`'s rule first)."""
        check_transition(None, status)
        stub = Stub(
            id=stub_id,
            user_id=user_id,
            status=status,
            expires_at=now + ttl,
            created_at=now,
            updated_at=now,
            created_by_turn=turn_id,
            title=ask.title,
            slots=ask.slots,
            kind=kind,
        )
        return cls(_asking(stub, ask, now, ttl), ttl)

    # ---- facts about the stub --------------------------------------------------------------------

    def expired(self, now: datetime) -> bool:
        return lapsed(self.stub, now)

    def gives_way_to(self, hold: HoldReason | None) -> bool:
        """Whether a new request ends this one (superseded). Someone else's words never end the
        user's own pending request: superseding it is a cancel, and a cancel from third-party
        content is held like any other change. A request they asked for is not the user's own:
        it gives way to any (`steps_aside_for` says whether it ends or waits)."""
        return hold != "third_party_content" or self.someone_elses()

    def someone_elses(self) -> bool:
        """Whether someone else's words asked for this request (contract §19)."""
        return "third_party_content" in (self.stub.hold_reason, self.stub.requested_hold)

    def steps_aside_for(self, turn_id: str | None) -> bool:
        """Whether a new request sets this one aside rather than ending it: an offer from outside
        (`waits_beside`), or one someone else's words asked for in the new request's own turn.
        Which of a turn's requests held for someone else's words is the one the user made in
        their own words, code cannot tell: none ends another, each waits for the user (§19)."""
        same_turn = turn_id is not None and self.stub.created_by_turn == turn_id
        return self.waits_beside() or (same_turn and self.someone_elses())

    def waits_beside(self) -> bool:
        """An offer from outside (an invitation, a sync conflict) is never dropped by a later
        request, nor does it end the user's own (§19: it waits beside the conversation): a new
        request sets it aside, and it is offered again once the user's request is settled."""
        return waits_beside(self.stub.kind, self.stub.hold_reason)

    def from_mail(self) -> bool:
        """An offer someone mailed (an invitation, a counter-proposal, a choice among proposed
        times): mail is read later than chat, so it waits longer than a chat request
        (`OUTSIDE_OFFER_TTL`)."""
        return KINDS[self.stub.kind].expiry == "mail" or self.stub.hold_reason == "counter_received"

    def waiting(self) -> bool:
        return self.stub.waiting_since is not None

    def subject_start(self) -> datetime | None:
        """When the event the offer is about starts: a waiting offer waits until then."""
        payload = self.stub.payload
        if isinstance(payload, HeldInvitation):
            return payload.invitation.start
        if isinstance(payload, HeldChange):
            return payload.view.before.start
        if isinstance(payload, HeldBooking):
            return payload.slot.start
        return self.stub.proposed_start

    def continued_by(self, title: str, command_id: str | None) -> bool:
        """Whether a create answers this stub rather than being a new request (contract §8).

        Only facts count: the same title, or the stub's own id passed back. A different title means
        the user moved on; merging it would write the old title at the new time.
        """
        return command_id == self.stub.id or normalise_title(title) == normalise_title(self.stub.title)

    def asks_which(self) -> bool:
        """A change chosen from several events found for the same words, the user not having said
        which yet (contract §20): no confirmation runs it."""
        payload = self.stub.payload
        return isinstance(payload, HeldChange) and payload.asks_which

    def picks(self, event_id: str) -> bool:
        """Whether an event is one of those this change asks the user to choose among."""
        payload = self.stub.payload
        return (
            isinstance(payload, HeldChange)
            and payload.asks_which
            and any(c.event_id == event_id for c in payload.candidates)
        )

    def consent_of_reply(self, confirm: bool) -> Consent:
        """A reply to the stub (`MergeStub`): only an explicit confirmation lifts a hold, and
        accepting a conflict offer keeps the proposed time."""
        return Consent(
            confirmed=self.stub.confirmed or (confirm and self.stub.status == "held"),
            override_conflict=confirm and self.stub.status == "conflict",
        )

    def consent_of_create(self, allow_conflict: bool | None, hold: HoldReason | None) -> Consent:
        """A create that continues the stub never confirms a hold, and a new hold asked for takes
        back an earlier confirmation. The conflict override needs both halves: code's (the stub
        really is in `conflict`) and the model's (the flag)."""
        return Consent(
            confirmed=self.stub.confirmed and hold is None,
            override_conflict=self.stub.status == "conflict" and allow_conflict is True,
        )

    def same_time(self, proposal: Proposal) -> bool:
        """Whether a proposal is the time this stub asked about (an override answers only that)."""
        return self.stub.proposed_start == proposal.start and self.stub.proposed_end == proposal.end

    def offer_stands(
        self, version_now: str | None, version_shown: str | None, conflicts: Iterable[Event]
    ) -> bool:
        """Contract §15: a confirmation runs the held change only while its target is the version
        the offer was made from and no single event stands where it would go that the offer did
        not show (a series' occurrences are shown by their series)."""
        return version_now == version_shown and self.shows(conflicts)

    def shows(self, conflicts: Iterable[Event]) -> bool:
        """Whether the offer showed every single event its time meets now: a confirmation is a yes
        to the time as it was shown, never to a double booking it did not show."""
        return set(shown_conflicts(conflicts)) <= set(self.stub.conflict_event_ids)

    # ---- steps -----------------------------------------------------------------------------------

    def ask(self, status: ActiveStubStatus, ask: Ask, now: datetime) -> Stub:
        """The stub asked again (still active): it lives `ttl` from now."""
        check_transition(self.stub.status, status)
        return _asking(replace(self.stub, status=status), ask, now, self.ttl)

    def finish(self, outcome: SettledStubStatus, now: datetime, proposal: Proposal | None = None) -> Stub:
        """The stub ended by its answer: its write ran (the time it ran at), or the user said no."""
        check_transition(self.stub.status, outcome)
        ended = replace(self.stub, status=outcome, updated_at=now)
        if proposal is None:
            return ended
        return replace(
            ended,
            proposed_start=proposal.start,
            proposed_end=proposal.end,
            hold_reason=None,
            conflict_event_ids=(),
        )

    def shown_again(self, conflicts: Iterable[Event], now: datetime) -> Stub:
        """The offer asked again as it is, now showing what its time meets: the question the user
        answers next (its deadline stays, as an offer from outside keeps its event's start)."""
        check_transition(self.stub.status, self.stub.status)
        return replace(self.stub, conflict_event_ids=shown_conflicts(conflicts), updated_at=now)

    def bound(self, payload: PendingChange) -> Stub:
        """The held change with the version of its target and the request that made it recorded
        (the offer is not a new step: its deadline stays)."""
        return replace(self.stub, payload=payload)

    def set_aside(self, now: datetime) -> Stub:
        """The offer waits beside the conversation (a new request came, or the user's own was
        already waiting): until it is answered by its id, offered again, or its event starts."""
        # A request someone else's words asked for, set aside in its own turn (`steps_aside_for`),
        # keeps the time any request has: it is not an offer from outside that waits for its event.
        start = None if self.someone_elses() else self.subject_start()
        return replace(
            self.stub,
            waiting_since=now,
            expires_at=start if start is not None else self.stub.expires_at,
            updated_at=now,
        )

    def come_back(self, now: datetime) -> Stub:
        """A waiting offer offered again: the user's active stub, asked anew."""
        return replace(self.stub, waiting_since=None, expires_at=self.answerable_until(now), updated_at=now)

    def answerable_until(self, now: datetime) -> datetime:
        """The deadline of a stub asked (or an offer offered) now, the one rule for every caller: a
        chat request lives `ttl` from its last step; an offer someone mailed keeps the week mail gets
        to be read in, but never past the start of the event it is about — unless that start is
        sooner than `ttl`, which the user always gets to answer in. Offered at once or after
        waiting, an invitation ends alike."""
        alive = OUTSIDE_OFFER_TTL if self.from_mail() else self.ttl
        start = self.subject_start()
        return now + alive if start is None else min(now + alive, max(start, now + self.ttl))

    def supersede(self, now: datetime) -> Stub:
        return self._end("superseded", now)

    def cancel(self, now: datetime) -> Stub:
        return self._end("cancelled", now)

    def expire(self, now: datetime) -> Stub:
        return self._end("expired", now)

    def _end(self, status: Literal["superseded", "cancelled", "expired"], now: datetime) -> Stub:
        check_transition(self.stub.status, status)
        return replace(self.stub, status=status, updated_at=now)


def _asking(stub: Stub, ask: Ask, now: datetime, ttl: timedelta) -> Stub:
    # Every field of an ask is the stub's field of that name: the ask replaces all it carries.
    asked = replace(stub, updated_at=now, **{f.name: getattr(ask, f.name) for f in fields(Ask)})
    # Asked again, it is answerable anew: a user still answering keeps it.
    return replace(asked, expires_at=PendingCommand(asked, ttl).answerable_until(now))
