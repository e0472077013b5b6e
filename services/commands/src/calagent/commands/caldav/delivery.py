"""How one delivery of the outbox ended — an event's (`outbox.py`, `conflicts.py`) or a task's
(`todos.py`) alike — and the event rows' marks a delivery leaves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection

from calagent.commands.adapters.tables import events
from calagent.commands.caldav import remote
from calagent.commands.domain.payloads import HeldTaskChange

# delivered: the server holds what we hold; conflict: the server's version won (ours offered
# again); rejected: refused for good, marked on the row; dropped: nowhere to send it; retry: later.
DeliveryKind = Literal["delivered", "rejected", "conflict", "dropped", "retry"]


@dataclass(frozen=True)
class Outcome:
    kind: DeliveryKind
    error: str | None = None
    # A retry the server answered (5xx …) or our own code failed: one of the bounded attempts. A
    # server that could not be reached refused nothing: its retries wait for it, unbounded.
    refused: bool = True
    account_id: str | None = None  # the account it was for: its health shows how it went
    # A task's conflict: our change made again on the server's version once the user confirms.
    offer: HeldTaskChange | None = None


def retry(exc: remote.Unavailable) -> Outcome:
    return Outcome("retry", str(exc)[:500], refused=not isinstance(exc, remote.Unreachable))


async def mark(conn: AsyncConnection, user_id: str, event_id: str, state: str | None) -> None:
    """The event (or series) marked as its delivery left it: `rejected`, or None once delivered."""
    await conn.execute(
        update(events)
        .where(
            events.c.user_id == user_id,
            (events.c.id == event_id) | (events.c.series_id == event_id),
            events.c.sync_state.is_distinct_from(state),
        )
        .values(sync_state=state)
    )


async def keep_object(conn: AsyncConnection, user_id: str, event_id: str, body: str) -> None:
    """The object the server holds: what the next change is patched into."""
    await conn.execute(
        update(events).where(events.c.user_id == user_id, events.c.id == event_id).values(ical=body)
    )
