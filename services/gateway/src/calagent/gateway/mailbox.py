"""The assistant's own SMTP receiver (contract §16, `CALAGENT_SMTP_LISTEN=host:port`).

The gateway runs it: like a chat message, mail is input from outside, and the gateway is where
input is checked and turned into turns. RCPT is accepted only for an existing private address
(asked of commands, which owns the mailboxes); anything else is refused with 550 before the data
is sent. A message larger than `CALAGENT_MAIL_MAX_BYTES` is refused with 552 while it streams.

For each accepted message the edge reads the facts (`read_mail`, pure) — one parseable From equal
to the envelope's MAIL FROM, a Message-ID, a parseable text/calendar part where one is claimed —
and hands them to commands (`ReceiveMail`), which records the message once per Message-ID and
decides: a held invitation offer, an attendee's answer, a turn, or dropped with its reason. A
turn (forwarded mail) is run here, through the same turn path as chat, on channel `email`, with
all of its content marked third-party (contract §8: whatever it asks for is held).

A commands service that cannot answer is a temporary failure (451): the sender's server retries.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable
from dataclasses import dataclass
from email import message_from_bytes
from email.message import EmailMessage, Message
from email.policy import default as default_policy
from email.utils import getaddresses
from typing import Any, Protocol

from aiosmtpd.smtp import SMTP
from aiosmtpd.smtp import Envelope as SmtpEnvelope
from icalendar import Calendar

from calagent.contracts import wire
from calagent.contracts.address import EMAIL_MAX
from calagent.contracts.people import (
    BODY_MAX_CHARS,
    CALENDAR_MAX_CHARS,
    MAX_THREAD,
    FindMailbox,
    PeopleRequest,
    PeopleResult,
    ReceiveMail,
)
from calagent.contracts.transport import Unwrapped
from calagent.contracts.turns import MAX_MESSAGE_CHARS
from calagent.gateway.auth import Principal
from calagent.gateway.turns import ChatTurn, TurnRunner
from calagent.runtime.bus import Bus, BusRequestError
from calagent.runtime.clock import Clock
from calagent.runtime.settings import Settings
from calagent.runtime.timeline import epoch_ms

log = logging.getLogger("calagent.gateway.mailbox")

ASK_TIMEOUT_S = 10.0
CONVERSATION = "default"


@dataclass(frozen=True)
class MailFacts:
    """What the edge reads from a message. `defect` names the first basic check it failed."""

    from_address: str | None
    message_id: str
    calendar: str | None
    text: str
    defect: str | None = None
    # The messages it answers (In-Reply-To, then References), and its plain-text body alone.
    in_reply_to: tuple[str, ...] = ()
    body: str = ""


def _normal(address: str | None) -> str:
    return (address or "").strip().strip("<>").casefold()


def _calendar_part(message: Message) -> Message | None:
    for part in message.walk():
        if part.get_content_type() == "text/calendar":
            return part
    return None


def _body(message: Message) -> str:
    if isinstance(message, EmailMessage):
        part = message.get_body(preferencelist=("plain",))
        if part is not None:
            content = part.get_content()
            return content if isinstance(content, str) else ""
    return ""


def _text(message: Message) -> str:
    subject = str(message.get("Subject", "") or "").strip()
    body = _body(message)
    text = f"{subject}\n\n{body}".strip() if subject else body.strip()
    return text[:MAX_MESSAGE_CHARS]


def _answers(message: Message) -> tuple[str, ...]:
    """The Message-IDs a message names as those it answers: In-Reply-To first, then References."""
    found: list[str] = []
    for header in ("In-Reply-To", "References"):
        for value in message.get_all(header) or []:
            found += [f"<{m}>" for m in re.findall(r"<([^<>\s]{1,298})>", str(value))]
    return tuple(dict.fromkeys(found))[:MAX_THREAD]


def read_mail(raw: bytes, mail_from: str | None) -> MailFacts:
    """The facts of one message as received, and whether it passes the basic checks."""
    message = message_from_bytes(raw, policy=default_policy)
    declared = message.get("Message-ID")
    message_id = str(declared).strip() if declared else ""
    if not message_id:
        # Still one record per message: a digest of what arrived stands in for the missing id.
        message_id = f"<{hashlib.sha256(raw).hexdigest()[:40]}@missing-message-id>"
    senders = message.get_all("From") or []
    found = [addr for _, addr in getaddresses([str(s) for s in senders]) if "@" in addr]
    from_address = found[0] if len(senders) == 1 and len(found) == 1 else None
    defect: str | None = None
    calendar: str | None = None
    part = _calendar_part(message)
    if part is not None:
        try:
            payload = part.get_payload(decode=True)
            calendar = (
                payload.decode(part.get_content_charset() or "utf-8") if isinstance(payload, bytes) else None
            )
            if calendar is None:
                raise ValueError("empty calendar part")
            Calendar.from_ical(calendar)
        except (ValueError, UnicodeDecodeError, LookupError):
            calendar, defect = None, "unparseable_calendar"
        if calendar is not None and len(calendar) > CALENDAR_MAX_CHARS:
            calendar, defect = None, "calendar_too_large"
    if from_address is None:
        defect = "no_single_from"
    elif _normal(from_address) != _normal(mail_from):
        defect = "from_not_envelope_sender"
    elif not declared:
        defect = "no_message_id"
    return MailFacts(
        from_address,
        message_id[:300],
        calendar,
        _text(message),
        defect,
        in_reply_to=_answers(message),
        body=_body(message)[:BODY_MAX_CHARS],
    )


class MailHost(Protocol):
    """What the receiver needs of the gateway that runs it (`state.Gateway`, which starts it): the
    bus to commands, the clock, the default zone, the turn runner and its background tasks."""

    @property
    def settings(self) -> Settings: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def bus(self) -> Bus: ...

    @property
    def runner(self) -> TurnRunner: ...

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]: ...


class MailHandler:
    """aiosmtpd's handler: the RCPT check and the delivery of each accepted message."""

    def __init__(self, gateway: MailHost) -> None:
        self.gateway = gateway

    async def _ask(self, command: FindMailbox | ReceiveMail) -> PeopleResult | None:
        try:
            result: PeopleResult = await self.gateway.bus.request(
                wire.PEOPLE_MANAGE, PeopleRequest(command=command), timeout=ASK_TIMEOUT_S
            )
        except (BusRequestError, TimeoutError) as exc:
            log.warning("mail could not be handed to commands: %r", exc)
            return None
        return result

    async def handle_RCPT(  # noqa: N802 - aiosmtpd's hook name
        self, server: SMTP, session: Any, envelope: SmtpEnvelope, address: str, rcpt_options: list[str]
    ) -> str:
        if envelope.rcpt_tos:
            # One private address per message: each recipient is its own user and its own record.
            return "452 4.5.3 one recipient per message"
        if not 3 <= len(address) <= EMAIL_MAX:
            return "550 5.1.1 no such mailbox"
        answer = await self._ask(FindMailbox(address=address))
        if answer is None:
            return "451 4.3.0 try again later"
        if answer.user_id is None:
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802 - aiosmtpd's hook name
        self, server: SMTP, session: Any, envelope: SmtpEnvelope
    ) -> str:
        raw = envelope.original_content or b""
        gw = self.gateway
        try:
            facts = read_mail(raw, envelope.mail_from)
            mail = ReceiveMail(
                recipient=envelope.rcpt_tos[0],
                mail_from=(envelope.mail_from or "")[:EMAIL_MAX],
                from_address=facts.from_address[:EMAIL_MAX] if facts.from_address else None,
                message_id=facts.message_id,
                calendar=facts.calendar,
                defect=facts.defect,
                received_at=gw.clock.now(),
                in_reply_to=facts.in_reply_to,
                body=facts.body or None,
            )
        except (ValueError, LookupError, TypeError) as exc:
            # A message the parser cannot take apart is refused for good: a retry would fail alike.
            log.info("a received message could not be read: %r", exc)
            return "554 5.6.0 message not readable"
        answer = await self._ask(mail)
        if answer is None or answer.inbound is None:
            return "451 4.3.0 try again later"
        verdict = answer.inbound
        if verdict.verdict == "turn" and verdict.user_id is not None and facts.text:
            gw.spawn(self._turn(verdict.user_id, verdict.tz or gw.settings.default_tz, facts))
        # Accepted whatever the verdict: a dropped message is on record, and telling a stranger
        # which senders are known would be a leak.
        return "250 OK"

    async def _turn(self, user_id: str, tz: str, facts: MailFacts) -> None:
        """Forwarded mail as a turn: the same path as chat, every word of it third-party."""
        key = "mail:" + hashlib.sha256(facts.message_id.encode()).hexdigest()[:40]
        turn = ChatTurn(
            principal=Principal(user_id=user_id, tz=tz),
            raw_text=facts.text,
            unwrapped=Unwrapped(text=facts.text, forwarded=facts.text, third_party=True, promoted=True),
            conversation_id=CONVERSATION,
            channel="email",
            client_message_id=key,
            active_command_id=None,
            received_ms=epoch_ms(),
        )
        try:
            await self.gateway.runner.run(turn)
        except Exception:
            log.exception("the turn of a received message failed")


def parse_listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError("CALAGENT_SMTP_LISTEN must be host:port")
    return host.strip("[]"), int(port)


class MailReceiver:
    def __init__(self, gateway: MailHost, listen: str, max_bytes: int) -> None:
        self.gateway = gateway
        self.host, self.port = parse_listen(listen)
        self.max_bytes = max_bytes
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        handler = MailHandler(self.gateway)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: SMTP(handler, data_size_limit=self.max_bytes, hostname=self.host, ident="calagent"),
            host=self.host,
            port=self.port,
            # Gateway replicas on one host share the port; the kernel spreads the connections.
            reuse_port=True,
        )
        log.info("mail receiver listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
