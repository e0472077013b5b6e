"""How reads see a user's calendar: events and the occurrences of series, and the addresses
that are the user, over the store port."""

from __future__ import annotations

from datetime import datetime, timedelta

from calagent.commands.domain.model import Event
from calagent.commands.domain.people import normal_address
from calagent.commands.domain.series import expand
from calagent.commands.domain.settings import StoredSettings
from calagent.commands.ports import UnitOfWork

# All-day events are stored as instants of the zone they were made in; widen the search so a
# user who moved zones still sees the whole local day blocked (and a suggestion sees the events
# just outside its range whose buffer, at most `BUFFER_MINUTES_MAX`, reaches into it).
ALL_DAY_SLACK = timedelta(days=1)


async def events_in(
    uow: UnitOfWork, user_id: str, start: datetime, end: datetime, *, incomplete_only: bool = False
) -> list[Event]:
    """Every event and series occurrence overlapping [start, end): the one way reads see series."""
    rows = await uow.events.events_overlapping(user_id, start, end, incomplete_only=incomplete_only)
    return expand(rows, start, end)


async def own_addresses(uow: UnitOfWork, user_id: str, saved: StoredSettings | None = None) -> frozenset[str]:
    """The addresses that are the user (normalised): their settings `email` and their private
    mail address, the ORGANIZER of what they invite to. An event's answer or organizing under
    one of them is the user's own. `saved`: their settings, when already read."""
    if saved is None:
        saved = (await uow.settings.settings_of([user_id])).get(user_id, StoredSettings())
    mailbox = await uow.people.mailbox(user_id)
    return frozenset(normal_address(a) for a in (saved.email, mailbox) if a)
