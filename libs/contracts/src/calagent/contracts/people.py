"""People (contract §16): the user's contacts, the attendees of an event, and the user's private
mail address (the ORGANIZER of the invitations the assistant sends, so replies come back).

The gateway's `/v1/contacts` and `/v1/mail-address` routes ask commands over
`calagent.people.manage`; commands owns the tables. An attendee is a modeled value of an event,
shown by `GET /v1/events` and written into the event's iCalendar object as ATTENDEE.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from calagent.contracts.address import EMAIL_MAX
from calagent.contracts.base import WireModel
from calagent.contracts.envelope import Envelope
from calagent.contracts.settings import AnySettingsCommand, SettingsOut, SharingOut

NAME_MAX = 200
ALIASES_MAX = 20
CALENDAR_MAX_CHARS = 1_000_000  # the text/calendar part of a received message
BODY_MAX_CHARS = 20_000  # the plain-text body of a received message, as read for a reply
MAX_THREAD = 20  # the message ids a received message names as those it answers
# RFC 5545 PARTSTAT values of a VEVENT attendee.
PartStat = Literal["NEEDS-ACTION", "ACCEPTED", "DECLINED", "TENTATIVE", "DELEGATED"]
# What the user may answer an invitation received by mail (the REPLY's PARTSTAT).
InvitationAnswer = Literal["ACCEPTED", "DECLINED", "TENTATIVE"]


class Attendee(WireModel):
    name: str | None = None
    email: str = Field(min_length=3, max_length=EMAIL_MAX)
    status: PartStat = "NEEDS-ACTION"
    # The name is a card's, read from a connected address book (contract §19): someone else's
    # words, not a contact the user typed. Said only when true, so an attendee is stored and sent
    # as it always was otherwise.
    card: bool = Field(default=False, exclude_if=lambda card: not card)


class ContactOut(WireModel):
    id: str
    name: str
    email: str
    aliases: tuple[str, ...] = ()
    created_at: datetime
    # "carddav": a card of a connected account's address book, read-only through this API.
    source: Literal["own", "carddav"] = "own"


class AddContact(WireModel):
    kind: Literal["add"] = "add"
    envelope: Envelope
    name: str = Field(min_length=1, max_length=NAME_MAX)
    email: str = Field(min_length=3, max_length=EMAIL_MAX)
    aliases: tuple[Annotated[str, Field(min_length=1, max_length=NAME_MAX)], ...] = Field(
        default=(), max_length=ALIASES_MAX
    )


class ListContacts(WireModel):
    kind: Literal["list"] = "list"
    envelope: Envelope


class DeleteContact(WireModel):
    kind: Literal["delete"] = "delete"
    envelope: Envelope
    contact_id: str = Field(min_length=1, max_length=64)


class GetMailAddress(WireModel):
    """The user's private address, made on first use; the same one afterwards (invitations
    already sent name it as their organizer, so replies keep finding the user)."""

    kind: Literal["mail_address"] = "mail_address"
    envelope: Envelope


class FindMailbox(WireModel):
    """Whose private address this is (the receiver's RCPT check): `PeopleResult.user_id`."""

    kind: Literal["find_mailbox"] = "find_mailbox"
    address: str = Field(min_length=3, max_length=EMAIL_MAX)


class ReceiveMail(WireModel):
    """A message the receiver accepted for a private address, with the facts it read from it.
    Commands decides whether it is acted on (known sender, not seen before) and records it either
    way; `defect` names a basic check the message failed at the edge (it is only recorded)."""

    kind: Literal["receive_mail"] = "receive_mail"
    recipient: str = Field(min_length=3, max_length=EMAIL_MAX)
    mail_from: str = Field(max_length=EMAIL_MAX)
    from_address: str | None = Field(default=None, max_length=EMAIL_MAX)
    message_id: str = Field(min_length=1, max_length=300)
    calendar: str | None = Field(default=None, max_length=CALENDAR_MAX_CHARS)
    defect: str | None = Field(default=None, max_length=200)
    received_at: datetime
    # The messages this one answers (In-Reply-To, then References): a reply to a proposal of times
    # is found by them. Its plain-text body, someone else's words, read only for the slot it names.
    in_reply_to: tuple[Annotated[str, Field(max_length=300)], ...] = Field(default=(), max_length=MAX_THREAD)
    body: str | None = Field(default=None, max_length=BODY_MAX_CHARS)


AnyContactCommand = AddContact | ListContacts | DeleteContact | GetMailAddress
AnyMailCommand = FindMailbox | ReceiveMail
# Settings and sharing (`contracts.settings`) travel on the same subject: the same two sides.
AnyPeopleCommand = AnyContactCommand | AnyMailCommand | AnySettingsCommand


class PeopleRequest(WireModel):
    command: Annotated[AnyPeopleCommand, Field(discriminator="kind")]


class PeopleError(WireModel):
    code: Literal["not_found", "invalid_email", "invalid_settings", "unavailable", "read_only"]
    message: str


InboundVerdictName = Literal["offered", "waiting", "replied", "turn", "dropped", "duplicate"]


class InboundVerdict(WireModel):
    """What became of a received message: `offered` (a held invitation stub, `command_id`),
    `waiting` (an invitation kept until the request the user has open is settled),
    `replied` (an attendee's answer recorded), `turn` (forwarded mail: the gateway runs it as a
    turn on channel `email` for `user_id`), `dropped` (with `reason`), `duplicate` (seen before)."""

    verdict: InboundVerdictName
    reason: str | None = None
    user_id: str | None = None
    tz: str | None = None  # the user's zone, for a turn
    command_id: str | None = None


class InvitationOut(WireModel):
    """An invitation received by mail, as its offer shows it."""

    method: Literal["REQUEST", "CANCEL"]
    uid: str
    sequence: int = 0
    organizer: str
    title: str
    start: datetime
    end: datetime
    attendees: tuple[Attendee, ...] = ()
    # The event this invitation updates or cancels (one accepted before), if any.
    event_id: str | None = None
    # Whether its sender is someone the user knows: their own address or a contact. False: someone
    # not in the contacts, offered marked as such (contract §19; settings `invitations_from`).
    sender_known: bool = True


class CounterOut(WireModel):
    """An attendee's counter-proposal (iMIP COUNTER, RFC 5546 §3.2.7) for an event the user
    organizes, as its offer shows it: who proposes which time for which event. Nothing of the
    message's text (its COMMENT, the proposer's CN) is carried: it is someone else's words."""

    uid: str
    proposer: str
    start: datetime
    end: datetime
    event_id: str
    # The SEQUENCE the COUNTER names (the version it answers): a DECLINECOUNTER echoes it.
    sequence: int = 0
    # The occurrence it is about, for a series (its RECURRENCE-ID).
    recurrence_id: datetime | None = None
    all_day: bool = False
    # Whether the proposer is someone the user knows (a contact); an attendee either way.
    sender_known: bool = True


class ProposedSlot(WireModel):
    start: datetime
    end: datetime


ZoneSource = Literal["settings", "reply"]


class ProposalOut(WireModel):
    """Times proposed to someone outside (contract §20) as the offers show them: the proposal the
    user confirms (kind `proposal`), and the attendee's choice the user books (kind `booking`,
    `chosen` set). The attendee's zone, when known, and where it was learnt: their settings (a
    user here) or the TZID of an earlier REPLY or COUNTER of theirs."""

    id: str
    title: str
    attendee: Attendee
    duration_minutes: int
    slots: tuple[ProposedSlot, ...]
    attendee_tz: str | None = None
    zone_source: ZoneSource | None = None
    # The slot the attendee chose (its index in `slots`), on a booking offer.
    chosen: int | None = None


class PeopleResult(WireModel):
    contact: ContactOut | None = None
    contacts: tuple[ContactOut, ...] = ()
    deleted: bool = False
    address: str | None = None
    user_id: str | None = None
    inbound: InboundVerdict | None = None
    settings: SettingsOut | None = None
    sharing: SharingOut | None = None
    error: PeopleError | None = None
