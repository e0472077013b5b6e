"""Tasks kept as VTODOs in the user's connected calendar (contract §21), both ways.

Out: a task written here (`/v1/tasks`, the assistant) has an outbox row of kind `task`, delivered
by the outbox worker on the same path as an event — the resource row (`caldav_resources`, named by
the task's id), a conditional PUT (`If-None-Match: *` for a new object, `If-Match` otherwise), a
DELETE when the task is gone. A new task goes to the user's default calendar when that calendar
takes VTODOs (its supported-calendar-component-set), else it stays here only. The object sent is
the kept one patched (ical/todo.py), so another app's task keeps what we do not model.

A 412 is settled as for an event: the server's version is fetched; one that already says what we
sent is our own earlier PUT (delivered); otherwise the server's version wins and is stored — the
task as the server has it now, the outcome `conflict` told at the next turn — and the fields our
change made (ours against the object we edited from) are handed back as an offer (`Outcome.offer`),
which the outbox holds for the user's word like an event's. A removal of ours that meets a 412
brings the task back as the server has it, and removing it again is what is offered.

In: a VTODO read by the inbound sync from a calendar the user owns becomes a task here, or updates
the task whose object it is (`take_in`), keeping the object and its UID; one gone from the server
takes its task with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Row, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from calagent.commands.adapters.sql_tasks import FIELDS, task_uids_query, uid_of_task
from calagent.commands.adapters.tables import caldav_resources, tasks
from calagent.commands.caldav import remote, rows
from calagent.commands.caldav.addresses import Guard
from calagent.commands.caldav.credentials import Vault
from calagent.commands.caldav.delivery import Outcome, retry
from calagent.commands.domain.model import Event, local_uid
from calagent.commands.domain.payloads import HeldTaskChange
from calagent.commands.ical.parse import UnreadableObject
from calagent.commands.ical.todo import ReadTodo, parse_todo, todo_body, todo_fingerprint
from calagent.commands.tasks.domain.changes import offered_change, patch_between
from calagent.contracts.tasks import TaskOut, TaskPatch
from calagent.runtime.clock import Clock


@dataclass(frozen=True)
class KeptTask:
    task: TaskOut
    uid: str | None
    ical: str | None


def _kept(row: Row[Any]) -> KeptTask:
    return KeptTask(TaskOut.model_validate({n: getattr(row, n) for n in FIELDS}), row.uid, row.ical)


async def kept_task(conn: AsyncConnection, user_id: str, task_id: str) -> KeptTask | None:
    row = (await conn.execute(select(tasks).where(tasks.c.user_id == user_id, tasks.c.id == task_id))).first()
    return _kept(row) if row is not None else None


async def keep_task(
    conn: AsyncConnection, user_id: str, task: TaskOut, uid: str, ical: str, now: datetime
) -> None:
    """The task as an object says it (new here, or the server's version of ours), with that
    object and its UID: the next change patches it."""
    values = {**task.model_dump(include=set(FIELDS)), "uid": uid, "ical": ical, "sync_state": None}
    statement = pg_insert(tasks).values(user_id=user_id, created_at=now, updated_at=now, **values)
    await conn.execute(
        statement.on_conflict_do_update(
            index_elements=[tasks.c.id],
            set_={name: statement.excluded[name] for name in [*values, "updated_at"] if name != "id"},
            where=tasks.c.user_id == user_id,
        )
    )


async def _keep_object(conn: AsyncConnection, user_id: str, task_id: str, uid: str, ical: str) -> None:
    await conn.execute(
        update(tasks)
        .where(tasks.c.user_id == user_id, tasks.c.id == task_id)
        .values(uid=uid, ical=ical, sync_state=None)
    )


async def _mark(conn: AsyncConnection, user_id: str, task_id: str, state: str | None) -> None:
    await conn.execute(
        update(tasks)
        .where(tasks.c.user_id == user_id, tasks.c.id == task_id, tasks.c.sync_state.is_distinct_from(state))
        .values(sync_state=state)
    )


async def task_uids_by_id(conn: AsyncConnection, user_id: str, task_ids: set[str]) -> dict[str, str]:
    """The UIDs the given tasks' objects carry (or will: `<id>@calagent` until delivered), by id."""
    if not task_ids:
        return {}
    found = await conn.execute(task_uids_query(user_id, task_ids))
    return {r.id: uid_of_task(r.id, r.uid) for r in found}


async def task_ids(conn: AsyncConnection, user_id: str, ids: set[str]) -> set[str]:
    """Which of `ids` name tasks of the user (a resource names an event or a task)."""
    if not ids:
        return set()
    found = await conn.execute(select(tasks.c.id).where(tasks.c.user_id == user_id, tasks.c.id.in_(ids)))
    return {r.id for r in found}


async def task_uids(conn: AsyncConnection, user_id: str, task_ids: set[str]) -> set[str]:
    return set((await task_uids_by_id(conn, user_id, task_ids)).values())


def still_blocks(found: list[Event], task_of: Mapping[str, str]) -> list[Event]:
    """Rows read again from the server, each still the block of the task its stored row was
    (`task_of`: event id → task id): an app that moved or renamed a block, or a version of the
    server's that won, does not make it an ordinary event."""
    return [row.evolve(task_id=task_of[row.id]) if row.id in task_of else row for row in found]


def read_task(body: str, task_id: str, tz: ZoneInfo) -> ReadTodo | None:
    try:
        return parse_todo(body, task_id=task_id, tz=tz)
    except (UnreadableObject, ValueError, KeyError):
        return None


class TaskDeliverer:
    """Sends one task's VTODO as the database holds it now (called by the outbox worker for a
    row of kind `task`, under the resource's advisory lock, in the worker's transaction)."""

    def __init__(self, vault: Vault, guard: Guard, clock: Clock, tz: ZoneInfo) -> None:
        self.vault = vault
        self.guard = guard
        self.clock = clock
        self.tz = tz  # reads floating and DATE values, as the inbound sync does

    async def deliver(self, conn: AsyncConnection, user_id: str, task_id: str) -> Outcome:
        resource = await rows.resource_by_event(conn, task_id)
        kept = await kept_task(conn, user_id, task_id)
        if resource is None and kept is None:
            return Outcome("delivered")  # made and removed before it ever reached the server
        if resource is not None:
            account = await rows.account(conn, self.vault, self.guard, resource.account_id)
        else:
            target = await rows.route(conn, self.vault, self.guard, user_id, None)
            account = target.account if target is not None else None
            if target is not None and account is not None:
                uid = (kept.uid if kept is not None else None) or local_uid(task_id)
                href = remote.href_for(target.calendar_url, uid)
                resource = rows.Resource(
                    task_id, user_id, account.id, target.calendar_url, href, uid, None, "local"
                )
        if account is None or resource is None or account.user_id != user_id:
            return Outcome("dropped", "no connected account")
        sent = await self._send(conn, account, resource, kept)
        return replace(sent, account_id=account.id)

    async def _send(
        self, conn: AsyncConnection, account: rows.Account, resource: rows.Resource, kept: KeptTask | None
    ) -> Outcome:
        login, user_id, task_id = account.login, resource.user_id, resource.event_id
        body = (
            None if kept is None else todo_body(kept.task, resource.uid, kept.ical, self.clock.now(), self.tz)
        )
        try:
            new = resource.etag is None and body is not None
            if new and not await asyncio.to_thread(remote.takes_todos, login, resource.calendar_url):
                return Outcome("dropped", "the calendar takes no tasks")
            if body is None:
                await asyncio.to_thread(
                    remote.delete, login, resource.calendar_url, resource.href, resource.etag
                )
                await conn.execute(caldav_resources.delete().where(caldav_resources.c.event_id == task_id))
                return Outcome("delivered")
            assert kept is not None
            if resource.etag is not None and body == kept.ical:
                return Outcome("delivered")  # the server holds this very object already
            etag = await asyncio.to_thread(
                remote.put, login, resource.calendar_url, resource.href, body, resource.etag
            )
            if etag is None:  # the server may have altered what it stored (RFC 4791 §5.3.4)
                found = await asyncio.to_thread(remote.fetch, login, resource.calendar_url, resource.href)
                if found is not None:
                    etag, body = found.etag, found.body
            await rows.save_resource(conn, resource, etag)
            await _keep_object(conn, user_id, task_id, resource.uid, body)
        except remote.PreconditionFailed:
            return await self._conflict(conn, account, resource, kept)
        except remote.Rejected as exc:  # 403, 404, 409 …: marked on the task, not retried
            await _mark(conn, user_id, task_id, "rejected")
            return Outcome("rejected", str(exc)[:500])
        except remote.Unavailable as exc:
            return retry(exc)
        return Outcome("delivered")

    async def _conflict(
        self, conn: AsyncConnection, account: rows.Account, resource: rows.Resource, kept: KeptTask | None
    ) -> Outcome:
        """Both sides changed the task: the server's version wins and is stored; our change, or
        our removal (`kept` None), is offered again (`Outcome.offer`)."""
        user_id, task_id = resource.user_id, resource.event_id
        server = await asyncio.to_thread(remote.fetch, account.login, resource.calendar_url, resource.href)
        if server is None:
            # Gone from the server under our write: the resource goes; a task still here is
            # written anew by its next change.
            await conn.execute(caldav_resources.delete().where(caldav_resources.c.event_id == task_id))
            return Outcome("delivered") if kept is None else Outcome("conflict", "removed on the server")
        theirs = read_task(server.body, task_id, self.tz)
        if theirs is None:
            await _mark(conn, user_id, task_id, "rejected")
            return Outcome("rejected", "the server's object is not a task")
        await rows.save_resource(conn, resource, server.etag)
        if kept is not None and todo_fingerprint(theirs.task) == todo_fingerprint(kept.task):
            # Our own earlier PUT, whose commit was lost: it is there already, once.
            await _keep_object(conn, user_id, task_id, resource.uid, server.body)
            return Outcome("delivered")
        await keep_task(conn, user_id, theirs.task, resource.uid, server.body, self.clock.now())
        # Our removal lost too: the task is back as the server has it, and removing it is offered.
        offer = self._offer(kept, theirs.task) if kept is not None else HeldTaskChange.removal(theirs.task)
        return Outcome("conflict", "changed on the server since the last sync", offer=offer)

    def _offer(self, kept: KeptTask, theirs: TaskOut) -> HeldTaskChange | None:
        """Our change as an offer on the server's version: what it changed of the object it was
        edited from (the kept one), field by field, never the whole of our task."""
        base = read_task(kept.ical, theirs.id, self.tz) if kept.ical else None
        patch = patch_between(base.task if base is not None else None, kept.task, theirs)
        change = offered_change(theirs, patch, self.clock.now())
        if change is None:
            return None
        asked = TaskPatch.model_validate({name: getattr(patch, name) for name in change.fields})
        return HeldTaskChange(change=change, patch=asked)
