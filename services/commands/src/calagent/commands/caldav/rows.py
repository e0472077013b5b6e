"""The SQL the sync paths share: accounts and their logins, resources, the rows of one resource."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from calagent.commands.adapters.store import event_from_row
from calagent.commands.adapters.tables import caldav_accounts, caldav_calendars, caldav_resources, events
from calagent.commands.caldav.addresses import Guard
from calagent.commands.caldav.credentials import Vault
from calagent.commands.caldav.remote import Login
from calagent.commands.domain.model import Event


@dataclass(frozen=True)
class Resource:
    event_id: str
    user_id: str
    account_id: str
    calendar_url: str
    href: str
    uid: str
    etag: str | None
    origin: str
    updated_at: datetime | None = None


def _resource(row: Row[Any]) -> Resource:
    return Resource(
        event_id=row.event_id,
        user_id=row.user_id,
        account_id=row.account_id,
        calendar_url=row.calendar_url,
        href=row.href,
        uid=row.uid,
        etag=row.etag,
        origin=row.origin,
        updated_at=row.updated_at,
    )


async def resource_by_event(conn: AsyncConnection, event_id: str) -> Resource | None:
    row = (
        await conn.execute(select(caldav_resources).where(caldav_resources.c.event_id == event_id))
    ).first()
    return _resource(row) if row is not None else None


async def resource_by_href(conn: AsyncConnection, account_id: str, href: str) -> Resource | None:
    row = (
        await conn.execute(
            select(caldav_resources).where(
                caldav_resources.c.account_id == account_id, caldav_resources.c.href == href
            )
        )
    ).first()
    return _resource(row) if row is not None else None


async def resources_of(conn: AsyncConnection, account_id: str) -> list[Resource]:
    found = await conn.execute(select(caldav_resources).where(caldav_resources.c.account_id == account_id))
    return [_resource(r) for r in found]


async def resource_rows(conn: AsyncConnection, user_id: str, event_id: str) -> list[Event]:
    """The stored rows of one resource: the event or master, and the master's overrides."""
    rows = await conn.execute(
        select(events)
        .where(events.c.user_id == user_id, or_(events.c.id == event_id, events.c.series_id == event_id))
        .order_by(events.c.start_at, events.c.id)
    )
    return [event_from_row(r) for r in rows]


@dataclass(frozen=True)
class Account:
    id: str
    user_id: str
    login: Login


async def account(conn: AsyncConnection, vault: Vault, guard: Guard, account_id: str) -> Account | None:
    row = (await conn.execute(select(caldav_accounts).where(caldav_accounts.c.id == account_id))).first()
    if row is None:
        return None
    return Account(row.id, row.user_id, Login(row.url, row.username, vault.open(row.secret), guard))


async def first_account(conn: AsyncConnection, vault: Vault, guard: Guard, user_id: str) -> Account | None:
    """The account new events go to: the user's first connected one."""
    row = (
        await conn.execute(
            select(caldav_accounts.c.id)
            .where(caldav_accounts.c.user_id == user_id)
            .order_by(caldav_accounts.c.created_at, caldav_accounts.c.id)
            .limit(1)
        )
    ).first()
    return await account(conn, vault, guard, row.id) if row is not None else None


async def calendar_for(conn: AsyncConnection, account_id: str, name: str) -> str | None:
    """The account's calendar of this name, else its default one."""
    rows = (
        await conn.execute(
            select(caldav_calendars.c.url, caldav_calendars.c.name, caldav_calendars.c.is_default)
            .where(caldav_calendars.c.account_id == account_id)
            .order_by(caldav_calendars.c.position)
        )
    ).all()
    for row in rows:
        if row.name == name:
            return str(row.url)
    for row in rows:
        if row.is_default:
            return str(row.url)
    return str(rows[0].url) if rows else None


async def calendar_name(conn: AsyncConnection, account_id: str, url: str) -> str:
    name = await conn.scalar(
        select(caldav_calendars.c.name).where(
            caldav_calendars.c.account_id == account_id, caldav_calendars.c.url == url
        )
    )
    return str(name) if name else "CalDAV"
