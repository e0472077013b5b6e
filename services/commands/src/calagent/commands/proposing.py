"""Proposing times to someone outside (contract §20).

- **Propose** (`propose_times`): up to three free times in the range (the suggestion's own rules,
  the attendee counted as a suggestion counts them), in time order, held as an offer of kind
  `proposal` (`sends_invitations`: confirming mails someone). Nothing is on the calendar or sent.
- **Send** (its confirmation): each slot still free is held as a tentative event of the user's
  (STATUS:TENTATIVE, TRANSP:OPAQUE — the time is kept, a later suggestion offers it only below
  free time), one plain-text mail lists them (`people/proposal_mail.py`), and the proposal is kept
  (`proposals`) with its mail's Message-ID. A slot something busy now stands on is left out.
- **The answer**: mail from the attendee naming that Message-ID (In-Reply-To, References). Its
  words are someone else's: read by code for the one slot they name (the time service's
  `calagent.time.choose_slot`, one request per such mail), never by the model as instructions; an iMIP REPLY or COUNTER in the thread names its slot by DTSTART.
  One slot named → a held booking offer (kind `booking`) waiting beside the conversation like an
  invitation; none or several → the mail becomes a turn (third-party content) for the user.
- **Book** (the booking's confirmation): the event is created with the attendee, every hold of
  the proposal released, and the invitation rule mails the REQUEST at commit. A booking confirmed
  after something new stands on its slot is offered again, showing it, with nothing written.

The attendee's zone, when it is honestly known: the saved zone of a user here who shares their
free/busy with the user (`settings`), else the zone the attendee's last REPLY or COUNTER named in
its DTSTART's TZID (`reply`, `attendee_zones`). Otherwise the mail says it is not known.
"""

from __future__ import annotations

from icalendar import Component

from calagent.commands.domain.freetime import shows_as
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.payloads import HeldBooking, HeldProposal
from calagent.commands.domain.pending import Ask, shown_conflicts, strongest
from calagent.commands.domain.people import SentProposal, Unresolved, normal_address, resolve_one
from calagent.commands.domain.timeutil import InvalidZoneError, zone
from calagent.commands.ical.attendees import attendees_of
from calagent.commands.ical.parse import component_span
from calagent.commands.pending import Pending
from calagent.commands.people import imip, proposal_mail
from calagent.commands.people.sending import queue_one
from calagent.commands.placing import Placing
from calagent.commands.queries import Queries
from calagent.commands.txn import Txn, error_result, new_id
from calagent.commands.views import event_out, stub_out
from calagent.contracts.commands import CommandResult, ProposeTimesCommand
from calagent.contracts.people import InboundVerdict, ProposalOut, ProposedSlot, ReceiveMail, ZoneSource
from calagent.contracts.queries import QueryResult, SuggestFree
from calagent.contracts.time import ChooseSlotRequest

PROPOSED_SLOTS = 3


class Proposing:
    def __init__(self, pending: Pending, placing: Placing, queries: Queries) -> None:
        self.pending = pending
        self.placing = placing
        self.queries = queries

    # ---- propose: the offer -----------------------------------------------------------------------

    async def propose(self, txn: Txn, command: ProposeTimesCommand) -> CommandResult:
        args = command.args
        who = resolve_one(args.attendee, await txn.uow.people.contacts(txn.user_id))
        if isinstance(who, Unresolved):
            return error_result(
                "invalid_arguments",
                f"{args.attendee!r} names no single contact: ask the user for the person's e-mail address",
            )
        bounds = await self.queries.window(txn.envelope, args.start, args.end)
        if isinstance(bounds, QueryResult):
            assert bounds.error is not None
            return error_result(bounds.error.code, bounds.error.message)
        query = SuggestFree(
            envelope=txn.envelope,
            start_symbol=args.start,
            end_symbol=args.end,
            duration_minutes=args.duration_minutes,
            max_suggestions=PROPOSED_SLOTS,
            attendees=(who.email,),
        )
        found = await self.queries.suggested(txn.uow, query, bounds, txn.tz)
        if not found.free_slots:
            return error_result("no_free_time", f"no time to propose: {found.empty_reason}")
        tz, source = await self._zone(txn, who.email)
        slots = sorted(found.free_slots, key=lambda s: s.start)
        proposal = ProposalOut(
            id=new_id(),
            title=args.title,
            attendee=who,
            duration_minutes=args.duration_minutes,
            slots=tuple(ProposedSlot(start=s.start, end=s.end) for s in slots),
            attendee_tz=tz,
            zone_source=source,
        )
        way = await self.pending.make_way(txn, command.hold, await self.pending.active(txn))
        if way.kept is not None:
            return CommandResult(status="held", kept=stub_out(way.kept, (), txn.tz))
        ask = Ask(
            title=args.title,
            hold_reason=strongest((command.hold, "sends_invitations")),
            requested_hold=command.hold,
            proposed_start=proposal.slots[0].start,
            proposed_end=proposal.slots[0].end,
            payload=HeldProposal(proposal=proposal),
            recipients=(who,),
        )
        stub = await self.pending.open(txn, "held", ask, kind="proposal")
        return CommandResult(status="held", stub=stub_out(stub, (), txn.tz), superseded=way.superseded)

    async def _zone(self, txn: Txn, address: str) -> tuple[str | None, ZoneSource | None]:
        """The attendee's zone when it is known, and how."""
        sharers = {entry.user for entry in (await txn.uow.settings.sharing_of(txn.user_id))[1]}
        owners = (await txn.uow.settings.users_with_email([address])).get(address.casefold(), [])
        users = [u for u in owners if u != txn.user_id]
        if len(users) == 1 and users[0] in sharers:
            saved = (await txn.uow.settings.settings_of(users)).get(users[0])
            if saved is not None and saved.tz and _valid_zone(saved.tz):
                return saved.tz, "settings"
        noted = await txn.uow.people.zone_of(txn.user_id, address)
        if noted is not None and _valid_zone(noted):
            return noted, "reply"
        return None, None

    # ---- send: the confirmation -------------------------------------------------------------------

    async def send(self, txn: Txn, stub: Stub) -> CommandResult:
        """The proposal sent, with tentative holds written for its times (events in the user's
        time like any other: blocks under them are offered a re-plan, `tasks/replans.py`)."""
        held = stub.payload
        assert isinstance(held, HeldProposal)
        proposal = held.proposal
        # A slot something busy now stands on is not offered: it was free when the user saw it.
        free = [slot for slot in proposal.slots if not await self._busy(txn, slot, frozenset())]
        if not free:
            return error_result("no_free_time", "none of the proposed times is free any more")
        proposal = proposal.model_copy(update={"slots": tuple(free)})
        mailbox = await self.placing.organizer(txn)
        calendar = (await self.placing.calendars(txn))[0]
        holds: list[Event] = []
        for number, slot in enumerate(proposal.slots):
            hold = Event(
                id=new_id(),
                user_id=txn.user_id,
                title=proposal.title,
                start=slot.start,
                end=slot.end,
                calendar=calendar,
                tz=txn.tz.key,
                notes=f"Proposed to {proposal.attendee.email}: held until they choose",
                tentative=True,
            )
            # One command key writes one event (`uq_events_user_key`): the first hold carries it.
            stored = await txn.uow.events.insert_event(
                hold, turn_id=txn.envelope.turn_id, key=txn.key if number == 0 else None
            )
            holds.append(stored)
        msg_id = proposal_mail.message_id(proposal.id, mailbox.rpartition("@")[2])
        text = proposal_mail.render(
            proposal, sender=mailbox, msg_id=msg_id, stamp=txn.now, mine=txn.tz, lang=txn.envelope.lang
        )
        uid = f"proposal-{proposal.id}"
        await queue_one(txn, mailbox, uid, imip.Mail("PROPOSAL", 0, proposal.attendee.email, msg_id, text))
        await txn.uow.people.insert_proposal(
            txn.user_id,
            SentProposal(proposal=proposal, hold_ids=tuple(h.id for h in holds), message_id=msg_id),
            txn.now,
        )
        done = self.pending.of(stub).bound(HeldProposal(proposal=proposal))
        done = await self.pending.store(txn, self.pending.of(done).finish("created", txn.now))
        return CommandResult(status="created", persisted=True, stub=stub_out(done, (), txn.tz))

    async def _busy(self, txn: Txn, slot: ProposedSlot, ignore: frozenset[str]) -> tuple[Event, ...]:
        met = await self.placing.conflicts(txn, slot.start, slot.end, False, ignore_ids=ignore)
        return tuple(e for e in met if shows_as(e) == "busy")

    # ---- the answer: a booking offer --------------------------------------------------------------

    async def answer(
        self, txn: Txn, mail: ReceiveMail, component: Component | None, method: str | None, sender: str
    ) -> InboundVerdict | None:
        """What the attendee's answer to a proposal becomes; None when the mail answers none of the
        user's open proposals (or is not from the person asked): it is judged like any other."""
        sent = await txn.uow.people.proposal_answered(txn.user_id, mail.in_reply_to)
        if sent is None or normal_address(sent.proposal.attendee.email) != sender:
            return None
        proposal = sent.proposal
        if component is not None:
            if method not in ("REPLY", "COUNTER"):
                return None
            answers = [a for a in attendees_of(component) if normal_address(a.email) == sender]
            if method == "REPLY" and (not answers or answers[0].status not in ("ACCEPTED", "TENTATIVE")):
                # A REPLY that does not accept a slot chooses none.
                return InboundVerdict(verdict="dropped", reason="not_a_proposed_time")
            start, end, _all_day = component_span(component, txn.tz)
            chosen = next((i for i, s in enumerate(proposal.slots) if (s.start, s.end) == (start, end)), None)
            if chosen is None:
                return InboundVerdict(verdict="dropped", reason="not_a_proposed_time")
        else:
            zones = [proposal.attendee_tz] if proposal.attendee_tz else []
            asked = ChooseSlotRequest(
                text=mail.body or "",
                starts=tuple(s.start for s in proposal.slots),
                zones=(*zones, txn.tz.key),
            )
            chosen = (await self.queries.time.choose_slot(asked)).index
            if chosen is None:
                # Names no one slot: the user reads it (a turn whose every word is third-party).
                return InboundVerdict(verdict="turn")
        slot = proposal.slots[chosen]
        met = await self._busy(txn, slot, frozenset(sent.hold_ids))
        ask = Ask(
            title=proposal.title,
            hold_reason="sends_invitations",
            requested_hold="sends_invitations",
            conflict_event_ids=shown_conflicts(met),
            proposed_start=slot.start,
            proposed_end=slot.end,
            payload=HeldBooking(proposal=proposal.model_copy(update={"chosen": chosen})),
            recipients=(proposal.attendee,),
        )
        stub = await self.pending.from_outside(txn, ask, "booking")
        verdict = "waiting" if stub.waiting_since is not None else "offered"
        return InboundVerdict(verdict=verdict, command_id=stub.id)

    # ---- book: the booking's confirmation ----------------------------------------------------------

    async def book(self, txn: Txn, stub: Stub) -> CommandResult:
        held = stub.payload
        assert isinstance(held, HeldBooking)
        proposal, slot = held.proposal, held.slot
        sent = await txn.uow.people.get_proposal(txn.user_id, proposal.id)
        if sent is None or sent.booked is not None:
            await self.pending.store(txn, self.pending.of(stub).cancel(txn.now))
            return error_result("not_found", "that proposal was booked already")
        met = await self._busy(txn, slot, frozenset(sent.hold_ids))
        if not set(shown_conflicts(met)) <= set(stub.conflict_event_ids):
            # Something new stands on the time since it was offered: shown, nothing written.
            again = Ask(
                title=stub.title,
                hold_reason=stub.hold_reason,
                requested_hold=stub.requested_hold,
                conflict_event_ids=shown_conflicts(met),
                proposed_start=slot.start,
                proposed_end=slot.end,
                payload=held,
                recipients=stub.recipients,
            )
            offered = await self.pending.store(txn, self.pending.of(stub).ask("held", again, txn.now))
            return CommandResult(status="held", stub=stub_out(offered, met, txn.tz), reoffered=True)
        await txn.uow.events.delete_events(txn.user_id, list(sent.hold_ids))
        event = Event(
            id=new_id(),
            user_id=txn.user_id,
            title=proposal.title,
            start=slot.start,
            end=slot.end,
            calendar=(await self.placing.calendars(txn))[0],
            tz=txn.tz.key,
            attendees=(proposal.attendee,),
            organizer=await self.placing.organizer(txn),
        )
        stored = await txn.uow.events.insert_event(event, turn_id=txn.envelope.turn_id, key=txn.key)
        await txn.uow.people.book_proposal(txn.user_id, proposal.id, stored.id, txn.now)
        done = await self.pending.store(txn, self.pending.of(stub).finish("created", txn.now))
        return CommandResult(
            status="created", persisted=True, event=event_out(stored, txn.tz), stub=stub_out(done, (), txn.tz)
        )


def _valid_zone(name: str) -> bool:
    try:
        zone(name)
    except InvalidZoneError:
        return False
    return True
