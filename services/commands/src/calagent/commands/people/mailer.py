"""The mail outbox worker: sends queued iMIP messages to `CALAGENT_SMTP_URL`, each once.

The same idiom as the CalDAV outbox (`caldav/outbox.py`): a replica claims the oldest due row
with `FOR UPDATE SKIP LOCKED` (replicas share the rows, none waits on another's), sends it, and
marks it sent in the same transaction. A server that does not answer or refuses for now (4xx,
a dropped connection) leaves the row for later with exponential backoff; a permanent refusal
(5xx) is recorded on the row and not retried. The one way a message goes twice is a crash between
the server's acceptance and the commit: it is then sent again with the same Message-ID, which
mail clients treat as the same message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import unquote, urlsplit

import aiosmtplib
from opentelemetry import propagate, trace
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.commands.adapters.tables_people import mail_outbox
from calagent.commands.caldav.outbox import backoff

log = logging.getLogger("calagent.commands.mail")
tracer = trace.get_tracer("calagent.commands.mail")

SEND_TIMEOUT_S = 30.0
GIVE_UP_ATTEMPTS = 20  # about a day of backoff at its cap


class InvalidSmtpUrl(ValueError):
    pass


@dataclass(frozen=True)
class SmtpTarget:
    host: str
    port: int
    use_tls: bool
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SmtpTarget:
        """`smtp://[user:password@]host[:port]` (STARTTLS when the server offers it) or `smtps://`
        (TLS from the first byte)."""
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise InvalidSmtpUrl("CALAGENT_SMTP_URL must be smtp://host[:port] or smtps://host[:port]")
        tls = parts.scheme == "smtps"
        return cls(
            host=parts.hostname,
            port=parts.port or (465 if tls else 25),
            use_tls=tls,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )


class MailOutbox:
    def __init__(self, engine: AsyncEngine, target: SmtpTarget | None) -> None:
        self.engine = engine
        self.target = target

    async def deliver_due(self, limit: int = 100) -> int:
        if self.target is None:
            return 0  # no mail server configured: the messages wait in the outbox
        handled = 0
        while handled < limit and await self.deliver_one():
            handled += 1
        return handled

    async def deliver_one(self) -> bool:
        target = self.target
        assert target is not None
        async with self.engine.connect() as conn:
            await conn.begin()
            row = (
                await conn.execute(
                    select(mail_outbox)
                    .where(
                        mail_outbox.c.sent_at.is_(None), mail_outbox.c.not_before <= func.clock_timestamp()
                    )
                    .order_by(mail_outbox.c.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                )
            ).first()
            if row is None:
                await conn.rollback()
                return False
            error: str | None = None
            permanent = False
            with tracer.start_as_current_span(
                "mail.send",
                context=propagate.extract(row.trace_context or {}),
                attributes={"calagent.method": row.method, "calagent.attempt": row.attempts + 1},
            ) as span:
                try:
                    await aiosmtplib.send(
                        row.message,
                        sender=row.sender,
                        recipients=[row.recipient],
                        hostname=target.host,
                        port=target.port,
                        username=target.username,
                        password=target.password,
                        use_tls=target.use_tls,
                        timeout=SEND_TIMEOUT_S,
                    )
                except aiosmtplib.SMTPResponseException as exc:
                    error = f"{exc.code} {exc.message}"[:500]
                    permanent = 500 <= exc.code < 600
                except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
                    error = f"{type(exc).__name__}: {exc}"[:500]
                span.set_attribute("calagent.outcome", "sent" if error is None else "failed")
            if error is None:
                values: dict[str, object] = {"sent_at": func.clock_timestamp(), "last_error": None}
            elif permanent or row.attempts + 1 >= GIVE_UP_ATTEMPTS:
                log.warning("mail %s to %s refused: %s", row.message_id, row.recipient, error)
                # Settled without being sent: kept with its error for the operator, never retried.
                values = {"sent_at": func.clock_timestamp(), "last_error": f"not sent: {error}"}
            else:
                values = {
                    "not_before": func.clock_timestamp() + backoff(row.attempts + 1),
                    "last_error": error,
                }
            await conn.execute(
                update(mail_outbox)
                .where(mail_outbox.c.id == row.id)
                .values(attempts=mail_outbox.c.attempts + 1, **values)
            )
            await conn.commit()
            return True

    async def prune(self, older_than: timedelta) -> int:
        async with self.engine.begin() as conn:
            result = await conn.execute(
                mail_outbox.delete().where(mail_outbox.c.sent_at < func.clock_timestamp() - older_than)
            )
            return int(getattr(result, "rowcount", 0) or 0)
