"""iMIP messages (RFC 6047 over RFC 5546): the invitation, update and cancellation of an event the
user organizes, one message per recipient.

A REQUEST carries the event's object as it now is (every VEVENT of the UID, with its VTIMEZONEs;
the user's own alarms left out). A CANCEL carries the UID, the raised SEQUENCE, the organizer and
the attendees it is for; `STATUS:CANCELLED` when the whole event goes (RFC 5546 §3.2.5: not when
only some attendees are taken off). The Message-ID is a digest of the event, sequence, method and
recipient: the same message is never queued twice, and a retry carries the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, formataddr

from icalendar import Calendar, Component, vCalAddress
from icalendar import Event as IcsEvent

from calagent.commands.ical import components
from calagent.commands.ical.attendees import attendee_property, organizer_property
from calagent.contracts.people import Attendee

PRODID = "-//calagent//invitations//EN"


@dataclass(frozen=True)
class Mail:
    method: str
    sequence: int
    recipient: str
    message_id: str
    text: str


def message_id(uid: str, sequence: int, method: str, recipient: str, domain: str) -> str:
    seed = f"{uid}|{sequence}|{method}|{recipient.casefold()}"
    return f"<{hashlib.sha256(seed.encode()).hexdigest()[:40]}@{domain}>"


def sequence_of(obj: Calendar) -> int:
    return components.sequence_of(components.speaking(obj))


def _summary(obj: Calendar) -> str:
    master = components.speaking(obj)
    return str(master.get("SUMMARY", "")) if master is not None else ""


def _scheduling(method: str) -> Calendar:
    cal = Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    cal.add("method", method)
    return cal


def _answering(obj: Calendar, method: str) -> tuple[Component, Calendar]:
    """The received object's master event, and a new `method` message carrying its zones."""
    master = next((c for c in obj.walk("VEVENT") if "RECURRENCE-ID" not in c), None)
    if master is None:
        raise ValueError(f"no event for a {method}")
    cal = _scheduling(method)
    for zone in obj.walk("VTIMEZONE"):
        cal.add_component(zone)
    return master, cal


def request_body(obj: Calendar) -> Calendar:
    """The object as a METHOD:REQUEST calendar: its events and zones, without the user's alarms."""
    cal = _scheduling("REQUEST")
    for component in obj.subcomponents:
        if component.name not in ("VEVENT", "VTIMEZONE"):
            continue
        if component.name == "VEVENT":
            component.subcomponents = [c for c in component.subcomponents if c.name != "VALARM"]
        cal.add_component(component)
    return cal


def cancel_body(
    obj: Calendar,
    sequence: int,
    organizer: str,
    people: Sequence[Attendee],
    stamp: datetime,
    whole: bool,
    occurrences: Sequence[date | datetime] = (),
) -> Calendar:
    """CANCEL of the whole event (`whole`: STATUS:CANCELLED), of some attendees, or of the
    `occurrences` of a series named by their RECURRENCE-ID (RFC 5546 §3.2.5: one VEVENT each)."""
    master, cal = _answering(obj, "CANCEL")
    for slot in occurrences or (None,):
        event: Component = IcsEvent()
        event["UID"] = master["UID"]
        event.add("dtstamp", stamp.astimezone(UTC))
        event.add("sequence", sequence)
        if slot is None:
            event["DTSTART"] = master["DTSTART"]
        else:
            event.add("dtstart", slot)
            event.add("recurrence-id", slot)
        if "SUMMARY" in master:
            event["SUMMARY"] = master["SUMMARY"]
        event["ORGANIZER"] = organizer_property(organizer, master.get("ORGANIZER"))
        props = [attendee_property(p) for p in people]
        event["ATTENDEE"] = props if len(props) > 1 else props[0]
        if whole or slot is not None:
            event.add("status", "CANCELLED")
        cal.add_component(event)
    return cal


def reply_body(obj: Calendar, attendee: str, partstat: str, stamp: datetime) -> Calendar:
    """RFC 5546 §3.2.3: the invitation's UID, SEQUENCE, ORGANIZER and times as received, and the
    one attendee who answers, with the answer as PARTSTAT."""
    master, cal = _answering(obj, "REPLY")
    event: Component = IcsEvent()
    event["UID"] = master["UID"]
    event.add("dtstamp", stamp.astimezone(UTC))
    event.add("sequence", int(master.get("SEQUENCE", 0)))
    for name in ("DTSTART", "DTEND", "DURATION", "SUMMARY", "ORGANIZER"):
        if name in master:
            event[name] = master[name]
    answer = vCalAddress(f"mailto:{attendee}")
    answer.params["PARTSTAT"] = partstat
    event["ATTENDEE"] = answer
    cal.add_component(event)
    return cal


def declinecounter_body(
    *,
    uid: str,
    sequence: int,
    organizer: str,
    proposer: str,
    stamp: datetime,
    summary: str,
    recurrence_id: datetime | None = None,
) -> Calendar:
    """RFC 5546 §3.2.8: the organizer turns down an attendee's COUNTER — the UID and SEQUENCE the
    COUNTER named (echoed), the occurrence it was about, the organizer, and the attendee who
    proposed it."""
    cal = _scheduling("DECLINECOUNTER")
    event: Component = IcsEvent()
    event.add("uid", uid)
    event.add("dtstamp", stamp.astimezone(UTC))
    event.add("sequence", sequence)
    if recurrence_id is not None:
        event.add("recurrence-id", recurrence_id.astimezone(UTC))
    if summary:
        event.add("summary", summary)
    event["ORGANIZER"] = organizer_property(organizer)
    event["ATTENDEE"] = vCalAddress(f"mailto:{proposer}")
    cal.add_component(event)
    return cal


def one_mail(
    body: Calendar,
    *,
    method: str,
    uid: str,
    sequence: int,
    sender: str,
    recipient: Attendee,
    stamp: datetime,
    summary: str,
    answer: str | None = None,
) -> Mail:
    """One scheduling message to one person from the user's mailbox, ready for the outbox.
    `answer` tells apart messages of one method to the same version (a changed REPLY, a second
    DECLINECOUNTER): it is part of the Message-ID."""
    domain = sender.rpartition("@")[2]
    msg_id = message_id(uid, sequence, f"{method} {answer}" if answer else method, recipient.email, domain)
    text = envelope(
        body, method=method, sender=sender, recipient=recipient, msg_id=msg_id, stamp=stamp, summary=summary
    )
    return Mail(method, sequence, recipient.email, msg_id, text)


def envelope(
    body: Calendar,
    *,
    method: str,
    sender: str,
    recipient: Attendee,
    msg_id: str,
    stamp: datetime,
    summary: str,
) -> str:
    """The RFC 6047 message: a short text part and the text/calendar part with its method."""
    subject = {
        "REQUEST": "Invitation",
        "CANCEL": "Cancelled",
        "REPLY": "Reply",
        "DECLINECOUNTER": "Proposed time declined",
    }.get(method, method)
    message = EmailMessage(policy=SMTP)
    message["From"] = sender
    message["To"] = formataddr((recipient.name or "", recipient.email))
    message["Subject"] = f"{subject}: {summary}" if summary else subject
    message["Date"] = format_datetime(stamp.astimezone(UTC))
    message["Message-ID"] = msg_id
    message.set_content(f"{subject}: {summary}\n")
    message.add_alternative(
        bytes(body.to_ical()).decode("utf-8"),
        subtype="calendar",
        params={"method": method},
    )
    return message.as_string()


def summary_of(obj: Calendar) -> str:
    return _summary(obj)
