"""The CalDAV outbox as the unit of work sees it: rows queued at commit, and the notices of
deliveries the server refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from opentelemetry import propagate
from sqlalchemy import (
    ARRAY,
    BindParameter,
    Integer,
    String,
    Update,
    bindparam,
    exists,
    func,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert

from calagent.commands.adapters.sql_core import SqlSession
from calagent.commands.adapters.sql_events import SqlEvents
from calagent.commands.adapters.tables import caldav_accounts, caldav_outbox
from calagent.commands.domain.model import Event

# Run at the commit of every write: built once, its parameters bound per call.
ENQUEUE_OUTBOUND = pg_insert(caldav_outbox).from_select(
    ["user_id", "event_id", "kind", "trace_context"],
    select(
        bindparam("outbox_user", type_=String()),
        func.unnest(bindparam("resources", type_=ARRAY(String()))),
        bindparam("kind", type_=String()),
        bindparam("carrier", type_=JSONB()),
    ).where(exists().where(caldav_accounts.c.user_id == bindparam("outbox_user"))),
)


def take_notices(user_id: BindParameter[str]) -> Update:
    """The sync notices not told yet, marked told as they are taken (oldest first, up to
    `notices_limit`)."""
    pending = (
        select(caldav_outbox.c.id)
        .where(
            caldav_outbox.c.user_id == user_id,
            caldav_outbox.c.outcome.in_(("rejected", "conflict")),
            caldav_outbox.c.reported_at.is_(None),
        )
        .order_by(caldav_outbox.c.id)
        .limit(bindparam("notices_limit", type_=Integer()))
        .with_for_update(skip_locked=True)
    )
    return (
        update(caldav_outbox)
        .where(caldav_outbox.c.id.in_(pending.scalar_subquery()))
        .values(reported_at=func.clock_timestamp())
        .returning(caldav_outbox.c.id, caldav_outbox.c.event_id, caldav_outbox.c.outcome)
    )


# Not `user_id`: an UPDATE takes a parameter named after a column as a value to set.
TAKE_NOTICES = take_notices(bindparam("notices_user", type_=String()))


class SqlSync:
    """The CalDAV outbox as a unit of work sees it."""

    def __init__(self, session: SqlSession, events: SqlEvents) -> None:
        self.session = session
        self.events = events

    async def queue_deliveries(
        self, touched: Mapping[str, set[str]], kind: Literal["event", "task"] = "event"
    ) -> tuple[str, ...]:
        """One outbox row per touched resource (`kind`: events and series, or tasks) of each user
        who has a connected account (none otherwise: the statement inserts nothing), committed
        with the write itself; the users who got any."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        users: list[str] = []
        for user_id, resources in touched.items():
            inserted = await self.session.run(
                ENQUEUE_OUTBOUND,
                {"outbox_user": user_id, "resources": sorted(resources), "kind": kind, "carrier": carrier},
            )
            if getattr(inserted, "rowcount", 0):
                users.append(user_id)
        return tuple(users)

    async def take_sync_notices(self, user_id: str, limit: int = 5) -> list[tuple[str, Event]]:
        """Deliveries refused or lost to the server's version since the last turn, each told once:
        (outcome, the event as stored now). An event gone since is not worth a line."""
        claimed = await self.session.run(TAKE_NOTICES, {"notices_user": user_id, "notices_limit": limit})
        return await self.notices_of(user_id, [(row.outcome, row.event_id) for row in claimed])

    async def notices_of(self, user_id: str, taken: Sequence[tuple[str, str]]) -> list[tuple[str, Event]]:
        """The notices taken (outcome, event id, in the order taken) with their events as stored
        now, each event once."""
        if not taken:
            return []
        by_id = {
            e.id: e for e in await self.events.events_by_ids(user_id, [event_id for _, event_id in taken])
        }
        seen: set[str] = set()
        notices = []
        for outcome, event_id in taken:
            event = by_id.get(event_id)
            if event is not None and event_id not in seen:
                seen.add(event_id)
                notices.append((str(outcome), event))
        return notices
