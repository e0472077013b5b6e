"""People (contract §16): contacts and address-book cards, the user's mailbox, received mail and
the mail outbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from calagent.commands.adapters.sql_core import SqlSession
from calagent.commands.adapters.tables import caldav_cards
from calagent.commands.adapters.tables_people import (
    attendee_zones,
    contacts,
    inbound_mail,
    mail_outbox,
    mailboxes,
    proposals,
)
from calagent.commands.domain.effects import Effects
from calagent.commands.domain.people import Contact, SentProposal, Told, normal_address
from calagent.contracts.people import Attendee, ProposalOut, ProposedSlot


class SqlPeople:
    """People's rows; the mail it queues is recorded in `effects`, to wake the outbox after commit."""

    def __init__(self, session: SqlSession, effects: Effects) -> None:
        self.session = session
        self.effects = effects

    async def contacts(self, user_id: str) -> list[Contact]:
        """The user's own contacts, then the cards of their connected address books."""
        rows = await self.session.run(
            select(contacts)
            .where(contacts.c.user_id == user_id)
            .order_by(contacts.c.created_at, contacts.c.id)
        )
        cards = await self.session.run(
            select(caldav_cards)
            .where(caldav_cards.c.user_id == user_id)
            .order_by(caldav_cards.c.name, caldav_cards.c.id)
        )
        return [
            Contact(id=r.id, name=r.name, email=r.email, aliases=tuple(r.aliases), created_at=r.created_at)
            for r in rows
        ] + [
            Contact(
                id=r.id,
                name=r.name,
                email=r.email,
                aliases=tuple(r.aliases),
                created_at=r.created_at,
                source="carddav",
            )
            for r in cards
        ]

    async def add_contact(self, user_id: str, contact: Contact) -> None:
        await self.session.run(
            contacts.insert().values(
                id=contact.id,
                user_id=user_id,
                name=contact.name,
                email=contact.email,
                aliases=list(contact.aliases),
                created_at=contact.created_at or func.now(),
            )
        )

    async def delete_contact(self, user_id: str, contact_id: str) -> bool:
        result = await self.session.run(
            contacts.delete().where(contacts.c.user_id == user_id, contacts.c.id == contact_id)
        )
        return bool(getattr(result, "rowcount", 0))

    async def mailbox(self, user_id: str, make: str | None = None, at: datetime | None = None) -> str | None:
        if make is not None:
            await self.session.run(
                pg_insert(mailboxes)
                .values(user_id=user_id, address=make, created_at=at or func.now())
                .on_conflict_do_nothing(index_elements=[mailboxes.c.user_id])
            )
        address = await self.session.run(select(mailboxes.c.address).where(mailboxes.c.user_id == user_id))
        found: str | None = address.scalar_one_or_none()
        return found

    async def mailbox_owner(self, address: str) -> str | None:
        found = await self.session.run(
            select(mailboxes.c.user_id).where(func.lower(mailboxes.c.address) == address.strip().lower())
        )
        owner: str | None = found.scalar_one_or_none()
        return owner

    async def claim_inbound(self, user_id: str, message_id: str, sender: str, at: datetime) -> int | None:
        """The record of one received message, or None when this Message-ID was received before
        (a concurrent delivery of the same message waits here for the first to commit)."""
        result = await self.session.run(
            pg_insert(inbound_mail)
            .values(user_id=user_id, message_id=message_id, sender=sender, received_at=at, verdict="received")
            .on_conflict_do_nothing(constraint="uq_inbound_mail_message")
            .returning(inbound_mail.c.id)
        )
        claimed: int | None = result.scalar_one_or_none()
        return claimed

    async def settle_inbound(
        self, record_id: int, verdict: str, reason: str | None, method: str | None
    ) -> None:
        await self.session.run(
            update(inbound_mail)
            .where(inbound_mail.c.id == record_id)
            .values(verdict=verdict, reason=reason, method=method)
        )

    async def queue_mail(
        self, user_id: str, sender: str, mails: Sequence[tuple[str, Any]], carrier: dict[str, str]
    ) -> None:
        """iMIP messages into the mail outbox; one already queued (same Message-ID) stays once."""
        await self.session.run(
            pg_insert(mail_outbox)
            .values(
                [
                    {
                        "user_id": user_id,
                        "event_uid": uid,
                        "method": mail.method,
                        "sequence": mail.sequence,
                        "sender": sender,
                        "recipient": mail.recipient,
                        "message_id": mail.message_id,
                        "message": mail.text,
                        "trace_context": carrier,
                    }
                    for uid, mail in mails
                ]
            )
            .on_conflict_do_nothing(index_elements=[mail_outbox.c.message_id])
        )
        if mails:
            self.effects.mail_queued(user_id)

    async def last_told(self, user_id: str, uid: str) -> Told | None:
        """What the people of the event `uid` were last sent (None: nothing yet): one rule for
        the SEQUENCE of the next message, whatever write causes it."""
        found = (
            await self.session.run(
                select(
                    mail_outbox.c.sequence,
                    func.bool_and(mail_outbox.c.method == "CANCEL").label("cancelled"),
                )
                .where(
                    mail_outbox.c.user_id == user_id,
                    mail_outbox.c.event_uid == uid,
                    mail_outbox.c.method.in_(("REQUEST", "CANCEL")),
                )
                .group_by(mail_outbox.c.sequence)
                .order_by(mail_outbox.c.sequence.desc())
                .limit(1)
            )
        ).first()
        return Told(int(found.sequence), bool(found.cancelled)) if found is not None else None

    def quiet_people(self) -> None:
        self.effects.people_quieted()

    # ---- proposals of times (contract §20) ---------------------------------------------------------

    async def insert_proposal(self, user_id: str, sent: SentProposal, at: datetime) -> None:
        proposal = sent.proposal
        await self.session.run(
            proposals.insert().values(
                id=proposal.id,
                user_id=user_id,
                title=proposal.title,
                attendee=proposal.attendee.model_dump(mode="json"),
                duration_minutes=proposal.duration_minutes,
                slots=[
                    {"start": s.start.isoformat(), "end": s.end.isoformat(), "event_id": event_id}
                    for s, event_id in zip(proposal.slots, sent.hold_ids, strict=True)
                ],
                attendee_tz=proposal.attendee_tz,
                zone_source=proposal.zone_source,
                message_id=sent.message_id,
                state="open",
                created_at=at,
                updated_at=at,
            )
        )

    async def proposal_answered(self, user_id: str, message_ids: Sequence[str]) -> SentProposal | None:
        if not message_ids:
            return None
        found = (
            await self.session.run(
                select(proposals)
                .where(
                    proposals.c.user_id == user_id,
                    proposals.c.message_id.in_(list(message_ids)),
                    proposals.c.state == "open",
                )
                .order_by(proposals.c.created_at.desc())
                .limit(1)
            )
        ).first()
        return _sent(found) if found is not None else None

    async def get_proposal(self, user_id: str, proposal_id: str) -> SentProposal | None:
        found = (
            await self.session.run(
                select(proposals).where(proposals.c.user_id == user_id, proposals.c.id == proposal_id)
            )
        ).first()
        return _sent(found) if found is not None else None

    async def book_proposal(self, user_id: str, proposal_id: str, event_id: str, at: datetime) -> None:
        await self.session.run(
            update(proposals)
            .where(proposals.c.user_id == user_id, proposals.c.id == proposal_id)
            .values(state="booked", event_id=event_id, updated_at=at)
        )

    async def note_zone(self, user_id: str, address: str, tz: str, at: datetime) -> None:
        statement = pg_insert(attendee_zones).values(
            user_id=user_id, address=normal_address(address), tz=tz, updated_at=at
        )
        await self.session.run(
            statement.on_conflict_do_update(
                index_elements=[attendee_zones.c.user_id, attendee_zones.c.address],
                set_={"tz": statement.excluded.tz, "updated_at": statement.excluded.updated_at},
            )
        )

    async def zone_of(self, user_id: str, address: str) -> str | None:
        found = await self.session.run(
            select(attendee_zones.c.tz).where(
                attendee_zones.c.user_id == user_id, attendee_zones.c.address == normal_address(address)
            )
        )
        tz: str | None = found.scalar_one_or_none()
        return tz


def _sent(row: Any) -> SentProposal:
    slots = [dict(s) for s in row.slots]
    return SentProposal(
        proposal=ProposalOut(
            id=row.id,
            title=row.title,
            attendee=Attendee.model_validate(row.attendee),
            duration_minutes=row.duration_minutes,
            slots=tuple(
                ProposedSlot(start=datetime.fromisoformat(s["start"]), end=datetime.fromisoformat(s["end"]))
                for s in slots
            ),
            attendee_tz=row.attendee_tz,
            zone_source=row.zone_source,
        ),
        hold_ids=tuple(str(s["event_id"]) for s in slots),
        message_id=row.message_id,
        booked=row.event_id,
    )
