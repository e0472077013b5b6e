"""Attendees of a write: who a change will mail, and the people an update names.

A write that would send mail (an invitation, an update, a cancellation) is held for the user's
word with `hold_reason = sends_invitations`, and its stub names every recipient. Mail is sent only
for events the user organizes (ORGANIZER is the user's private address): changing an invitation
someone else sent never mails that meeting's people in the user's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from calagent.commands.domain.model import Event
from calagent.commands.domain.people import Unresolved, keep_answers, normal_address, resolve_attendees
from calagent.commands.placing import Placing
from calagent.commands.txn import Txn
from calagent.contracts.people import Attendee
from calagent.contracts.tools import UpdateSchedule


@dataclass(frozen=True)
class PeopleChange:
    """An update's new list of attendees (answers of those already invited kept)."""

    attendees: tuple[Attendee, ...]
    organizer: str | None

    def recipients(self, current: tuple[Attendee, ...]) -> tuple[Attendee, ...]:
        """Everyone the change mails: the new list (REQUEST) and those taken off it (CANCEL)."""
        kept = {normal_address(a.email) for a in self.attendees}
        return (*self.attendees, *(a for a in current if normal_address(a.email) not in kept))


class AttendeeRules:
    def __init__(self, placing: Placing) -> None:
        self.placing = placing

    async def invited(self, txn: Txn, row: Event, master: Event | None) -> tuple[Attendee, ...]:
        """The people a change of this event mails: its attendees, when the user organizes it."""
        owner = master or row
        if not owner.attendees or owner.organizer is None:
            return ()
        mailbox = await txn.uow.people.mailbox(txn.user_id)
        return owner.attendees if mailbox is not None and owner.organizer == mailbox else ()

    async def for_update(
        self, txn: Txn, current: Event, update: UpdateSchedule
    ) -> PeopleChange | Unresolved | None:
        """None: the update leaves the people alone; `Unresolved`: a name no contact (or several)
        matches, which the change then asks about."""
        if update.attendees is None:
            return None
        found = resolve_attendees(update.attendees, await txn.uow.people.contacts(txn.user_id))
        if isinstance(found, Unresolved):
            return found
        attendees = keep_answers(found, current.attendees)
        organizer = current.organizer
        if attendees and organizer is None:
            organizer = await self.placing.organizer(txn)
        return PeopleChange(attendees, organizer)
