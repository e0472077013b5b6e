"""A sync shows how far it is (issue 44 item 9): a first sync of ten calendars took over a minute
and the page showed nothing meanwhile. Against Radicale, each calendar's whole listing held at
the proxy in turn: `GET /v1/accounts` says, while the sync waits there, how many calendars it
has read of all and how many events, and what it has read once it is done."""

# ruff: noqa: F811
from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.davproxy import DavProxy, Hold

from .test_caldav import Remote, eventually, scalar

# The stack, its Radicale and the proxy in front of it are test_sync_faults' fixtures.
from .test_sync_faults import proxy, radicale, stack, sync_now  # noqa: F401
from .test_sync_isolation import accounts_of, new_remote

pytestmark = pytest.mark.e2e

# The stack's clock says 2026-09-24: per calendar, the events of the next two weeks (read first,
# by the near-first listing) and those after them (read by the whole listing).
NEAR = {"Personal": ["20260925T010000Z"], "Work": ["20260928T010000Z"], "Family": []}
FAR = {
    "Personal": ["20270105T010000Z", "20270106T010000Z"],
    "Work": ["20261201T010000Z"],
    "Family": ["20270301T010000Z", "20270302T010000Z", "20270303T010000Z"],
}
WHOLE_LISTING = b"sync-collection"  # RFC 6578: the REPORT that reads a calendar whole


def calendars_with_events(radicale: EmbeddedRadicale) -> tuple[Remote, dict[str, str]]:
    """An account of three calendars holding NEAR and FAR; each calendar's path by its name."""
    remote = new_remote(radicale)  # its calendar is "Personal"
    paths = {"Personal": urlsplit(remote.calendar_url).path}
    for name in ("Work", "Family"):
        paths[name] = urlsplit(make_calendar(radicale.url, remote.username, remote.password, name)).path
    for name, path in paths.items():
        calendar = replace(remote, calendar_url=radicale.url.rstrip("/") + path)
        for n, start in enumerate(NEAR[name] + FAR[name]):
            calendar.add(f"{name}-{n}", f"{name} {n}", start, start.replace("T01", "T02"))
    return remote, paths


async def calendar_order(db: AsyncEngine, account_id: str) -> list[str]:
    """The paths of the account's calendars in the order a sync reads them."""
    async with db.connect() as conn:
        found = await conn.execute(
            text("select url from commands.caldav_calendars where account_id = :a order by position"),
            {"a": account_id},
        )
        return [urlsplit(r.url).path for r in found]


async def sync_shown(stack: Stack, user: str) -> dict[str, Any]:
    [account] = await accounts_of(stack, user)
    shown: dict[str, Any] = account["sync"]
    return shown


async def test_a_first_sync_shows_the_calendars_and_events_it_has_read_while_it_runs(
    stack: Stack, db: AsyncEngine, user: str, radicale: EmbeddedRadicale, proxy: DavProxy
) -> None:
    remote, paths = calendars_with_events(radicale)
    holds: dict[str, Hold] = {path: proxy.hold("REPORT", path, WHOLE_LISTING) for path in paths.values()}
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": proxy.rebase(remote.url), "username": remote.username, "password": remote.password},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    account_id = response.json()["id"]
    order = await calendar_order(db, account_id)
    assert sorted(order) == sorted(paths.values())
    far_of = {paths[name]: len(FAR[name]) for name in paths}
    near = sum(map(len, NEAR.values()))
    for done, path in enumerate(order):
        # The sync waits for this calendar's whole listing: those before it are read whole,
        # the next two weeks of every calendar before them.
        await asyncio.wait_for(holds[path].reached.wait(), 30)
        assert await sync_shown(stack, user) == {
            "state": "first_sync",
            "calendars_done": done,
            "calendars_total": 3,
            "events": near + sum(far_of[p] for p in order[:done]),
        }
        holds[path].gate.set()

    async def first_sync_done() -> bool:
        synced = await scalar(
            db, "select last_synced_at from commands.caldav_accounts where id = :a", a=account_id
        )
        return synced is not None

    await eventually(first_sync_done, "the first sync of the new account")
    every = near + sum(far_of.values())
    assert await sync_shown(stack, user) == {
        "state": "idle",
        "calendars_done": 3,
        "calendars_total": 3,
        "events": every,
    }
    assert await scalar(db, "select count(*) from commands.events where user_id = :u", u=user) == every

    # A later sync is `syncing`, and counts what it read: the one event added since.
    proxy.clear()
    remote.add("later", "later", "20261010T010000Z", "20261010T020000Z")
    held = proxy.hold("REPORT", order[0], WHOLE_LISTING)
    later = asyncio.create_task(sync_now(stack, account_id))
    await asyncio.wait_for(held.reached.wait(), 30)
    assert await sync_shown(stack, user) == {
        "state": "syncing",
        "calendars_done": 0,
        "calendars_total": 3,
        "events": 0,
    }
    held.gate.set()
    await later
    assert await sync_shown(stack, user) == {
        "state": "idle",
        "calendars_done": 3,
        "calendars_total": 3,
        "events": 1,
    }
