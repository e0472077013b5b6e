"""The SQL the sync paths share: accounts and their logins, resources, the rows of one resource."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from calagent.commands.adapters.sql_events import event_from_row
from calagent.commands.adapters.tables import caldav_accounts, caldav_calendars, caldav_resources, events
from calagent.commands.caldav.addresses import Guard
from calagent.commands.caldav.credentials import Vault
from calagent.commands.caldav.remote import Login, RemoteObject, normal_href
from calagent.commands.domain.model import Event
from calagent.commands.ical.parse import fingerprint


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
    unlisted: bool = False


def _resource(row: Row[Any]) -> Resource:
    # The table's columns are the record's fields, by name.
    return Resource(**row._mapping)


async def resource_by_event(conn: AsyncConnection, event_id: str) -> Resource | None:
    row = (
        await conn.execute(select(caldav_resources).where(caldav_resources.c.event_id == event_id))
    ).first()
    return _resource(row) if row is not None else None


async def resources_of(conn: AsyncConnection, account_id: str) -> list[Resource]:
    found = await conn.execute(select(caldav_resources).where(caldav_resources.c.account_id == account_id))
    return [_resource(r) for r in found]


async def save_resource(conn: AsyncConnection, resource: Resource, etag: str | None) -> None:
    """The resource as a write left it on the server: where it is and the ETag it now has."""
    statement = pg_insert(caldav_resources).values(
        event_id=resource.event_id,
        user_id=resource.user_id,
        account_id=resource.account_id,
        calendar_url=resource.calendar_url,
        href=normal_href(resource.href),
        uid=resource.uid,
        etag=etag,
        origin=resource.origin,
        updated_at=func.clock_timestamp(),
        # Until a listing shows it: one made and removed between two sync tokens never is.
        unlisted=True,
    )
    await conn.execute(
        statement.on_conflict_do_update(
            index_elements=[caldav_resources.c.event_id],
            set_={
                "etag": statement.excluded.etag,
                "updated_at": statement.excluded.updated_at,
                "unlisted": True,
            },
        )
    )


async def resource_rows(conn: AsyncConnection, user_id: str, event_id: str) -> list[Event]:
    """The stored rows of one resource: the event or master, and the master's overrides."""
    return (await rows_by_resource(conn, user_id, [event_id])).get(event_id, [])


async def rows_by_resource(
    conn: AsyncConnection, user_id: str, event_ids: Collection[str]
) -> dict[str, list[Event]]:
    """The stored rows of several resources in one read, by the event id each resource names."""
    if not event_ids:
        return {}
    ids = list(event_ids)
    found = await conn.execute(
        select(events)
        .where(events.c.user_id == user_id, or_(events.c.id.in_(ids), events.c.series_id.in_(ids)))
        .order_by(events.c.start_at, events.c.id)
    )
    by_resource: dict[str, list[Event]] = {}
    for row in found:
        event = event_from_row(row)
        by_resource.setdefault(event.series_id or event.id, []).append(event)
    return by_resource


async def rows_read_again(
    conn: AsyncConnection, user_id: str, known: Mapping[str, Resource], listed: Iterable[RemoteObject]
) -> dict[str, list[Event]]:
    """What we hold of each known object a listing shows with another ETag, by event id: a sync
    tells by it whether the server's version is our own write coming back (still the user's) or
    someone else's words now (contract §19, `Place.rows`)."""
    ids = {
        known[o.href].event_id
        for o in listed
        if o.href in known and (o.etag is None or known[o.href].etag != o.etag)
    }
    return await rows_by_resource(conn, user_id, ids)


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


@dataclass(frozen=True)
class Route:
    """Where an event of the user lives on a server: an account and one of its calendars."""

    account: Account
    calendar_url: str
    calendar_name: str
    named: bool  # the event's calendar name is this calendar's (not the default taken instead)


@dataclass(frozen=True)
class Connected:
    account_id: str
    url: str
    name: str
    is_default: bool


async def user_calendars(conn: AsyncConnection, user_id: str) -> list[Connected]:
    """Every connected calendar of the user, accounts in the order they were connected."""
    found = await conn.execute(
        select(
            caldav_calendars.c.account_id,
            caldav_calendars.c.url,
            caldav_calendars.c.name,
            caldav_calendars.c.is_default,
        )
        .join(caldav_accounts, caldav_accounts.c.id == caldav_calendars.c.account_id)
        .where(caldav_accounts.c.user_id == user_id)
        .order_by(caldav_accounts.c.created_at, caldav_accounts.c.id, caldav_calendars.c.position)
    )
    return [Connected(r.account_id, r.url, r.name, bool(r.is_default)) for r in found]


async def route(
    conn: AsyncConnection, vault: Vault, guard: Guard, user_id: str, calendar: str | None
) -> Route | None:
    """The calendar an event named `calendar` goes to: the connected calendar of that name (names
    are unique per user across accounts), else the user's default one (else the first)."""
    found = await user_calendars(conn, user_id)
    if not found:
        return None
    named = next((c for c in found if calendar is not None and c.name == calendar), None)
    chosen = named or next((c for c in found if c.is_default), found[0])
    target = await account(conn, vault, guard, chosen.account_id)
    if target is None:
        return None
    return Route(target, chosen.url, chosen.name, named is not None)


async def move_resource(conn: AsyncConnection, event_id: str, to: Route, href: str) -> None:
    """The resource now lives in another calendar (maybe of another account), not yet written."""
    await conn.execute(
        update(caldav_resources)
        .where(caldav_resources.c.event_id == event_id)
        .values(account_id=to.account.id, calendar_url=to.calendar_url, href=href, etag=None)
    )


@dataclass(frozen=True)
class Place:
    """One calendar of an account as what it brings is stored: under its name, and marked as
    someone else's words (contract §19) when the user does not own it, or when it is not what
    this system wrote there."""

    url: str
    name: str
    owned: bool

    def rows(self, found: list[Event], written: Sequence[Event] = ()) -> list[Event]:
        """The rows read from this calendar, as they are stored. Text that reached the calendar
        other than through this system (another app, someone it is shared with) is someone else's
        words even in a calendar the user owns; only our own write coming back as we hold it
        (`found` says what `written`, the object's rows stored here, say) keeps their mark."""
        ours = bool(written) and fingerprint(found) == fingerprint(written)
        outside = not ours or any(row.outside_text for row in written)
        return [row.evolve(foreign_calendar=not self.owned, outside_text=outside) for row in found]


async def place(conn: AsyncConnection, account_id: str, url: str) -> Place:
    row = (
        await conn.execute(
            select(caldav_calendars.c.name, caldav_calendars.c.owned).where(
                caldav_calendars.c.account_id == account_id, caldav_calendars.c.url == url
            )
        )
    ).first()
    return Place(url, str(row.name), bool(row.owned)) if row is not None else Place(url, "CalDAV", True)
