"""A message to one person queued in the command's own transaction (the mail outbox, §16): sent
after the commit, never for a write that rolled back."""

from __future__ import annotations

from opentelemetry import propagate

from calagent.commands.people import imip
from calagent.commands.txn import Txn


async def queue_one(txn: Txn, mailbox: str, uid: str, mail: imip.Mail) -> None:
    """One message into the mail outbox, carrying the trace it was queued in."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    await txn.uow.people.queue_mail(txn.user_id, mailbox, [(uid, mail)], carrier)
