"""The assistant's own mailbox (contract §16): what a message to a private address becomes.

A message is acted on once (its Message-ID is recorded per user before anything else). Forwarded
mail is acted on only when it comes from someone the user knows (the user's own address or a
contact), an iMIP REPLY only from the attendee it speaks for, on an event the user organizes; an
invitation from someone not in the contacts is offered marked as such (§19: a held offer does
nothing without the user), unless the user's settings say `invitations_from: known`. Everything
else is dropped with its reason on record (`inbound_mail`) and never becomes a write.

- REQUEST / CANCEL from the organizer → a held offer (a stub of kind `invitation`): nothing is
  added, removed or answered until the user says so (`InvitationAnswers.answer`). While another
  request waits for the user, the offer waits on its record and comes up when that one ends.
- REPLY → that attendee's PARTSTAT on the event; it mails nobody.
- COUNTER from an attendee → a held move of the event (`counters.py`), waiting beside the
  conversation like an invitation.
- an answer to the user's proposal of times (it names the proposal's mail) → a held booking
  (`proposing.py`), or a turn when it names no one slot.
- anything else → a turn on channel `email` (the gateway runs it; its content is third-party).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from icalendar import Calendar, Component

from calagent.commands.domain.calendars import pick_calendar
from calagent.commands.domain.model import Stub
from calagent.commands.domain.payloads import HeldInvitation
from calagent.commands.domain.pending import Ask
from calagent.commands.domain.people import normal_address
from calagent.commands.domain.settings import StoredSettings
from calagent.commands.domain.timeutil import zone
from calagent.commands.ical.attendees import address_of, attendees_of
from calagent.commands.ical.components import sequence_of, speaking
from calagent.commands.ical.parse import parse_resource
from calagent.commands.ical.zones import sender_zone
from calagent.commands.outside import still_refused
from calagent.commands.pending import Pending
from calagent.commands.people import imip
from calagent.commands.people.sending import queue_one
from calagent.commands.placing import Placing
from calagent.commands.ports import Store, UnitOfWork, UserDirectory
from calagent.commands.txn import Txn, new_id
from calagent.commands.views import event_out, in_zone, stub_out
from calagent.contracts.commands import CommandResult
from calagent.contracts.envelope import Envelope
from calagent.contracts.people import (
    Attendee,
    InboundVerdict,
    InvitationAnswer,
    InvitationOut,
    ReceiveMail,
)
from calagent.contracts.settings import InvitationsFrom
from calagent.runtime.clock import Clock


class SettingsDirectory:
    """The user's settings (`PUT /v1/settings`): their own address and zone, when saved, and whose
    invitations they are offered."""

    async def own_address(self, uow: UnitOfWork, user_id: str) -> str | None:
        saved = (await uow.settings.settings_of([user_id])).get(user_id)
        return saved.email if saved is not None else None

    async def zone(self, uow: UnitOfWork, user_id: str) -> str | None:
        saved = (await uow.settings.settings_of([user_id])).get(user_id)
        return saved.tz if saved is not None else None

    async def invitations_from(self, uow: UnitOfWork, user_id: str) -> InvitationsFrom:
        return (await uow.settings.settings_of([user_id])).get(user_id, StoredSettings()).invitations()


class CounterOffers(Protocol):
    """What becomes of an attendee's COUNTER (`counters.Counters`): a held move, or dropped."""

    async def receive(
        self, txn: Txn, component: Component, sender: str, *, sender_known: bool
    ) -> InboundVerdict: ...


class ProposalAnswers(Protocol):
    """What becomes of an answer to the user's proposal of times (`proposing.Proposing`): a held
    booking, a turn, dropped — or None when the mail answers no proposal of the user's."""

    async def answer(
        self, txn: Txn, mail: ReceiveMail, component: Component | None, method: str | None, sender: str
    ) -> InboundVerdict | None: ...


def _dropped(reason: str, user_id: str | None = None) -> InboundVerdict:
    return InboundVerdict(verdict="dropped", reason=reason, user_id=user_id)


class Inbox:
    def __init__(
        self,
        store: Store,
        answers: InvitationAnswers,
        counters: CounterOffers,
        proposals: ProposalAnswers,
        clock: Clock,
        directory: UserDirectory,
        default_tz: str,
    ) -> None:
        self.store = store
        self.answers = answers
        self.counters = counters
        self.proposals = proposals
        self.clock = clock
        self.directory = directory
        self.default_tz = default_tz

    async def owner(self, address: str) -> str | None:
        async with self.store.unit_of_work() as uow:
            return await uow.people.mailbox_owner(address)

    async def receive(self, mail: ReceiveMail) -> InboundVerdict:
        async with self.store.unit_of_work() as uow:
            user_id = await uow.people.mailbox_owner(mail.recipient)
            if user_id is None:
                return _dropped("unknown_recipient")
            record = await uow.people.claim_inbound(
                user_id, mail.message_id, mail.mail_from[:254], mail.received_at
            )
            if record is None:
                await uow.commit()
                return InboundVerdict(verdict="duplicate", user_id=user_id)
            await uow.lock_user(user_id)
            tz = await self.directory.zone(uow, user_id) or self.default_tz
            now = self.clock.now()
            envelope = Envelope(
                turn_id=f"mail-{record}",
                user_id=user_id,
                conversation_id="default",
                occurred_at=now,
                tz=tz,
                channel="email",
            )
            txn = Txn(uow, envelope, f"mail-{record}", zone(tz), now)
            try:
                method, verdict = await self._judge(txn, mail)
                if isinstance(verdict, HeldInvitation):
                    verdict = await self.answers.place(txn, verdict)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                # An object icalendar reads but that is no event we can take (no DTSTART, …): on
                # record, not retried (the sender's retry would fail the same way).
                method, verdict = None, _dropped(f"unreadable_event: {type(exc).__name__}")
            await uow.people.settle_inbound(record, verdict.verdict, verdict.reason, method)
            await uow.commit()
            return verdict.model_copy(update={"user_id": user_id, "tz": tz})

    async def _judge(self, txn: Txn, mail: ReceiveMail) -> tuple[str | None, InboundVerdict | HeldInvitation]:
        if mail.defect is not None:
            return None, _dropped(mail.defect)
        sender = normal_address(mail.from_address or "")
        cal: Calendar | None = None
        if mail.calendar is not None:
            try:
                cal = Calendar.from_ical(mail.calendar)
            except ValueError:
                return None, _dropped("unparseable_calendar")
        method = str(cal.get("METHOD", "")).upper() if cal is not None else None
        master = speaking(cal) if cal is not None else None
        if cal is not None and (master is None or "UID" not in master):
            return method, _dropped("no_event")
        if mail.in_reply_to:
            # An answer to the user's proposal of times, from the person asked.
            answered = await self.proposals.answer(txn, mail, master, method, sender)
            if answered is not None:
                return method, answered
        if method == "REPLY" and master is not None:
            replied = await self._reply(txn, sender, master)
            if replied.verdict == "replied":
                await self._note_zone(txn, sender, master)
            return method, replied
        own = await self.directory.own_address(txn.uow, txn.user_id)
        known = {normal_address(c.email) for c in await txn.uow.people.contacts(txn.user_id)}
        is_user = own is not None and sender == normal_address(own)
        sender_known = is_user or sender in known
        if method == "COUNTER" and master is not None:
            # An attendee speaks for themselves on an event the user organizes, like a REPLY:
            # whether they are an attendee is the rule, not whether they are a contact.
            countered = await self.counters.receive(txn, master, sender, sender_known=sender_known)
            if countered.verdict != "dropped":
                await self._note_zone(txn, sender, master)
            return method, countered
        # Someone not in the contacts may only invite (a held offer, marked), and only when the
        # user takes invitations from everyone; their other mail is never acted on.
        invitation = cal is not None and method in ("REQUEST", "CANCEL")
        if not sender_known and not (
            invitation and await self.directory.invitations_from(txn.uow, txn.user_id) == "everyone"
        ):
            return method, _dropped("unknown_sender")
        if cal is None or master is None:
            return None, InboundVerdict(verdict="turn")
        if method not in ("REQUEST", "CANCEL"):
            return method, _dropped("unsupported_method")
        organizer = normal_address(address_of(master.get("ORGANIZER")) or "")
        # The organizer speaks for the meeting; the user may pass on an invitation they received.
        if organizer != sender and not is_user:
            return method, _dropped("not_the_organizer")
        mailbox = await txn.uow.people.mailbox(txn.user_id) or ""
        mine = {normal_address(mailbox), normal_address(own or mailbox)}
        me = next((a for a in attendees_of(master) if normal_address(a.email) in mine), None)
        if me is None:
            return method, _dropped("not_invited")
        verdict = await self._offer(txn, cal, master, method, organizer, me)
        if isinstance(verdict, HeldInvitation) and not sender_known:
            marked = verdict.invitation.model_copy(update={"sender_known": False})
            verdict = verdict.model_copy(update={"invitation": marked})
        return method, verdict

    async def _note_zone(self, txn: Txn, sender: str, master: Component) -> None:
        """The zone an attendee's answer was written in: the one a proposal to them uses (§20)."""
        named = sender_zone(master)
        if named is not None:
            await txn.uow.people.note_zone(txn.user_id, sender, named, txn.now)

    async def _reply(self, txn: Txn, sender: str, master: Component) -> InboundVerdict:
        """An attendee's answer to an event the user organizes: their PARTSTAT, mailing nobody."""
        rows = await txn.uow.events.events_by_uid(txn.user_id, str(master["UID"]))
        mailbox = await txn.uow.people.mailbox(txn.user_id)
        owner = rows[0] if rows else None
        if (
            owner is None
            or mailbox is None
            or normal_address(owner.organizer or "") != normal_address(mailbox)
        ):
            return _dropped("unknown_event")
        answers = [a for a in attendees_of(master) if normal_address(a.email) == sender]
        if not answers or sender not in {normal_address(a.email) for a in owner.attendees}:
            return _dropped("not_an_attendee")
        status = answers[0].status
        txn.uow.people.quiet_people()
        for row in rows:
            if not any(normal_address(a.email) == sender for a in row.attendees):
                continue
            people = tuple(
                a.model_copy(update={"status": status}) if normal_address(a.email) == sender else a
                for a in row.attendees
            )
            await txn.uow.events.update_event(row.evolve(attendees=people))
        return InboundVerdict(verdict="replied")

    async def _offer(
        self, txn: Txn, cal: Calendar, master: Component, method: str, organizer: str, me: Attendee
    ) -> InboundVerdict | HeldInvitation:
        uid = str(master["UID"])
        # Read before anything is written: an object that is no event we can take fails here.
        parsed = parse_resource(
            mail_text(cal), master_id=new_id(), user_id=txn.user_id, calendar="", fallback_tz=txn.tz
        )[0]
        offer = InvitationOut(
            method="CANCEL" if method == "CANCEL" else "REQUEST",
            uid=uid,
            sequence=sequence_of(master),
            organizer=organizer,
            title=parsed.title,
            start=parsed.start,
            end=parsed.end,
            attendees=parsed.attendees,
        )
        refused = await still_refused(txn.uow, txn.user_id, offer)
        if refused is not None:
            return _dropped(refused)
        # An invitation that passed every check, as its stub keeps it.
        return HeldInvitation(invitation=offer, ical=mail_text(cal), attendee=me.email)


def mail_text(cal: Calendar) -> str:
    return bytes(cal.to_ical()).decode("utf-8")


class InvitationAnswers:
    """Invitation offers: placed as the user's held stub (or waiting their turn), and the user's
    answer: the event added (accepted, tentative), left out or taken away (declined, a confirmed
    CANCEL), and for a REQUEST the REPLY to the organizer, queued in the same transaction through
    the mail outbox."""

    def __init__(self, pending: Pending, placing: Placing) -> None:
        self.pending = pending
        self.placing = placing

    async def place(self, txn: Txn, offer: HeldInvitation) -> InboundVerdict:
        """The offer as the user's held stub, or, while another request waits for the user (their
        own, or an earlier offer), waiting beside it (`Pending.from_outside`)."""
        invitation = offer.invitation
        rows = await txn.uow.events.events_by_uid(txn.user_id, invitation.uid)
        shown = in_zone(invitation, txn.tz).model_copy(update={"event_id": rows[0].id if rows else None})
        ask = Ask(
            title=invitation.title,
            hold_reason="invitation_received",
            requested_hold="invitation_received",
            proposed_start=invitation.start,
            proposed_end=invitation.end,
            payload=offer.model_copy(update={"invitation": shown}),
        )
        stub = await self.pending.from_outside(txn, ask, "invitation")
        verdict = "waiting" if stub.waiting_since is not None else "offered"
        return InboundVerdict(verdict=verdict, command_id=stub.id)

    async def answer(self, txn: Txn, stub: Stub, partstat: InvitationAnswer) -> CommandResult:
        held = stub.payload
        if not isinstance(held, HeldInvitation):
            return CommandResult(status="error")
        offer = held.invitation
        rows = await txn.uow.events.events_by_uid(txn.user_id, offer.uid)
        current = rows[0] if rows else None
        if offer.method == "CANCEL":
            if partstat == "DECLINED" or current is None:
                done = await self.pending.store(txn, self.pending.of(stub).cancel(txn.now))
                return CommandResult(status="cancelled", stub=stub_out(done, (), txn.tz))
            await txn.uow.events.delete_events(txn.user_id, [r.id for r in rows])
            done = await self.pending.store(txn, self.pending.of(stub).finish("deleted", txn.now))
            return CommandResult(
                status="deleted",
                persisted=True,
                before=event_out(current, txn.tz),
                stub=stub_out(done, (), txn.tz),
            )
        received = Calendar.from_ical(held.ical)
        attendee = held.attendee
        await self._reply(txn, received, attendee, offer.organizer, partstat)
        if partstat == "DECLINED":
            if current is not None:
                await txn.uow.events.delete_events(txn.user_id, [r.id for r in rows])
            done = await self.pending.store(txn, self.pending.of(stub).cancel(txn.now))
            return CommandResult(
                status="cancelled", persisted=current is not None, stub=stub_out(done, (), txn.tz)
            )
        kept = _answered(received, attendee, partstat)
        calendars = await self.placing.calendars(txn)
        calendar = current.calendar if current is not None else pick_calendar(None, calendars)[0]
        master_id = current.id if current is not None else new_id()
        new_rows = parse_resource(
            kept, master_id=master_id, user_id=txn.user_id, calendar=calendar, fallback_tz=txn.tz
        )
        before = event_out(current, txn.tz) if current is not None else None
        if rows:
            await txn.uow.events.delete_events(txn.user_id, [r.id for r in rows])
        for row in new_rows:
            # One command key writes one event (`uq_events_user_key`): the master carries it, its
            # overrides are rows of that event and carry none, as a series change writes them.
            key = txn.key if row.id == master_id else None
            await txn.uow.events.insert_event(row, turn_id=txn.envelope.turn_id, key=key)
        status: Literal["created", "updated"] = "updated" if current is not None else "created"
        done = await self.pending.store(txn, self.pending.of(stub).finish(status, txn.now))
        return CommandResult(
            status=status,
            persisted=True,
            before=before,
            event=event_out(new_rows[0], txn.tz),
            stub=stub_out(done, (), txn.tz),
        )

    async def _reply(
        self, txn: Txn, received: Calendar, attendee: str, organizer: str, partstat: InvitationAnswer
    ) -> None:
        mailbox = await txn.uow.people.mailbox(txn.user_id)
        if mailbox is None:
            return
        body = imip.reply_body(received, attendee, partstat, txn.now)
        master = speaking(received)
        assert master is not None
        uid = str(master["UID"])
        # The answer is part of the id: a changed answer to the same version is another message.
        mail = imip.one_mail(
            body,
            method="REPLY",
            uid=uid,
            sequence=sequence_of(master),
            sender=mailbox,
            recipient=Attendee(email=organizer),
            stamp=txn.now,
            summary=imip.summary_of(received),
            answer=partstat,
        )
        await queue_one(txn, mailbox, uid, mail)


def _answered(received: Calendar, attendee: str, partstat: str) -> str:
    """The invitation as the user's calendar keeps it: no METHOD (a stored object is not a
    message), the organizer's UID, ORGANIZER and ATTENDEEs as sent, the user's own answer set."""
    kept = Calendar.from_ical(mail_text(received))
    kept.pop("METHOD", None)
    for component in kept.walk("VEVENT"):
        for prop in _attendee_props(component):
            if normal_address(address_of(prop) or "") == normal_address(attendee):
                prop.params["PARTSTAT"] = partstat
                prop.params.pop("RSVP", None)
    return mail_text(kept)


def _attendee_props(component: Component) -> list[Any]:
    raw = component.get("ATTENDEE")
    if raw is None:
        return []
    return list(raw) if isinstance(raw, list) else [raw]
