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
from calagent.commands.adapters.sql_tasks import SqlTasks
from calagent.commands.adapters.tables import caldav_accounts, caldav_outbox
from calagent.commands.domain.model import Event
from calagent.contracts.tasks import TaskOut

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
        .returning(
            caldav_outbox.c.id, caldav_outbox.c.event_id, caldav_outbox.c.outcome, caldav_outbox.c.kind
        )
    )


# Not `user_id`: an UPDATE takes a parameter named after a column as a value to set.
TAKE_NOTICES = take_notices(bindparam("notices_user", type_=String()))


class SqlSync:
    """The CalDAV outbox as a unit of work sees it."""

    def __init__(self, session: SqlSession, events: SqlEvents, tasks: SqlTasks) -> None:
        self.session = session
        self.events = events
        self.tasks = tasks

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

    async def take_sync_notices(self, user_id: str, limit: int = 5) -> list[tuple[str, Event | TaskOut]]:
        """Deliveries refused or lost to the server's version since the last turn, each told once:
        (outcome, the event or task as stored now). One gone since is not worth a line."""
        claimed = await self.session.run(TAKE_NOTICES, {"notices_user": user_id, "notices_limit": limit})
        return await self.notices_of(user_id, [(row.outcome, row.event_id, row.kind) for row in claimed])

    async def notices_of(
        self, user_id: str, taken: Sequence[tuple[str, str, str]]
    ) -> list[tuple[str, Event | TaskOut]]:
        """The notices taken (outcome, resource id, outbox kind — an event's or a task's — in the
        order taken) with their events or tasks as stored now, each once."""
        if not taken:
            return []
        event_ids = [resource_id for _, resource_id, kind in taken if kind != "task"]
        task_ids = [resource_id for _, resource_id, kind in taken if kind == "task"]
        by_id: dict[tuple[str, str], Event | TaskOut] = {}
        if event_ids:
            by_id.update({("event", e.id): e for e in await self.events.events_by_ids(user_id, event_ids)})
        if task_ids:
            by_id.update({("task", t.id): t for t in await self.tasks.tasks_by_ids(user_id, task_ids)})
        seen: set[tuple[str, str]] = set()
        notices: list[tuple[str, Event | TaskOut]] = []
        for outcome, resource_id, kind in taken:
            key = ("task" if kind == "task" else "event", resource_id)
            found = by_id.get(key)
            if found is not None and key not in seen:
                seen.add(key)
                notices.append((str(outcome), found))
        return notices
