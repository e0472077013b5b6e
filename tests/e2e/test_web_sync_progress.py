"""The settings page shows how far a running sync is, and follows it (issue 44 item 9): the list
of accounts is read again every few seconds while some account syncs, and no more after. The
sync is held at the proxy before each calendar's whole listing, so what the page shows is known."""

from __future__ import annotations

import asyncio
import re
from urllib.parse import urlsplit

import pytest
from playwright.async_api import Browser, expect

from calagent.cli.stack import Stack
from calagent.devtools.radicale import EmbeddedRadicale
from calagent.devtools.testing.davproxy import Hold

from .test_caldav import Remote, commands_app
from .test_sync_faults import connected_through_proxy
from .test_sync_progress import WHOLE_LISTING
from .test_web import Tab, browser, catalogs, new_tab, tabs
from .test_web_settings import (
    base_url,
    open_settings,
    radicale,
    remote_account,
    stack,
)

pytestmark = pytest.mark.e2e

__all__ = ["base_url", "browser", "catalogs", "radicale", "stack", "tabs"]  # fixtures of the modules above


def progress_text(done: int, total: int, events: int) -> re.Pattern[str]:
    """The progress line in either of the page's languages."""
    return re.compile(
        rf"^(正在同步：{done}/{total} 个日历，已读 {events} 个日程|Syncing: {done} of {total} calendars, {events} events)$"
    )


async def test_the_settings_show_a_running_syncs_progress_and_follow_it_until_it_ends(
    browser: Browser, base_url: str, stack: Stack, radicale: EmbeddedRadicale, user: str, tabs: list[Tab]
) -> None:
    remote = remote_account(radicale, user, "Personal", "Work")
    async with connected_through_proxy(stack, radicale, user, remote) as (proxy, connected):
        paths = [urlsplit(c["url"]).path for c in connected["calendars"]]
        for path in paths:  # two new events in each calendar, for the next sync to read
            calendar = Remote(remote.url, remote.username, remote.password, radicale.url.rstrip("/") + path)
            for n in range(2):
                start = f"2026100{n + 1}T010000Z"
                calendar.add(f"{path}-{n}", f"event {n}", start, start.replace("T01", "T02"))
        holds = [proxy.hold("REPORT", path, WHOLE_LISTING) for path in paths]
        inbound = commands_app(stack).sync.inbound  # type: ignore[union-attr]
        running = asyncio.create_task(inbound.sync_account(connected["id"]))
        first = await next_reached(holds)

        tab = await new_tab(browser, base_url, tabs)
        await tab.sign_in(user)
        page = tab.page
        await open_settings(page)
        line = page.locator('#accounts-list .account [data-fact="sync"]')
        await expect(line).to_have_text(progress_text(0, 2, 0))

        # The page reads the list again by itself: one calendar read, its two events.
        first.gate.set()
        second = await next_reached([h for h in holds if h is not first])
        await expect(line).to_have_text(progress_text(1, 2, 2))
        second.gate.set()
        await running
        await expect(line).to_have_count(0)  # the sync ended: no progress line, no more polling
        await expect(page.locator('#accounts-list .account [data-fact="last_synced_at"]')).to_have_attribute(
            "data-i18n", "accounts.synced"
        )


async def next_reached(holds: list[Hold]) -> Hold:
    """The first of `holds` a request of the sync reaches."""
    waits = {asyncio.ensure_future(h.reached.wait()): h for h in holds}
    done, pending = await asyncio.wait(waits, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    for waiting in pending:
        waiting.cancel()
    assert done, "the sync never reached a held listing"
    return waits[next(iter(done))]
