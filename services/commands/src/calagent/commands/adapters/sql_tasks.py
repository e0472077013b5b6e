"""The user's tasks (contract §21): one row each, the caller's only."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, select, update

from calagent.commands.adapters.sql_core import SqlSession
from calagent.commands.adapters.sql_events import event_from_row
from calagent.commands.adapters.tables import events, tasks
from calagent.commands.domain.effects import Effects
from calagent.commands.domain.model import Event, local_uid
from calagent.contracts.tasks import TaskOut

FIELDS = (
    "id",
    "title",
    "duration_minutes",
    "due",
    "earliest",
    "priority",
    "chunk_minutes",
    "max_chunk_minutes",
    "hours",
    "status",
    "percent",
    "completed_at",
)


def task_uids_query(user_id: str, task_ids: Iterable[str]) -> Select[tuple[str, str | None]]:
    return select(tasks.c.id, tasks.c.uid).where(tasks.c.user_id == user_id, tasks.c.id.in_(sorted(task_ids)))


def uid_of_task(task_id: str, uid: str | None) -> str:
    """The UID a task's object carries: the one it came with, else ours (until delivered too)."""
    return uid or local_uid(task_id)


def _out(row: Any) -> TaskOut:
    return TaskOut.model_validate({name: getattr(row, name) for name in FIELDS})


class SqlTasks:
    """Each write is recorded in `effects`: the task's VTODO goes to the connected calendar with
    the commit (contract §21), whoever wrote it (the API, the assistant)."""

    def __init__(self, session: SqlSession, effects: Effects) -> None:
        self.session = session
        self.effects = effects

    async def list_tasks(self, user_id: str, *, open_only: bool = False) -> list[TaskOut]:
        query = select(tasks).where(tasks.c.user_id == user_id)
        if open_only:
            query = query.where(tasks.c.status == "open")
        found = await self.session.run(query.order_by(tasks.c.due.asc().nulls_last(), tasks.c.created_at))
        return [_out(row) for row in found]

    async def tasks_by_ids(self, user_id: str, task_ids: Sequence[str]) -> list[TaskOut]:
        if not task_ids:
            return []
        found = await self.session.run(
            select(tasks).where(tasks.c.user_id == user_id, tasks.c.id.in_(sorted(set(task_ids))))
        )
        return [_out(row) for row in found]

    async def uids_by_id(self, user_id: str, task_ids: Iterable[str]) -> dict[str, str]:
        """The UIDs the given tasks' objects carry, by id (the parents their blocks name)."""
        wanted = set(task_ids)
        if not wanted:
            return {}
        found = await self.session.run(task_uids_query(user_id, wanted))
        return {r.id: uid_of_task(r.id, r.uid) for r in found}

    async def insert_task(self, user_id: str, task: TaskOut, now: datetime) -> None:
        values = task.model_dump(include=set(FIELDS))
        await self.session.run(
            tasks.insert().values(user_id=user_id, created_at=now, updated_at=now, **values)
        )
        self.effects.task_written(user_id, task.id)

    async def update_task(self, user_id: str, task: TaskOut, now: datetime) -> bool:
        values = task.model_dump(include=set(FIELDS) - {"id"})
        done = await self.session.run(
            update(tasks)
            .where(tasks.c.user_id == user_id, tasks.c.id == task.id)
            .values(updated_at=now, **values)
        )
        self.effects.task_written(user_id, task.id)
        return bool(getattr(done, "rowcount", 0))

    async def delete_task(self, user_id: str, task_id: str) -> bool:
        done = await self.session.run(delete(tasks).where(tasks.c.user_id == user_id, tasks.c.id == task_id))
        self.effects.task_written(user_id, task_id)
        return bool(getattr(done, "rowcount", 0))

    async def blocks(self, user_id: str) -> list[Event]:
        found = await self.session.run(
            select(events)
            .where(events.c.user_id == user_id, events.c.task_id.is_not(None))
            .order_by(events.c.start_at, events.c.id)
        )
        return [event_from_row(row) for row in found]

    async def created_at(self, user_id: str, task_ids: Sequence[str]) -> dict[str, datetime]:
        found = await self.session.run(
            select(tasks.c.id, tasks.c.created_at).where(
                tasks.c.user_id == user_id, tasks.c.id.in_(list(task_ids))
            )
        )
        return {row.id: row.created_at for row in found}
