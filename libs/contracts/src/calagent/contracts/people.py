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

from calagent.contracts.address import EMAIL_MAX as EMAIL_MAX
from calagent.contracts.base import WireModel
from calagent.contracts.envelope import Envelope
from calagent.contracts.settings import AnySettingsCommand, SettingsOut, SharingOut

NAME_MAX = 200
ALIASES_MAX = 20
# RFC 5545 PARTSTAT values of a VEVENT attendee.
PartStat = Literal["NEEDS-ACTION", "ACCEPTED", "DECLINED", "TENTATIVE", "DELEGATED"]


class Attendee(WireModel):
    name: str | None = None
    email: str = Field(min_length=3, max_length=EMAIL_MAX)
    status: PartStat = "NEEDS-ACTION"


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


AnyContactCommand = AddContact | ListContacts | DeleteContact | GetMailAddress
# Settings and sharing (`contracts.settings`) travel on the same subject: the same two sides.
AnyPeopleCommand = AnyContactCommand | AnySettingsCommand


class PeopleRequest(WireModel):
    command: Annotated[AnyPeopleCommand, Field(discriminator="kind")]


class PeopleError(WireModel):
    code: Literal["not_found", "invalid_email", "invalid_settings", "unavailable", "read_only"]
    message: str


class PeopleResult(WireModel):
    contact: ContactOut | None = None
    contacts: tuple[ContactOut, ...] = ()
    deleted: bool = False
    address: str | None = None
    settings: SettingsOut | None = None
    sharing: SharingOut | None = None
    error: PeopleError | None = None
