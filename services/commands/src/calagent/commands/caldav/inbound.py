"""Inbound sync: what the user changed in their calendar app comes back into the stored rows.

Per account, on a timer, under a lease (`lease_owner`/`lease_until` on the account row) so only
one replica syncs an account at a time. Per calendar, RFC 6578 `sync-collection` from the stored
sync token; where a server offers none, the full listing is compared by ETag. What we wrote that no
listing has shown since is asked for by name (`unlisted`: a listing from a token names neither an
object made after it nor that object's removal before the next). An object whose ETag
is the one we stored is our own write coming back and is skipped. A resource with outbox rows still
waiting is left to the outbox worker: its conditional PUT meets the server's change (412) and
resolves it there, server first — one place decides a conflict, not two.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from opentelemetry import trace
from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from calagent.commands.adapters.sql_events import event_insert_values
from calagent.commands.adapters.store import SqlUnitOfWork, from_server
from calagent.commands.adapters.tables import (
    caldav_accounts,
    caldav_calendars,
    caldav_outbox,
    caldav_resources,
    events,
    tasks,
)
from calagent.commands.caldav import notes, progress, remote, rows
from calagent.commands.caldav.addresses import Guard
from calagent.commands.caldav.cards import CardSync
from calagent.commands.caldav.credentials import Vault
from calagent.commands.caldav.listing import Known, Listing, Plan, SyncStats, take_changed, take_deleted
from calagent.commands.caldav.todos import keep_task, still_blocks, task_ids, task_uids
from calagent.commands.caldav.withheld import Holds, looks_emptied
from calagent.commands.domain.model import Event, local_uid
from calagent.commands.ical.zones import zone_named
from calagent.commands.ports import UnitOfWork
from calagent.runtime.settle import is_transient

log = logging.getLogger("calagent.commands.caldav")
tracer = trace.get_tracer("calagent.commands.caldav")

LEASE = timedelta(seconds=60)
PARALLEL_ACCOUNTS = 4
# What a first sync reads before the rest: from a day before now to two weeks after.
NEAR = (timedelta(days=1), timedelta(weeks=2))
SYNC_TURN = "caldav-sync"


def process_alive(pid: int) -> bool:
    """Whether a process of this host runs under `pid` (signal 0 checks, sends nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def left_by_gone_process(owner: str, mine: str, alive: Callable[[int], bool]) -> bool:
    """Whether a lease `owner` (`<role>-<host>:<pid>`, as `mine` is) was taken by a process of
    this same host and role that runs no more."""
    their_host, _, their_pid = owner.rpartition(":")
    my_host, _, _ = mine.rpartition(":")
    return owner != mine and their_host == my_host and their_pid.isdigit() and not alive(int(their_pid))


# What runs, in the sync's transaction, on the events a sync wrote (the re-plan of task blocks
# they land on, contract §21).
AfterSync = Callable[[UnitOfWork, str, Sequence[Event]], Awaitable[None]]


class InboundSync:
    def __init__(
        self,
        engine: AsyncEngine,
        vault: Vault,
        owner: str,
        fallback_tz: str,
        guard: Guard,
        holds: Holds,
        after_sync: AfterSync | None = None,
    ) -> None:
        self.engine = engine
        self.vault = vault
        self.guard = guard
        self.owner = owner
        self.fallback_tz = ZoneInfo(fallback_tz)
        self.cards = CardSync(engine)
        self.holds = holds
        self.after_sync = after_sync

    async def sync_due(self, every: timedelta) -> SyncStats:
        """Sync every account not synced within `every` whose lease is free."""
        total = SyncStats()
        # Least recently tried first, a failure counting as a try: an account that fails every
        # round goes behind the others instead of ahead of them.
        tried = func.greatest(caldav_accounts.c.last_synced_at, caldav_accounts.c.sync_error_at)
        async with self.engine.connect() as conn:
            due = [
                r.id
                for r in await conn.execute(
                    select(caldav_accounts.c.id)
                    .where(
                        (caldav_accounts.c.last_synced_at.is_(None))
                        | (caldav_accounts.c.last_synced_at <= func.clock_timestamp() - every)
                    )
                    .order_by(tried.nulls_first(), caldav_accounts.c.id)
                    .limit(50)
                )
            ]
        # A few accounts at once: a server that answers slowly holds up its own account only.
        room = asyncio.Semaphore(PARALLEL_ACCOUNTS)

        async def one(account_id: str) -> None:
            async with room:
                stats = await self.sync_account(account_id)
            if stats is not None:
                total.changed += stats.changed
                total.deleted += stats.deleted
                total.skipped += stats.skipped
                total.withheld += stats.withheld

        async with asyncio.TaskGroup() as group:
            for account_id in due:
                group.create_task(one(account_id))
        return total

    async def release_stale(self, alive: Callable[[int], bool] = process_alive) -> int:
        """Leases left by an earlier process of this host that is gone — a service killed in the
        middle of a sync and started again — released at start instead of waited out (up to
        `LEASE` of rounds with nothing read). A lease of another host, or of a process still
        running here (another replica), is left alone. How many were released."""
        released = 0
        async with self.engine.begin() as conn:
            held = await conn.execute(
                select(caldav_accounts.c.id, caldav_accounts.c.lease_owner).where(
                    caldav_accounts.c.lease_owner.is_not(None),
                    caldav_accounts.c.lease_owner != self.owner,
                    caldav_accounts.c.lease_until > func.clock_timestamp(),
                )
            )
            for row in held.all():
                if not left_by_gone_process(row.lease_owner, self.owner, alive):
                    continue
                await conn.execute(
                    update(caldav_accounts)
                    .where(caldav_accounts.c.id == row.id, caldav_accounts.c.lease_owner == row.lease_owner)
                    .values(lease_owner=None, lease_until=None)
                )
                released += 1
        return released

    async def take_lease(self, account_id: str) -> bool:
        async with self.engine.begin() as conn:
            taken = await conn.execute(
                update(caldav_accounts)
                .where(
                    caldav_accounts.c.id == account_id,
                    (caldav_accounts.c.lease_until.is_(None))
                    | (caldav_accounts.c.lease_until < func.clock_timestamp())
                    | (caldav_accounts.c.lease_owner == self.owner),
                )
                .values(lease_owner=self.owner, lease_until=func.clock_timestamp() + LEASE)
                .returning(caldav_accounts.c.id)
            )
            return taken.first() is not None

    async def release_lease(self, account_id: str, synced: bool, error: str | None = None) -> None:
        """The lease given up; the account's health says how the sync went (contract §22): when
        it last synced, or why it did not, in our words."""
        values: dict[str, object] = {"lease_owner": None, "lease_until": None}
        if synced:
            values.update(last_synced_at=func.clock_timestamp(), sync_error=None, sync_error_at=None)
        elif error is not None:
            values.update(sync_error=error[:500], sync_error_at=func.clock_timestamp())
        async with self.engine.begin() as conn:
            await conn.execute(
                update(caldav_accounts)
                .where(caldav_accounts.c.id == account_id, caldav_accounts.c.lease_owner == self.owner)
                .values(**values)
            )

    async def sync_account(self, account_id: str) -> SyncStats | None:
        """None when another replica holds the account, or it is gone, or the server is down."""
        if not await self.take_lease(account_id):
            return None
        synced = False
        error: str | None = None
        stats = SyncStats()
        try:
            with tracer.start_as_current_span("sync.inbound", attributes={"calagent.account_id": account_id}):
                async with self.engine.connect() as conn:
                    account = await rows.account(conn, self.vault, self.guard, account_id)
                    calendars = (
                        await conn.execute(
                            select(
                                caldav_calendars.c.url,
                                caldav_calendars.c.name,
                                caldav_calendars.c.owned,
                                caldav_calendars.c.sync_token,
                            )
                            .where(caldav_calendars.c.account_id == account_id)
                            .order_by(caldav_calendars.c.position)
                        )
                    ).all()
                if account is None:
                    return None
                note = partial(
                    progress.noted, self.engine, account_id, self.owner, LEASE, total=len(calendars)
                )
                await note(done=0, events=0)
                await self._near_first(account, calendars, stats)
                await note(done=0, events=stats.changed)
                for done, calendar in enumerate(calendars, start=1):
                    async with self.engine.connect() as conn:
                        listed_at = (await conn.execute(select(func.clock_timestamp()))).scalar_one()
                    found = await asyncio.to_thread(
                        remote.changes, account.login, calendar.url, calendar.sync_token
                    )
                    if not found.complete:
                        found = await self._ask_unlisted(account, calendar.url, found)
                    place = rows.Place(calendar.url, calendar.name, calendar.owned)
                    await self._apply(account, place, found, stats, listed_at)
                    await note(done=done, events=stats.changed)
                # The address books after the calendars: a server that cannot serve them (or has
                # none) leaves the calendars synced all the same.
                await self.cards.sync(account)
                synced = True
        except remote.RemoteError as exc:
            log.warning("inbound sync of account %s failed: %s", account_id, exc)
            error = f"the last sync failed: {exc}"
        except Exception as exc:
            error = f"the last sync failed ({type(exc).__name__})"
            if is_transient(exc):
                raise  # the database is down: every account's round fails alike (worker.py)
            # Anything else is this account's own: recorded on it, and the round goes on to the
            # next account (one person's calendar never stops anyone else's sync).
            log.exception("inbound sync of account %s failed", account_id)
        finally:
            await self.release_lease(account_id, synced, error)
        return stats if synced else None

    async def _near_first(self, account: rows.Account, calendars: Sequence[Any], stats: SyncStats) -> None:
        """Calendars never synced show the days about now first (issue 44 item 9): a first sync
        of ten calendars and thousands of events took over a minute before the page showed this
        week. One calendar-query per calendar for what happens in `NEAR`, applied as any listing
        (nothing is removed by it); the full listing after it skips those by their ETags."""
        now = self.holds.clock.now()  # the service's clock, which the holds carry
        for calendar in calendars:
            if calendar.sync_token is not None:
                continue
            async with self.engine.connect() as conn:
                listed_at = (await conn.execute(select(func.clock_timestamp()))).scalar_one()
            try:
                objects = await asyncio.to_thread(
                    remote.near, account.login, calendar.url, now - NEAR[0], now + NEAR[1]
                )
            except remote.RemoteError as exc:
                log.info("no near-first listing of %s: %s", calendar.url, exc)  # the full one follows
                continue
            found = remote.Changes(
                objects, [], None, complete=False, listed=frozenset(o.href for o in objects)
            )
            place = rows.Place(calendar.url, calendar.name, calendar.owned)
            await self._apply(account, place, found, stats, listed_at)

    async def _ask_unlisted(
        self, account: rows.Account, calendar_url: str, found: remote.Changes
    ) -> remote.Changes:
        """The listing, with what it cannot name asked for by name: the objects we wrote that no
        listing has shown since (`unlisted`) and this one names neither changed nor removed. A
        sync-token listing names what changed between two tokens, so an object we made after the
        last token and the user's calendar app removed before this one is named by neither
        (Xandikos compares its two git trees; the library's own token for a server without
        any is the same before and after): without asking, it would stay here for good."""
        named = (
            found.listed | {obj.href for obj in found.changed} | set(map(remote.normal_href, found.deleted))
        )
        async with self.engine.connect() as conn:
            unlisted = [
                r.href
                for r in await conn.execute(
                    select(caldav_resources.c.href).where(
                        caldav_resources.c.account_id == account.id,
                        caldav_resources.c.calendar_url == calendar_url,
                        caldav_resources.c.unlisted,
                    )
                )
                if r.href not in named
            ]
        if not unlisted:
            return found
        changed, deleted = list(found.changed), list(found.deleted)
        for href in unlisted:
            obj = await asyncio.to_thread(remote.fetch, account.login, calendar_url, href)
            if obj is None:
                deleted.append(href)
            else:
                changed.append(obj)
        shown = frozenset(obj.href for obj in changed)
        return replace(found, changed=changed, deleted=deleted, listed=found.listed | shown)

    async def _apply(
        self,
        account: rows.Account,
        place: rows.Place,
        found: remote.Changes,
        stats: SyncStats,
        listed_at: datetime,
    ) -> None:
        """Apply one calendar's changes. A resource the outbox wrote after `listed_at` is newer
        than what the listing says about it (or about its absence): it is left alone."""
        async with self.engine.connect() as conn:
            await conn.begin()
            uow = from_server(conn)  # the server's own changes are not sent back to it
            # The user's lock: conflict checks and stubs of this user see all of the sync or none.
            await uow.lock_user(account.user_id)
            # One read of what is known, one write of what changed: a first sync of a full
            # calendar is a few statements, not a few per event.
            # What waits for the outbox is read before what is known: a delivery that commits in
            # between is then seen as known, never as a stranger's object with our UID.
            waiting = await _waiting(conn, account.user_id)
            waiting_uids = await _uids(conn, account.user_id, waiting)
            known = {r.href: r for r in await rows.resources_of(conn, account.id)}
            listed = found.listed | {obj.href for obj in found.changed}
            shown = {r.event_id for href, r in known.items() if href in listed}
            withheld = await self.holds.settle(conn, uow, account, place, shown)
            plan = Plan()
            # A floating time (no TZID, no Z) is on the user's own wall clock (contract §14).
            saved = (await uow.settings.settings_of([account.user_id])).get(account.user_id)
            zone = zone_named(saved.zone(self.fallback_tz.key)) if saved is not None else self.fallback_tz
            read = Listing(account, place, found, stats, listed_at, zone)
            written = await rows.rows_read_again(conn, account.user_id, known, found.changed)
            seen = take_changed(read, Known(known, waiting, waiting_uids, written), plan)
            gone = take_deleted(place.url, found, listed_at, known, waiting | withheld, seen | listed)
            # Events and tasks alike: a task deleted in its app is gone here too, and a calendar
            # that looks emptied of its events, or of its tasks, is not copied (each counted
            # apart: a calendar's tasks are few beside its events and their blocks).
            on_place = {r.event_id for r in known.values() if r.calendar_url == place.url}
            tasks_here = await task_ids(conn, account.user_id, on_place)
            gone_tasks = sum(1 for g in gone if g in tasks_here)
            here = len(on_place)
            emptied = looks_emptied(len(gone) - gone_tasks, here - len(tasks_here)) or looks_emptied(
                gone_tasks, len(tasks_here)
            )
            if gone and (withheld or emptied):
                # A glitch is not copied: nothing is deleted, the user is asked (withheld.py).
                shows = here - len(gone) - len(withheld)
                await self.holds.withhold(conn, uow, account, place, gone, had=here, shows=shows)
                stats.withheld += len(gone)
            else:
                plan.removed.extend(gone)
                stats.deleted += len(gone)
            plan.object_notes = notes.merged(
                await _notes_of(conn, account.id, place.url),
                plan.object_notes,
                read_again=plan.read_again,
                gone={remote.normal_href(h) for h in found.deleted},
                listed=listed if found.complete else None,
            )
            await _write(conn, account, place.url, found.token, plan)
            await self._follow(uow, account.user_id, plan, tasks_here)
            await conn.commit()

    async def _follow(self, uow: SqlUnitOfWork, user_id: str, plan: Plan, tasks_here: set[str]) -> None:
        """What the server's changes lead to here, which are our writes and go to the server like
        any: a task gone there takes its blocks with it, and the blocks' TRANSP is decided again
        (removed events free room too; contract §21)."""
        before = {user: set(ids) for user, ids in uow.effects.touched.items()}
        removed_tasks = {g for g in plan.removed if g in tasks_here}
        if removed_tasks:
            orphans = [b.id for b in await uow.tasks.blocks(user_id) if b.task_id in removed_tasks]
            await uow.events.delete_events(user_id, orphans)
        if (plan.fresh or plan.removed) and self.after_sync is not None:
            await self.after_sync(uow, user_id, plan.fresh)
        ours = {user: ids - before.get(user, set()) for user, ids in uow.effects.touched.items()}
        await uow.sync.queue_deliveries({user: ids for user, ids in ours.items() if ids})


async def _uids(conn: AsyncConnection, user_id: str, event_ids: set[str]) -> set[str]:
    """The UIDs the given events carry (`<id>@calagent` for a row stored before UIDs were)."""
    if not event_ids:
        return set()
    found = await conn.execute(
        select(events.c.id, events.c.uid).where(events.c.user_id == user_id, events.c.id.in_(event_ids))
    )
    return {r.uid or local_uid(r.id) for r in found} | await task_uids(conn, user_id, event_ids)


async def _waiting(conn: AsyncConnection, user_id: str) -> set[str]:
    """The user's resources with deliveries still waiting: the outbox worker settles those."""
    found = await conn.execute(
        select(caldav_outbox.c.event_id)
        .where(caldav_outbox.c.user_id == user_id, caldav_outbox.c.delivered_at.is_(None))
        .distinct()
    )
    return {r.event_id for r in found}


async def _write(
    conn: AsyncConnection, account: rows.Account, calendar_url: str, token: str | None, plan: Plan
) -> None:
    if plan.replaced:
        # A block of a task stays one when its calendar app moves or renames it (contract §21):
        # the object says whose block it is only in a RELATED-TO we do not read back; the row did.
        blocks = await conn.execute(
            select(events.c.id, events.c.task_id).where(
                events.c.user_id == account.user_id,
                events.c.id.in_(plan.replaced),
                events.c.task_id.is_not(None),
            )
        )
        plan.fresh = still_blocks(plan.fresh, {r.id: r.task_id for r in blocks})
    if plan.replaced or plan.removed:
        await conn.execute(
            delete(events).where(
                events.c.user_id == account.user_id,
                events.c.id.in_(plan.replaced + plan.removed)
                | events.c.series_id.in_(plan.replaced + plan.removed),
            )
        )
    if plan.removed:
        await conn.execute(caldav_resources.delete().where(caldav_resources.c.event_id.in_(plan.removed)))
        # A VTODO gone from the server takes its task (its resource names the task).
        await conn.execute(
            delete(tasks).where(tasks.c.user_id == account.user_id, tasks.c.id.in_(plan.removed))
        )
    for task, uid, body in plan.tasks:
        now = (await conn.execute(select(func.clock_timestamp()))).scalar_one()
        await keep_task(conn, account.user_id, task, uid, body, now)
    if plan.fresh:
        await conn.execute(
            events.insert(), [event_insert_values(e, turn_id=SYNC_TURN, key=None) for e in plan.fresh]
        )
    if plan.resources:
        statement = pg_insert(caldav_resources).values(plan.resources)
        await conn.execute(
            statement.on_conflict_do_update(
                index_elements=[caldav_resources.c.event_id],
                set_={
                    "etag": statement.excluded.etag,
                    "updated_at": func.clock_timestamp(),
                    "unlisted": False,
                },
            )
        )
    for event_id, etag in plan.listed:
        # Unless a delivery wrote it again since (a new ETag): that write is unlisted in turn.
        await conn.execute(
            update(caldav_resources)
            .where(caldav_resources.c.event_id == event_id, caldav_resources.c.etag == etag)
            .values(unlisted=False)
        )
    await conn.execute(
        update(caldav_calendars)
        .where(caldav_calendars.c.account_id == account.id, caldav_calendars.c.url == calendar_url)
        .values(sync_token=token, object_notes=notes.dumped(plan.object_notes))
    )


async def _notes_of(conn: AsyncConnection, account_id: str, calendar_url: str) -> list[notes.ObjectNote]:
    raw = await conn.scalar(
        select(caldav_calendars.c.object_notes).where(
            caldav_calendars.c.account_id == account_id, caldav_calendars.c.url == calendar_url
        )
    )
    return notes.read_notes(raw)
