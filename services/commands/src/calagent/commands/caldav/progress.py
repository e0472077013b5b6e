"""How far an account's sync is (issue 44 item 9): a first sync of ten calendars took over a
minute, and the page showed nothing meanwhile. The sync writes its counts on the account's row,
one UPDATE as it starts and one per calendar read (never per event); `GET /v1/accounts` shows
them, and whether a sync runs now: the account's lease is held and not run out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, and_, func, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.commands.adapters.tables import caldav_accounts
from calagent.contracts.caldav import AccountSync

# Whether a sync holds the account now (selected beside its row, labelled `syncing`).
running: ColumnElement[bool] = and_(
    caldav_accounts.c.lease_owner.is_not(None), caldav_accounts.c.lease_until > func.clock_timestamp()
).label("syncing")


async def noted(
    engine: AsyncEngine, account_id: str, owner: str, lease: timedelta, *, done: int, total: int, events: int
) -> None:
    """The sync of `owner` has read `done` of `total` calendars whole and `events` events. Its
    lease is renewed with it: a sync that reads on holds the account however long it takes (a
    first sync outlasted the lease, and the page then showed it idle)."""
    async with engine.begin() as conn:
        await conn.execute(
            update(caldav_accounts)
            .where(caldav_accounts.c.id == account_id, caldav_accounts.c.lease_owner == owner)
            .values(
                sync_calendars_done=done,
                sync_calendars_total=total,
                sync_events=events,
                lease_until=func.clock_timestamp() + lease,
            )
        )


def shown(row: Row[Any]) -> AccountSync | None:
    """The account's sync as `GET /v1/accounts` shows it; `row` has `running` as `syncing`."""
    if row.sync_calendars_total is None:
        return None
    state: Literal["first_sync", "syncing", "idle"]
    if not row.syncing:
        state = "idle"
    elif row.last_synced_at is None:
        state = "first_sync"
    else:
        state = "syncing"
    return AccountSync(
        state=state,
        calendars_done=row.sync_calendars_done or 0,
        calendars_total=row.sync_calendars_total,
        events=row.sync_events or 0,
    )
