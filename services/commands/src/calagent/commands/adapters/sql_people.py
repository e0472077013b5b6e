"""People (contract §16): contacts and address-book cards, the user's mailbox, received mail and
the mail outbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from calagent.commands.adapters.effects import Effects
from calagent.commands.adapters.sql_core import SqlSession
from calagent.commands.adapters.tables import caldav_cards, contacts, inbound_mail, mail_outbox, mailboxes
from calagent.commands.domain.people import Contact, Told


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
