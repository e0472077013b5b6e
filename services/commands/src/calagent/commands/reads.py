"""How reads see a user's calendar: events and the occurrences of series, over the store port."""

from __future__ import annotations

from datetime import datetime

from calagent.commands.domain.model import Event
from calagent.commands.domain.series import expand
from calagent.commands.ports import UnitOfWork


async def events_in(
    uow: UnitOfWork, user_id: str, start: datetime, end: datetime, *, incomplete_only: bool = False
) -> list[Event]:
    """Every event and series occurrence overlapping [start, end): the one way reads see series."""
    rows = await uow.events.events_overlapping(user_id, start, end, incomplete_only=incomplete_only)
    return expand(rows, start, end)
