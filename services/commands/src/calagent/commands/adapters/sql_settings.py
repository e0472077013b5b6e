"""What users set: their calendars, settings, free/busy sharing and feeds."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, BindParameter, ColumnElement, Select, String, bindparam, func, or_, select
from sqlalchemy.dialects.postgresql import Insert
from sqlalchemy.dialects.postgresql import insert as pg_insert

from calagent.commands.adapters.sql_core import SqlSession
from calagent.commands.adapters.tables import (
    caldav_accounts,
    caldav_calendars,
    calendars,
    feeds,
    sharing,
    user_settings,
)
from calagent.commands.domain.settings import StoredSettings
from calagent.contracts.settings import ShareEntry


# Read by every turn's context and every create: built once, its parameter bound per call.
# The first name is the user's default (contract §1), for a read and a write alike: the connected
# calendar marked default when an account is connected (where the assistant's events go, §12), else
# the first of the list.
def connected_default(user_id: ColumnElement[str], name: ColumnElement[str]) -> ColumnElement[bool]:
    """Whether `name` is the calendar marked default on one of the user's connected accounts."""
    return (
        select(caldav_calendars.c.name)
        .join(caldav_accounts, caldav_accounts.c.id == caldav_calendars.c.account_id)
        .where(
            caldav_accounts.c.user_id == user_id,
            caldav_calendars.c.is_default,
            caldav_calendars.c.name == name,
        )
        .exists()
    )


def calendar_order(user_id: ColumnElement[str], name: Any, position: Any) -> tuple[Any, ...]:
    """The order calendars are listed in: the connected default first, then as positioned."""
    return (connected_default(user_id, name).desc(), position, name)


CALENDARS = (
    select(calendars.c.name)
    .where(calendars.c.user_id == bindparam("user_id"))
    .order_by(*calendar_order(calendars.c.user_id, calendars.c.name, calendars.c.position))
)
# A user's first calendars, under the default names given (`defaults`), in that order.
_DEFAULT_NAMES = (
    func.unnest(bindparam("defaults", type_=ARRAY(String)))
    .table_valued("name", with_ordinality="ordinal")
    .render_derived(name="wanted")
)


def make_defaults(user_id: BindParameter[str], *only_if: ColumnElement[bool]) -> Insert:
    """The user's calendars made under the default names (`defaults`), in their order, where
    `only_if` holds; names the user has are left alone."""
    named = select(user_id, _DEFAULT_NAMES.c.name, _DEFAULT_NAMES.c.ordinal - 1)
    return (
        pg_insert(calendars)
        .from_select(["user_id", "name", "position"], named.where(*only_if))
        .on_conflict_do_nothing()
    )


MAKE_DEFAULTS = make_defaults(bindparam("user_id", type_=String))


def connected_names(user_id: ColumnElement[str]) -> Select[tuple[str]]:
    """The names of the user's calendars that a connected account brought: the server's display
    names, someone else's words (contract §19), never shown to the model as text."""
    return (
        select(caldav_calendars.c.name)
        .join(caldav_accounts, caldav_accounts.c.id == caldav_calendars.c.account_id)
        .where(caldav_accounts.c.user_id == user_id)
    )


CONNECTED_NAMES = connected_names(bindparam("user_id", type_=String))


class SqlSettings:
    def __init__(self, session: SqlSession) -> None:
        self.session = session

    async def calendars(self, user_id: str, defaults: Sequence[str]) -> list[str]:
        names = list((await self.session.run(CALENDARS, {"user_id": user_id})).scalars())
        if names:
            return names
        await self.session.run(MAKE_DEFAULTS, {"user_id": user_id, "defaults": list(defaults)})
        return list((await self.session.run(CALENDARS, {"user_id": user_id})).scalars())

    async def connected_calendars(self, user_id: str) -> list[str]:
        return sorted(set((await self.session.run(CONNECTED_NAMES, {"user_id": user_id})).scalars()))

    # ---- settings and sharing ----------------------------------------------------------------------

    async def settings_of(self, user_ids: Sequence[str]) -> dict[str, StoredSettings]:
        rows = await self.session.run(
            select(user_settings).where(user_settings.c.user_id.in_(list(user_ids)))
        )
        return {
            r.user_id: StoredSettings(
                tz=r.tz,
                email=r.email,
                language=r.language,
                work_hours=r.work_hours,
                invitations_from=r.invitations_from,
                buffer_minutes=r.buffer_minutes,
            )
            for r in rows
        }

    async def save_settings(self, user_id: str, saved: StoredSettings, at: datetime) -> None:
        values = {
            "tz": saved.tz,
            "email": saved.email,
            "language": saved.language,
            "work_hours": saved.work_hours,
            "invitations_from": saved.invitations_from,
            "buffer_minutes": saved.buffer_minutes,
            "updated_at": at,
        }
        statement = pg_insert(user_settings).values(user_id=user_id, **values)
        await self.session.run(
            statement.on_conflict_do_update(index_elements=[user_settings.c.user_id], set_=values)
        )

    async def users_with_email(self, addresses: Sequence[str]) -> dict[str, list[str]]:
        wanted = [a.casefold() for a in addresses]
        rows = await self.session.run(
            select(user_settings.c.user_id, func.lower(user_settings.c.email).label("email")).where(
                func.lower(user_settings.c.email).in_(wanted)
            )
        )
        found: dict[str, list[str]] = {}
        for r in rows:
            found.setdefault(r.email, []).append(r.user_id)
        return found

    async def share(self, owner_id: str, with_user_id: str, level: str, at: datetime) -> None:
        statement = pg_insert(sharing).values(
            owner_id=owner_id, with_user_id=with_user_id, level=level, created_at=at
        )
        await self.session.run(
            statement.on_conflict_do_update(
                index_elements=[sharing.c.owner_id, sharing.c.with_user_id], set_={"level": level}
            )
        )

    async def unshare(self, owner_id: str, with_user_id: str) -> bool:
        result = await self.session.run(
            sharing.delete().where(sharing.c.owner_id == owner_id, sharing.c.with_user_id == with_user_id)
        )
        return bool(getattr(result, "rowcount", 0))

    async def sharing_of(self, user_id: str) -> tuple[list[ShareEntry], list[ShareEntry]]:
        rows = await self.session.run(
            select(sharing)
            .where(or_(sharing.c.owner_id == user_id, sharing.c.with_user_id == user_id))
            .order_by(sharing.c.created_at, sharing.c.owner_id, sharing.c.with_user_id)
        )
        mine: list[ShareEntry] = []
        theirs: list[ShareEntry] = []
        for r in rows:
            if r.owner_id == user_id:
                mine.append(ShareEntry(user=r.with_user_id, level=r.level, created_at=r.created_at))
            else:
                theirs.append(ShareEntry(user=r.owner_id, level=r.level, created_at=r.created_at))
        return mine, theirs

    # ---- feeds -----------------------------------------------------------------------------------

    async def replace_feed(self, user_id: str, secret_hash: str, tz: str, at: datetime) -> None:
        # One row per user: the new hash replaces the old one, so the old address stops working.
        statement = pg_insert(feeds).values(user_id=user_id, secret_hash=secret_hash, tz=tz, created_at=at)
        await self.session.run(
            statement.on_conflict_do_update(
                index_elements=[feeds.c.user_id],
                set_={
                    "secret_hash": statement.excluded.secret_hash,
                    "tz": statement.excluded.tz,
                    "created_at": statement.excluded.created_at,
                },
            )
        )

    async def feed_owner(self, secret_hash: str) -> tuple[str, str] | None:
        row = (
            await self.session.run(
                select(feeds.c.user_id, feeds.c.tz).where(feeds.c.secret_hash == secret_hash)
            )
        ).first()
        return (row.user_id, row.tz) if row is not None else None
