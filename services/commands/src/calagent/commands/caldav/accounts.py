"""Connecting, listing and disconnecting CalDAV accounts (contract §12).

A connection is stored only after a real PROPFIND with the given login found the user's calendars;
the password is sealed with the vault's key before it touches the database and never leaves this
module again except towards that server. The account's calendar names join the user's calendar
list (the names the model may pick from). Disconnecting erases the login, the account's calendars
and resources, the events that came from it, and whatever still waited to be delivered to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Row, delete, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from calagent.commands.adapters.store import SqlUnitOfWork, from_server
from calagent.commands.adapters.tables import (
    caldav_accounts,
    caldav_calendars,
    caldav_outbox,
    caldav_resources,
    calendars,
    events,
    stubs,
    tasks,
)
from calagent.commands.caldav import progress, remote, rows
from calagent.commands.caldav.addresses import Guard, InvalidUrl, target_of
from calagent.commands.caldav.credentials import Vault
from calagent.commands.caldav.notes import read_notes
from calagent.commands.caldav.withheld import ANSWERED, Withheld
from calagent.commands.domain.calendars import NewCalendars
from calagent.commands.txn import new_id
from calagent.contracts.caldav import (
    AccountError,
    AccountOut,
    AccountProblem,
    AccountResult,
    AccountWarning,
    ConnectCalDav,
    DisconnectAccount,
    ListAccounts,
    RemoteCalendar,
    SetDefaultCalendar,
)
from calagent.runtime.clock import Clock

NAME_MAX = 100


def distinct_name(name: str, taken: Collection[str], host: str, username: str) -> str:
    """The calendar's name, or, when another connected calendar of the user has it already, the
    name with its server ("Personal (caldav.example.com)"), then its login, then a number."""
    candidates = [name, f"{name} ({host})", f"{name} ({username}@{host})"]
    candidates += [f"{name} ({username}@{host} {n})" for n in range(2, 100)]
    for candidate in candidates:
        suffix = candidate[len(name) :]
        fitted = name[: NAME_MAX - len(suffix)] + suffix
        if fitted not in taken:
            return fitted
    raise ValueError("no free calendar name")


def account_error(code: str, message: str) -> AccountResult:
    return AccountResult(error=AccountError.model_validate({"code": code, "message": message}))


class Accounts:
    def __init__(
        self, engine: AsyncEngine, vault: Vault, clock: Clock, default_calendars: NewCalendars, guard: Guard
    ) -> None:
        self.engine = engine
        self.vault = vault
        self.clock = clock
        self.default_calendars = default_calendars
        self.guard = guard

    async def connect(self, command: ConnectCalDav) -> AccountResult:
        try:
            target_of(command.url)
        except InvalidUrl as exc:
            return account_error("invalid_url", str(exc))
        login = remote.Login(command.url, command.username, command.password, self.guard)
        try:
            found = await asyncio.to_thread(remote.discover, login)
        except remote.NotAllowed as exc:
            return account_error("address_not_allowed", str(exc))
        except remote.Refused as exc:
            return account_error("refused", f"the CalDAV server refused the connection: {exc}")
        except remote.RemoteError as exc:
            return account_error("unreachable", f"the CalDAV server could not be reached: {exc}")
        if not found:
            return account_error("no_calendars", "the CalDAV server shows no calendar for this user")
        user_id = command.envelope.user_id
        account_id = new_id()
        now = self.clock.now()
        async with self.engine.connect() as conn:
            await conn.begin()
            # The account's own bookkeeping: the events it sends are queued below, by hand.
            uow = from_server(conn)
            await uow.lock_user(user_id)
            await conn.execute(
                caldav_accounts.insert().values(
                    id=account_id,
                    user_id=user_id,
                    url=command.url,
                    username=command.username,
                    secret=self.vault.seal(command.password),
                    created_at=now,
                )
            )
            # Names are unique per user across accounts (a create names its calendar by name);
            # one calendar of the user is the default: the first account's first, until PATCH.
            connected = await rows.user_calendars(conn, user_id)
            names = await _store_calendars(conn, command, account_id, found, connected)
            await self._join_calendar_list(conn, uow, user_id, command.envelope.lang, names)
            # What the assistant wrote before the connection goes out too: the first account gets
            # every event and series this user already has (one outbox row each). "First" is
            # "no other account": connects of one user are serialised by the user's lock, and
            # creation times may tie (a frozen clock).
            if not connected:
                await _queue_existing_events(conn, user_id)
            await conn.commit()
            out = await self._accounts(conn, user_id, account_id)
        return AccountResult(account=out[0] if out else None)

    async def _join_calendar_list(
        self, conn: AsyncConnection, uow: SqlUnitOfWork, user_id: str, lang: str | None, names: list[str]
    ) -> None:
        # The user's list exists (made from the defaults on first use) before the account's
        # names are added after it.
        existing = await uow.settings.calendars(user_id, self.default_calendars.named_for(lang))
        last = await conn.scalar(select(func.max(calendars.c.position)).where(calendars.c.user_id == user_id))
        names = [name for name in names if name not in existing]
        if names:
            await conn.execute(
                pg_insert(calendars)
                .values(
                    [
                        {"user_id": user_id, "name": name, "position": int(last or 0) + 1 + i}
                        for i, name in enumerate(dict.fromkeys(names))
                    ]
                )
                .on_conflict_do_nothing()
            )

    async def listing(self, command: ListAccounts) -> AccountResult:
        async with self.engine.connect() as conn:
            return AccountResult(accounts=tuple(await self._accounts(conn, command.envelope.user_id)))

    async def disconnect(self, command: DisconnectAccount) -> AccountResult:
        user_id = command.envelope.user_id
        async with self.engine.connect() as conn:
            await conn.begin()
            uow = from_server(conn)  # nothing is sent to an account that is being forgotten
            await uow.lock_user(user_id)
            found = await conn.scalar(
                select(caldav_accounts.c.id).where(
                    caldav_accounts.c.id == command.account_id, caldav_accounts.c.user_id == user_id
                )
            )
            if found is None:
                # Another user's account id is answered like one that does not exist.
                return account_error("not_found", "no connected account with this id")
            names = [
                r.name
                for r in await conn.execute(
                    select(caldav_calendars.c.name).where(caldav_calendars.c.account_id == command.account_id)
                )
            ]
            remote_ids = [
                r.event_id
                for r in await conn.execute(
                    select(caldav_resources.c.event_id).where(
                        caldav_resources.c.account_id == command.account_id,
                        caldav_resources.c.origin == "remote",
                    )
                )
            ]
            if remote_ids:
                await conn.execute(
                    delete(events).where(
                        events.c.user_id == user_id,
                        events.c.id.in_(remote_ids) | events.c.series_id.in_(remote_ids),
                    )
                )
            # Cascades to its calendars and resources; the sealed password goes with the row.
            await conn.execute(delete(caldav_accounts).where(caldav_accounts.c.id == command.account_id))
            remaining = await rows.user_calendars(conn, user_id)
            if remaining and not any(c.is_default for c in remaining):
                # The default went with the account: the first remaining account's first calendar.
                await self._make_default(conn, user_id, remaining[0].account_id, remaining[0].url)
            if not remaining:
                # SKIP LOCKED: a row a worker is delivering right now finishes (the worker may be
                # waiting for this user's lock: waiting for its row here would deadlock the two).
                await conn.execute(
                    delete(caldav_outbox).where(
                        caldav_outbox.c.id.in_(
                            select(caldav_outbox.c.id)
                            .where(caldav_outbox.c.user_id == user_id, caldav_outbox.c.delivered_at.is_(None))
                            .with_for_update(skip_locked=True)
                            .scalar_subquery()
                        )
                    )
                )
            unused = [n for n in names if not self.default_calendars.is_default_name(n)]
            if unused:
                await conn.execute(
                    delete(calendars).where(calendars.c.user_id == user_id, calendars.c.name.in_(unused))
                )
            await conn.commit()
        return AccountResult(deleted=True)

    async def set_default(self, command: SetDefaultCalendar) -> AccountResult:
        user_id = command.envelope.user_id
        async with self.engine.connect() as conn:
            await conn.begin()
            await from_server(conn).lock_user(user_id)
            connected = await rows.user_calendars(conn, user_id)
            if not any(c.account_id == command.account_id for c in connected):
                # Another user's account id is answered like one that does not exist.
                return account_error("not_found", "no connected account with this id")
            if not any(
                c.account_id == command.account_id and c.url == command.calendar_url for c in connected
            ):
                return account_error("not_a_calendar", "this account has no calendar at this address")
            await self._make_default(conn, user_id, command.account_id, command.calendar_url)
            await conn.commit()
            out = await self._accounts(conn, user_id, command.account_id)
        return AccountResult(account=out[0] if out else None)

    async def _make_default(self, conn: AsyncConnection, user_id: str, account_id: str, url: str) -> None:
        """One default calendar per user, across every account of theirs."""
        await conn.execute(
            update(caldav_calendars)
            .where(
                caldav_calendars.c.account_id.in_(
                    select(caldav_accounts.c.id).where(caldav_accounts.c.user_id == user_id).scalar_subquery()
                )
            )
            .values(
                is_default=(caldav_calendars.c.account_id == account_id) & (caldav_calendars.c.url == url)
            )
        )

    async def _accounts(
        self, conn: AsyncConnection, user_id: str, account_id: str | None = None
    ) -> list[AccountOut]:
        query = select(caldav_accounts, progress.running).where(caldav_accounts.c.user_id == user_id)
        if account_id is not None:
            query = query.where(caldav_accounts.c.id == account_id)
        found = (await conn.execute(query.order_by(caldav_accounts.c.created_at, caldav_accounts.c.id))).all()
        if not found:
            return []
        deliveries = await _deliveries(conn, user_id)
        out = []
        for row in found:
            cals = (
                await conn.execute(
                    select(caldav_calendars)
                    .where(caldav_calendars.c.account_id == row.id)
                    .order_by(caldav_calendars.c.position)
                )
            ).all()
            pending, rejected = deliveries.get(row.id, (0, 0))
            out.append(
                AccountOut(
                    id=row.id,
                    url=row.url,
                    username=row.username,
                    created_at=row.created_at,
                    last_synced_at=row.last_synced_at,
                    calendars=tuple(
                        RemoteCalendar(name=c.name, url=c.url, color=c.color, default=c.is_default)
                        for c in cals
                    ),
                    last_error=_last_error(row),
                    pending_deliveries=pending,
                    rejected_deliveries=rejected,
                    warnings=tuple(await _warnings(conn, user_id, cals)),
                    sync=progress.shown(row),
                )
            )
        return out


def _last_error(row: Row[Any]) -> AccountProblem | None:
    """The newer of the last sync and delivery failures (each cleared by a success of its kind)."""
    problems = [
        AccountProblem(kind=kind, message=message, at=at)
        for kind, message, at in (
            ("sync", row.sync_error, row.sync_error_at),
            ("delivery", row.delivery_error, row.delivery_error_at),
        )
        if message is not None and at is not None
    ]
    return max(problems, key=lambda p: p.at, default=None)


async def _deliveries(conn: AsyncConnection, user_id: str) -> dict[str, tuple[int, int]]:
    """Per account: the deliveries waiting, and those refused within the outbox's week. A
    delivery not yet on any server is the account's whose calendar is the user's default."""
    default = await conn.scalar(
        select(caldav_calendars.c.account_id)
        .join(caldav_accounts, caldav_accounts.c.id == caldav_calendars.c.account_id)
        .where(caldav_accounts.c.user_id == user_id)
        .order_by(
            caldav_calendars.c.is_default.desc(), caldav_accounts.c.created_at, caldav_calendars.c.position
        )
        .limit(1)
    )
    account = func.coalesce(caldav_resources.c.account_id, default).label("account")
    found = await conn.execute(
        select(
            account,
            func.count().filter(caldav_outbox.c.delivered_at.is_(None)).label("pending"),
            func.count().filter(caldav_outbox.c.outcome == "rejected").label("rejected"),
        )
        .select_from(
            caldav_outbox.outerjoin(caldav_resources, caldav_resources.c.event_id == caldav_outbox.c.event_id)
        )
        .where(
            caldav_outbox.c.user_id == user_id,
            caldav_outbox.c.delivered_at.is_(None) | (caldav_outbox.c.outcome == "rejected"),
        )
        .group_by(account)
    )
    return {r.account: (int(r.pending), int(r.rejected)) for r in found if r.account is not None}


async def _warnings(conn: AsyncConnection, user_id: str, cals: Sequence[Row[Any]]) -> list[AccountWarning]:
    """A calendar's withheld events, until the user answers the offer naming them; its objects
    the sync skipped or read in part, until they are read again or gone (notes.py)."""
    warnings: list[AccountWarning] = []
    for calendar in cals:
        warnings.extend(
            AccountWarning(
                kind="object_skipped" if note.skipped else "object_partly_read",
                calendar=calendar.name,
                href=note.href,
                uid=note.uid,
                problem=note.problem,
            )
            for note in read_notes(calendar.object_notes)
        )
        held = Withheld.read(calendar.withheld)
        if held is None:
            continue
        if held.stub is not None:
            status = await conn.scalar(
                select(stubs.c.status).where(stubs.c.user_id == user_id, stubs.c.id == held.stub)
            )
            if status in ANSWERED:
                continue
        warnings.append(
            AccountWarning(
                calendar=calendar.name,
                missing=len(held.ids),
                had=held.had,
                shows=held.shows,
                command_id=held.stub,
            )
        )
    return warnings


async def _store_calendars(
    conn: AsyncConnection,
    command: ConnectCalDav,
    account_id: str,
    found: list[remote.FoundCalendar],
    connected: list[rows.Connected],
) -> list[str]:
    """The account's calendars, each under a name no other connected calendar of the user has;
    the names of the user's own ones, which join the calendar list the model picks from. A
    calendar someone else shares with the user is synced, but its name (its owner's words,
    contract §19) is no name the model is offered, and it is the default only when the account
    has no calendar of the user's own."""
    taken = {c.name for c in connected}
    has_default = any(c.is_default for c in connected)
    host = urlsplit(command.url).hostname or ""
    default = next((c for c in found if c.owned), found[0])
    names = []
    for position, calendar in enumerate(found):
        name = distinct_name(calendar.name, taken, host, command.username)
        taken.add(name)
        if calendar.owned:
            names.append(name)
        await conn.execute(
            caldav_calendars.insert().values(
                account_id=account_id,
                url=calendar.url,
                name=name,
                color=calendar.color,
                owned=calendar.owned,
                position=position,
                is_default=calendar is default and not has_default,
            )
        )
    return names


async def _queue_existing_events(conn: AsyncConnection, user_id: str) -> None:
    await conn.execute(
        caldav_outbox.insert().from_select(
            ["user_id", "event_id"],
            select(events.c.user_id, events.c.id).where(
                events.c.user_id == user_id, events.c.series_id.is_(None)
            ),
        )
    )
    # The user's tasks too: each becomes a VTODO where the default calendar takes them.
    await conn.execute(
        caldav_outbox.insert().from_select(
            ["user_id", "event_id", "kind"],
            select(tasks.c.user_id, tasks.c.id, literal("task")).where(tasks.c.user_id == user_id),
        )
    )
