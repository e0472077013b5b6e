"""An offer from outside checked against the calendar as it is now (contract §16, §19): when an
invitation arrives, and again when one that waited beside the conversation comes up."""

from __future__ import annotations

from icalendar import Calendar

from calagent.commands.domain.model import Stub
from calagent.commands.domain.payloads import HeldInvitation
from calagent.commands.domain.people import normal_address
from calagent.commands.ical.components import sequence_of, speaking
from calagent.commands.ports import UnitOfWork
from calagent.contracts.people import InvitationOut


async def still_refused(uow: UnitOfWork, user_id: str, offer: InvitationOut) -> str | None:
    """Why an invitation cannot be offered against the user's calendar as it is now (None: it
    can)."""
    rows = await uow.events.events_by_uid(user_id, offer.uid)
    current = rows[0] if rows else None
    if offer.method == "CANCEL" and current is None:
        return "unknown_event"
    if current is not None and normal_address(current.organizer or "") != offer.organizer:
        # The UID names an event someone else organizes (or the user's own): not theirs to change.
        return "not_the_organizer"
    if current is not None and current.ical is not None and offer.method == "REQUEST":
        known = speaking(Calendar.from_ical(current.ical))
        if known is not None and sequence_of(known) >= offer.sequence:
            return "stale_sequence"
    return None


async def offer_refused(uow: UnitOfWork, stub: Stub) -> str | None:
    """Why a waiting offer can no longer be made (None: it can). A sync conflict is checked when
    it is confirmed (its offer's binding, §15); an invitation here."""
    if isinstance(stub.payload, HeldInvitation):
        return await still_refused(uow, stub.user_id, stub.payload.invitation)
    return None
