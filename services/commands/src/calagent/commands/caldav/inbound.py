"""Inbound sync: what the user changed in their calendar app comes back into the stored rows.

Per account, on a timer, under a lease (`lease_owner`/`lease_until` on the account row) so only
one replica syncs an account at a time. Per calendar, RFC 6578 `sync-collection` from the stored
sync token; where a server offers none, the full listing is compared by ETag. An object whose ETag
is the one we stored is our own write coming back and is skipped. A resource with outbox rows still
waiting is left to the outbox worker: its conditional PUT meets the server's change (412) and
resolves it there, server first — one place decides a conflict, not two.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta
from zoneinfo import ZoneInfo

from opentelemetry import trace
from sqlalchemy import exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from calagent.commands.adapters.store import SqlUnitOfWork
from calagent.commands.adapters.tables import (
    caldav_accounts,
    caldav_calendars,
    caldav_outbox,
    caldav_resources,
)
from calagent.commands.caldav import remote, rows
from calagent.commands.caldav.credentials import Vault
from calagent.commands.caldav.objects import UnreadableObject, parse_resource
from calagent.commands.txn import new_id

log = logging.getLogger("calagent.commands.caldav")
tracer = trace.get_tracer("calagent.commands.caldav")

LEASE = timedelta(seconds=60)
SYNC_TURN = "caldav-sync"


@dataclass
class SyncStats:
    changed: int = 0
    deleted: int = 0
    skipped: int = 0


class InboundSync:
    def __init__(self, engine: AsyncEngine, vault: Vault, owner: str, fallback_tz: str) -> None:
        self.engine = engine
        self.vault = vault
        self.owner = owner
        self.fallback_tz = ZoneInfo(fallback_tz)

    async def sync_due(self, every: timedelta) -> SyncStats:
        """Sync every account not synced within `every` whose lease is free."""
        total = SyncStats()
        async with self.engine.connect() as conn:
            due = [
                r.id
                for r in await conn.execute(
                    select(caldav_accounts.c.id)
                    .where(
                        (caldav_accounts.c.last_synced_at.is_(None))
                        | (caldav_accounts.c.last_synced_at <= func.clock_timestamp() - every)
                    )
                    .order_by(caldav_accounts.c.last_synced_at.nulls_first())
                    .limit(50)
                )
            ]
        for account_id in due:
            stats = await self.sync_account(account_id)
            if stats is not None:
                total.changed += stats.changed
                total.deleted += stats.deleted
                total.skipped += stats.skipped
        return total

    async def _lease(self, account_id: str) -> bool:
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

    async def _release(self, account_id: str, synced: bool) -> None:
        values: dict[str, object] = {"lease_owner": None, "lease_until": None}
        if synced:
            values["last_synced_at"] = func.clock_timestamp()
        async with self.engine.begin() as conn:
            await conn.execute(
                update(caldav_accounts)
                .where(caldav_accounts.c.id == account_id, caldav_accounts.c.lease_owner == self.owner)
                .values(**values)
            )

    async def sync_account(self, account_id: str) -> SyncStats | None:
        """None when another replica holds the account, or it is gone, or the server is down."""
        if not await self._lease(account_id):
            return None
        synced = False
        stats = SyncStats()
        try:
            with tracer.start_as_current_span("sync.inbound", attributes={"calagent.account_id": account_id}):
                async with self.engine.connect() as conn:
                    account = await rows.account(conn, self.vault, account_id)
                    calendars = (
                        await conn.execute(
                            select(
                                caldav_calendars.c.url, caldav_calendars.c.name, caldav_calendars.c.sync_token
                            )
                            .where(caldav_calendars.c.account_id == account_id)
                            .order_by(caldav_calendars.c.position)
                        )
                    ).all()
                if account is None:
                    return None
                for calendar in calendars:
                    found = await asyncio.to_thread(
                        remote.changes, account.login, calendar.url, calendar.sync_token
                    )
                    await self._apply(account, calendar.url, calendar.name, found, stats)
                synced = True
        except remote.RemoteError as exc:
            log.warning("inbound sync of account %s failed: %s", account_id, exc)
        finally:
            await self._release(account_id, synced)
        return stats if synced else None

    async def _apply(
        self, account: rows.Account, calendar_url: str, name: str, found: remote.Changes, stats: SyncStats
    ) -> None:
        async with self.engine.connect() as conn:
            await conn.begin()
            uow = SqlUnitOfWork(conn)
            uow.outbound = False  # the server's own changes are not sent back to it
            # The user's lock: conflict checks and stubs of this user see all of the sync or none.
            await uow.lock_user(account.user_id)
            seen: set[str] = set()
            for obj in found.changed:
                seen.add(obj.href)
                resource = await rows.resource_by_href(conn, account.id, obj.href)
                if resource is not None and obj.etag is not None and resource.etag == obj.etag:
                    continue  # our own write, or nothing new
                if resource is not None and await _waiting(conn, resource.event_id):
                    stats.skipped += 1
                    continue
                event_id = resource.event_id if resource is not None else new_id()
                try:
                    theirs = parse_resource(
                        obj.body,
                        master_id=event_id,
                        user_id=account.user_id,
                        calendar=name,
                        fallback_tz=self.fallback_tz,
                    )
                except (UnreadableObject, ValueError, KeyError) as exc:
                    log.info("skipping %s: %s", obj.href, exc)
                    stats.skipped += 1
                    continue
                if resource is not None:
                    old = await rows.resource_rows(conn, account.user_id, event_id)
                    await uow.delete_events(account.user_id, [e.id for e in old])
                for row in theirs:
                    await uow.insert_event(row, turn_id=SYNC_TURN, key=None)
                await _store_resource(conn, account, event_id, calendar_url, obj, resource)
                stats.changed += 1
            gone = list(found.deleted)
            if found.complete:
                known = await conn.execute(
                    select(caldav_resources.c.href).where(
                        caldav_resources.c.account_id == account.id,
                        caldav_resources.c.calendar_url == calendar_url,
                    )
                )
                gone += [r.href for r in known if r.href not in seen]
            for href in gone:
                resource = await rows.resource_by_href(conn, account.id, remote.normal_href(href))
                if resource is None or await _waiting(conn, resource.event_id):
                    continue
                old = await rows.resource_rows(conn, account.user_id, resource.event_id)
                await uow.delete_events(account.user_id, [e.id for e in old])
                await conn.execute(
                    caldav_resources.delete().where(caldav_resources.c.event_id == resource.event_id)
                )
                stats.deleted += 1
            await conn.execute(
                update(caldav_calendars)
                .where(caldav_calendars.c.account_id == account.id, caldav_calendars.c.url == calendar_url)
                .values(sync_token=found.token)
            )
            await conn.commit()


async def _waiting(conn: AsyncConnection, event_id: str) -> bool:
    value = await conn.scalar(
        select(exists().where(caldav_outbox.c.event_id == event_id, caldav_outbox.c.delivered_at.is_(None)))
    )
    return bool(value)


async def _store_resource(
    conn: AsyncConnection,
    account: rows.Account,
    event_id: str,
    calendar_url: str,
    obj: remote.RemoteObject,
    resource: rows.Resource | None,
) -> None:
    if resource is not None:
        await conn.execute(
            update(caldav_resources)
            .where(caldav_resources.c.event_id == event_id)
            .values(etag=obj.etag, updated_at=func.clock_timestamp())
        )
        return
    uid = _uid_of(obj.body) or event_id
    await conn.execute(
        caldav_resources.insert().values(
            event_id=event_id,
            user_id=account.user_id,
            account_id=account.id,
            calendar_url=calendar_url,
            href=obj.href,
            uid=uid,
            etag=obj.etag,
            origin="remote",
            updated_at=func.clock_timestamp(),
        )
    )


def _uid_of(body: str) -> str | None:
    for line in body.splitlines():
        if line.upper().startswith("UID:"):
            return line[4:].strip()
    return None
