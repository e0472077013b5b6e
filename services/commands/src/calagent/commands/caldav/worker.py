"""The sync role of every commands replica: the outbox worker and the inbound sync loop.

The outbox worker serves every transactional outbox of the service — CalDAV deliveries and the
mail of invitations — with one loop: a wake or a sweep drains each of them in turn.
Both are background tasks of the service process, so sync scales with `--scale commands=N` and
`/healthz` keeps its five services. The outbox worker wakes on `calagent.caldav.outbox.<user>`
(published after a commit that queued rows) and on a periodic sweep (a missed wake, a retry whose
backoff ran out); SKIP LOCKED lets replicas share rows. The inbound loop syncs each account due,
under a lease, so only one replica syncs an account at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol

from calagent.commands.caldav.inbound import InboundSync
from calagent.commands.caldav.outbox import Deliverer
from calagent.runtime.settle import RateLimitedLog, is_transient

log = logging.getLogger("calagent.commands.caldav")
_outage = RateLimitedLog(log, every=60.0)


def _failed(exc: Exception, what: str) -> None:
    """A database outage fails every round alike: one line a minute says so; anything else is a
    fault worth its traceback."""
    if is_transient(exc):
        _outage.warning(what, "%s: %r", what, exc)
    else:
        log.exception(what, exc_info=exc)


# Settled outbox rows are kept this long (what was delivered when, for operators and the bench).
OUTBOX_RETENTION = timedelta(days=7)


class Outbox(Protocol):
    async def deliver_due(self, limit: int = 100) -> int:
        """Handle the due rows (up to `limit`); how many were handled."""
        ...

    async def prune(self, older_than: timedelta) -> int: ...


class SyncWorker:
    def __init__(
        self,
        deliverer: Deliverer,
        inbound: InboundSync,
        *,
        sweep_s: float,
        sync_s: float,
        others: Sequence[Outbox] = (),
    ) -> None:
        self.deliverer = deliverer
        self.outboxes: tuple[Outbox, ...] = (deliverer, *others)
        self.inbound = inbound
        self.sweep_s = sweep_s
        self.sync_s = sync_s
        self._wake = asyncio.Event()
        self._sync_now = asyncio.Event()
        self._requested: set[str] = set()  # accounts to sync at once (None in it: every account)
        self._tasks: list[asyncio.Task[None]] = []

    def wake(self) -> None:
        self._wake.set()

    def sync_soon(self, account_id: str | None = None) -> None:
        """Sync this account (a new connection: its calendar should show at once), or every
        account, without waiting for the period."""
        self._requested.add(account_id or "*")
        self._sync_now.set()

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._deliver_loop(), name="caldav-outbox"),
            asyncio.create_task(self._inbound_loop(), name="caldav-inbound"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _deliver_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.sweep_s)
            self._wake.clear()
            try:
                while sum([await outbox.deliver_due() for outbox in self.outboxes]) > 0:
                    pass
            except Exception as exc:
                _failed(exc, "the outbox sweep failed; trying again at the next one")

    async def _inbound_loop(self) -> None:
        try:
            # A sync this replica's earlier process left half-way holds its lease still.
            await self.inbound.release_stale()
        except Exception as exc:
            _failed(exc, "releasing the leases of an earlier process failed; they run out by themselves")
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sync_now.wait(), timeout=self.sync_s)
            self._sync_now.clear()
            requested, self._requested = self._requested, set()
            try:
                for account_id in sorted(requested - {"*"}):
                    await self.inbound.sync_account(account_id)
                await self.inbound.sync_due(
                    timedelta(0) if "*" in requested else timedelta(seconds=self.sync_s)
                )
                for outbox in self.outboxes:
                    await outbox.prune(OUTBOX_RETENTION)
            except Exception as exc:
                _failed(exc, "the inbound sync failed; trying again at the next round")
