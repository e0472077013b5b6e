"""Counter-proposals (contract §20; RFC 5546 §3.2.7 COUNTER, §3.2.8 DECLINECOUNTER).

An attendee of an event the user organizes mails a COUNTER proposing another time. It becomes a
held move of that event (a `change` stub held `counter_received`, the proposal on its payload),
an offer from outside: it waits beside the user's own request like an invitation, and nothing of
its text (COMMENT, the proposer's CN) is shown — only who proposes which time. Confirming runs it
as any held change (the event moves; the invitation rule mails REQUEST with the raised SEQUENCE to
every attendee); refusing it mails the proposer a DECLINECOUNTER.

A COUNTER is dropped on record, never offered, when its UID names no event the user organizes
(`unknown_event`), when its sender is not an attendee of that event speaking for themselves
(`not_an_attendee`), when it is about a whole series (`series_counter`: a series' time is moved
by the user's own words), or when it proposes the time the event already has (`same_time`).

At confirmation the offer is bound like any held change (§15): if the event changed since, or
something now stands where it would go, nothing moves and the proposal is offered again against
the event as it now is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from icalendar import Component

from calagent.commands.changes import Changes
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.payloads import AskedField, ChangeAfter, HeldChange
from calagent.commands.domain.pending import Ask, shown_conflicts
from calagent.commands.domain.people import normal_address
from calagent.commands.domain.series import occurrence_id
from calagent.commands.ical.attendees import attendees_of
from calagent.commands.ical.components import sequence_of
from calagent.commands.ical.parse import component_span
from calagent.commands.ical.zones import utc_instant
from calagent.commands.offers import Offers
from calagent.commands.pending import Pending
from calagent.commands.people import imip
from calagent.commands.people.attendees import AttendeeRules
from calagent.commands.people.sending import queue_one
from calagent.commands.placing import Placing
from calagent.commands.targets import Target, find
from calagent.commands.txn import Txn, error_result
from calagent.commands.views import event_out, stub_out
from calagent.contracts.commands import ChangeOut, CommandResult
from calagent.contracts.people import Attendee, CounterOut, InboundVerdict

# What a counter-proposal asks to change of the event: its time only.
COUNTER_ASKS: tuple[AskedField, ...] = ("date", "duration", "time")


@dataclass(frozen=True)
class Refused:
    """Why a COUNTER is not offered (on record as the message's reason)."""

    reason: str


def counter_of(
    component: Component, sender: str, event: Event | None, mailbox: str | None, fallback_tz: ZoneInfo
) -> CounterOut | Refused:
    """The proposal a COUNTER's VEVENT makes, judged against the event its UID names as the user's
    calendar holds it (`event`: the single event or the series' master; None when there is none)
    and the user's private address (`mailbox`, the ORGANIZER of what the user organizes)."""
    if event is None or mailbox is None or normal_address(event.organizer or "") != normal_address(mailbox):
        return Refused("unknown_event")
    speaks = any(normal_address(a.email) == sender for a in attendees_of(component))
    invited = any(normal_address(a.email) == sender for a in event.attendees)
    if not speaks or not invited:
        return Refused("not_an_attendee")
    recurrence_id: datetime | None = None
    if "RECURRENCE-ID" in component:
        recurrence_id = utc_instant(component.decoded("RECURRENCE-ID"), fallback_tz)
    elif event.rrule is not None:
        return Refused("series_counter")
    start, end, all_day = component_span(component, fallback_tz)
    return CounterOut(
        uid=str(component["UID"]),
        proposer=sender,
        start=start,
        end=end,
        event_id=event.id,
        sequence=sequence_of(component),
        recurrence_id=recurrence_id,
        all_day=all_day,
    )


class Counters:
    def __init__(
        self, pending: Pending, changes: Changes, offers: Offers, placing: Placing, people: AttendeeRules
    ) -> None:
        self.pending = pending
        self.changes = changes
        self.offers = offers
        self.placing = placing
        self.people = people

    async def receive(
        self, txn: Txn, component: Component, sender: str, *, sender_known: bool
    ) -> InboundVerdict:
        """A COUNTER received: offered as a held move waiting beside the conversation, or dropped
        with its reason."""
        rows = await txn.uow.events.events_by_uid(txn.user_id, str(component["UID"]))
        owner = next((r for r in rows if r.series_id is None), None)
        mailbox = await txn.uow.people.mailbox(txn.user_id)
        counter = counter_of(component, sender, owner, mailbox, txn.tz)
        if isinstance(counter, Refused):
            return InboundVerdict(verdict="dropped", reason=counter.reason)
        counter = counter.model_copy(update={"sender_known": sender_known})
        offer = await self._offer(txn, counter)
        if isinstance(offer, Refused):
            return InboundVerdict(verdict="dropped", reason=offer.reason)
        stub = await self.pending.from_outside(txn, offer, "change")
        verdict = "waiting" if stub.waiting_since is not None else "offered"
        return InboundVerdict(verdict=verdict, command_id=stub.id)

    async def _target(self, txn: Txn, counter: CounterOut) -> Target | None:
        if counter.recurrence_id is None:
            return await find(txn, counter.event_id)
        return await find(txn, occurrence_id(counter.event_id, counter.recurrence_id))

    async def _offer(self, txn: Txn, counter: CounterOut) -> Ask | Refused:
        """The held move the proposal is, against the event as it now is."""
        target = await self._target(txn, counter)
        if target is None:
            return Refused("unknown_event")
        current = target.occurrence
        if (current.start, current.end) == (counter.start, counter.end):
            return Refused("same_time")
        moved = current.evolve(start=counter.start, end=counter.end, all_day=counter.all_day)
        conflicts = await self.placing.conflicts(
            txn,
            moved.start,
            moved.end,
            moved.all_day,
            ignore_ids=frozenset({current.id, target.row.id}),
        )
        change = HeldChange(
            view=ChangeOut(
                action="update",
                scope="this",
                before=event_out(current, txn.tz),
                after=event_out(moved, txn.tz),
            ),
            action="update",
            scope="this",
            row_id=target.row.id,
            master_id=target.master.id if target.master else None,
            occurrence_start=target.occurrence_start,
            after=ChangeAfter.of(moved, COUNTER_ASKS),
            counter=counter,
        )
        # Bound to the event as it is now (§15): a confirmation after it changed offers it again.
        change = change.model_copy(update={"version": await self.offers.version(txn, change)})
        return Ask(
            title=current.title,
            hold_reason="counter_received",
            requested_hold="counter_received",
            conflict_event_ids=shown_conflicts(conflicts),
            proposed_start=moved.start,
            proposed_end=moved.end,
            payload=change,
            recipients=await self.people.invited(txn, target.row, target.master),
        )

    async def check(self, txn: Txn, stub: Stub) -> CommandResult | None:
        """None when the proposal still says what confirming it does; else, with nothing
        written, the proposal offered again against the event as it now is (or, the event gone,
        ended)."""
        change = stub.payload
        if not isinstance(change, HeldChange) or change.counter is None:
            return None
        if await self.offers.stands(txn, stub, change):
            return None
        again = await self._offer(txn, change.counter)
        if isinstance(again, Refused):
            await self.pending.store(txn, self.pending.of(stub).cancel(txn.now))
            return error_result("not_found", "the event this proposal was for is no longer there")
        offered = await self.pending.store(txn, self.pending.of(stub).ask("held", again, txn.now))
        shown = await txn.uow.events.events_by_ids(txn.user_id, list(again.conflict_event_ids))
        return CommandResult(status="held", stub=stub_out(offered, shown, txn.tz), reoffered=True)

    async def decline(self, txn: Txn, stub: Stub) -> CommandResult:
        """The user turns the proposal down: the proposer gets a DECLINECOUNTER, the event stays."""
        change = stub.payload
        assert isinstance(change, HeldChange) and change.counter is not None
        counter = change.counter
        mailbox = await txn.uow.people.mailbox(txn.user_id)
        if mailbox is not None:
            body = imip.declinecounter_body(
                uid=counter.uid,
                sequence=counter.sequence,
                organizer=mailbox,
                proposer=counter.proposer,
                stamp=txn.now,
                summary=stub.title,
                recurrence_id=counter.recurrence_id,
            )
            mail = imip.one_mail(
                body,
                method="DECLINECOUNTER",
                uid=counter.uid,
                sequence=counter.sequence,
                sender=mailbox,
                recipient=Attendee(email=counter.proposer),
                stamp=txn.now,
                summary=stub.title,
                # Each proposal declined is its own message, even two for the same version.
                answer=stub.id,
            )
            await queue_one(txn, mailbox, counter.uid, mail)
        done = await self.pending.store(txn, self.pending.of(stub).cancel(txn.now))
        return CommandResult(status="cancelled", stub=stub_out(done, (), txn.tz))


def is_counter(stub: Stub) -> bool:
    return isinstance(stub.payload, HeldChange) and stub.payload.counter is not None
