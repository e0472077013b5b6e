"""The outbox worker: delivers committed writes to the CalDAV server, once each.

A write and its outbox row commit together (`SqlUnitOfWork.commit`). Here a replica claims the
oldest due row with `FOR UPDATE SKIP LOCKED` (replicas share the work, none waits on another's
row), takes the resource's advisory lock (two replicas never send one object at once), and sends
the resource as the database holds it *now*: rows that piled up while the server was down become
one PUT. Every PUT or DELETE is conditional — `If-None-Match: *` for a new object, `If-Match` with
the last ETag otherwise — so a retry after a lost commit cannot write twice: the server answers 412,
and an object that already says what we would send counts as delivered.

A 412 for a real change (the user edited the event in their calendar app since we last saw it) is
not merged by guessing: the server's version is stored, and the assistant's change becomes a held
stub the user can confirm again. Any other refusal (403 …) is marked on the event. A server that
answers with a failure (5xx …) is tried again with exponential backoff, at most
`CALAGENT_CALDAV_MAX_ATTEMPTS` times in all, then the delivery ends `rejected`, marked on the event
and told; a server that does not answer at all is waited for (one try a minute at most), since
nothing reached it to refuse.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from opentelemetry import propagate, trace
from sqlalchemy import Row, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from calagent.commands.adapters.tables import caldav_accounts, caldav_outbox, caldav_resources
from calagent.commands.caldav import remote, rows
from calagent.commands.caldav.addresses import Guard
from calagent.commands.caldav.conflicts import Conflicts
from calagent.commands.caldav.credentials import Vault
from calagent.commands.caldav.delivery import Outcome, keep_object, mark, retry
from calagent.commands.caldav.inbound import AfterSync
from calagent.commands.caldav.todos import TaskDeliverer, task_uids_by_id
from calagent.commands.domain.model import Event, local_uid
from calagent.commands.ical.render import render_resource
from calagent.runtime.clock import Clock

log = logging.getLogger("calagent.commands.caldav")
tracer = trace.get_tracer("calagent.commands.caldav")

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 60.0
DEFAULT_MAX_ATTEMPTS = 8  # CALAGENT_CALDAV_MAX_ATTEMPTS


def backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, attempts - 1)))


@dataclass(frozen=True)
class _Delivery:
    """One resource to send, as the database holds it now, and where it goes."""

    user_id: str
    event_id: str
    resource: rows.Resource | None
    target: rows.Route | None
    master: Event | None
    stored: list[Event]


def settled(outcome: Outcome, refusals: int, max_attempts: int) -> Outcome:
    """A retry that used the last of the bounded attempts ends the delivery `rejected`: a server
    that always refuses it is not asked again and again (contract §22)."""
    if outcome.kind != "retry" or not outcome.refused or refusals + 1 < max_attempts:
        return outcome
    return Outcome("rejected", f"given up after {max_attempts} attempts: {outcome.error}"[:500])


class Deliverer:
    def __init__(
        self,
        engine: AsyncEngine,
        vault: Vault,
        clock: Clock,
        stub_ttl: timedelta,
        guard: Guard,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        default_tz: str = "UTC",
        after_sync: AfterSync | None = None,
    ) -> None:
        self.engine = engine
        self.vault = vault
        self.guard = guard
        self.clock = clock
        self.stub_ttl = stub_ttl
        self.max_attempts = max_attempts
        self.tasks = TaskDeliverer(vault, guard, clock, ZoneInfo(default_tz))
        self.conflicts = Conflicts(clock, stub_ttl, ZoneInfo(default_tz), after_sync)

    async def prune(self, older_than: timedelta) -> int:
        """Forget settled rows after a while: delivered ones, and refusals already told."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                caldav_outbox.delete().where(
                    caldav_outbox.c.delivered_at < func.clock_timestamp() - older_than,
                    (caldav_outbox.c.outcome.in_(("delivered", "dropped")))
                    | caldav_outbox.c.reported_at.is_not(None),
                )
            )
            return int(getattr(result, "rowcount", 0) or 0)

    async def deliver_due(self, limit: int = 100) -> int:
        """Deliver due rows until none is left (or `limit` resources); how many were handled."""
        handled = 0
        busy: set[str] = set()
        while handled < limit and await self.deliver_one(busy):
            handled += 1
        return handled

    async def deliver_one(self, busy: set[str] | None = None) -> bool:
        """Claim the oldest due row and deliver its resource. `busy`: resources another replica
        is delivering right now, skipped by this pass (one found busy is added to it). False when
        no row is due."""
        busy = busy if busy is not None else set()
        async with self.engine.connect() as conn:
            await conn.begin()
            claim = await _claim(conn, busy)
            if claim is None:
                await conn.rollback()
                return False
            if not claim.batch:  # busy elsewhere, or delivered by another replica meanwhile
                await conn.commit()
                return True
            outcome = await self._attempt(conn, claim)
            await _record(conn, claim, outcome)
            await conn.commit()
            return True

    async def _attempt(self, conn: AsyncConnection, claim: _Claim) -> Outcome:
        """One delivery of the claimed resource, traced under the write's own trace, settled
        against the bound of attempts and told to its account's health."""
        row = claim.row
        with tracer.start_as_current_span(
            "sync.deliver",
            context=propagate.extract(row.trace_context or {}),
            attributes={"calagent.event_id": row.event_id, "calagent.attempt": row.attempts + 1},
        ) as span:
            try:
                if row.kind == "task":
                    outcome = await self._deliver_task(conn, row.user_id, row.event_id)
                else:
                    outcome = await self._deliver(conn, row.user_id, row.event_id)
            except remote.Unavailable as exc:  # met settling a conflict: as for any request
                outcome = retry(exc)
            except Exception as exc:  # a bug or a broken row: retried a bounded number of times
                log.exception("delivering %s failed", row.event_id)
                outcome = Outcome("retry", f"it could not be sent ({type(exc).__name__})")
            outcome = settled(outcome, claim.refusals, self.max_attempts)
            if outcome.kind == "rejected":
                await mark(conn, row.user_id, row.event_id, "rejected")
            await _tell_account(conn, outcome)
            span.set_attribute("calagent.outcome", outcome.kind)
        return outcome

    async def _deliver_task(self, conn: AsyncConnection, user_id: str, task_id: str) -> Outcome:
        """A task's VTODO (caldav/todos.py): the same rows, locks, bounds and outcomes."""
        sent = await self.tasks.deliver(conn, user_id, task_id)
        if sent.offer is not None:
            await self.conflicts.offer_task(conn, user_id, sent.offer)
        return replace(sent, offer=None)

    async def _deliver(self, conn: AsyncConnection, user_id: str, event_id: str) -> Outcome:
        resource = await rows.resource_by_event(conn, event_id)
        stored = await rows.resource_rows(conn, user_id, event_id)
        master = next((r for r in stored if r.id == event_id), None)
        if master is None:
            stored = []  # the event or series is gone: its overrides go with it
        # Where the event belongs: the connected calendar (of any account) its calendar name names,
        # else the user's default one. An event already on a server stays in its account and
        # calendar unless its name now names another connected calendar.
        target = await rows.route(conn, self.vault, self.guard, user_id, master.calendar if master else None)
        account = (
            await rows.account(conn, self.vault, self.guard, resource.account_id)
            if resource is not None
            else (target.account if target is not None else None)
        )
        if account is None or account.user_id != user_id:
            return Outcome("dropped", "no connected account")
        what = _Delivery(user_id, event_id, resource, target, master, stored)
        return replace(await self._send(conn, account, what), account_id=account.id)

    async def _send(self, conn: AsyncConnection, account: rows.Account, what: _Delivery) -> Outcome:
        user_id, event_id, resource, target = what.user_id, what.event_id, what.resource, what.target
        master, stored = what.master, what.stored
        if resource is not None:
            uid = resource.uid
        else:
            uid = master.uid if master is not None and master.uid else local_uid(event_id)
        try:
            stored = await self._with_servers_copy(account, resource, master, stored, event_id)
        except remote.Unavailable as exc:
            return retry(exc)
        except remote.RemoteError:
            pass  # written from its rows, as before
        parents = await task_uids_by_id(conn, user_id, {r.task_id for r in stored if r.task_id})
        body = render_resource(stored, uid, self.clock.now(), parents)
        if body is None and resource is None:
            return Outcome("delivered")  # made and removed before it ever reached the server
        try:
            if (
                resource is not None
                and body is not None
                and target is not None
                and target.named
                and target.calendar_url != resource.calendar_url
            ):
                account, resource = await self._move(conn, account, resource, target, event_id, uid)
            # The resource is assigned before its PUT: a 412 on it is a conflict about this one.
            if resource is None:
                assert body is not None and target is not None
                resource = _new_resource(user_id, account, target, event_id, uid)
                await self._put(conn, account.login, resource, body, None)
            elif body is None:
                await self._delete(conn, account.login, resource, event_id)
            else:
                await self._put(conn, account.login, resource, body, resource.etag)
        except remote.PreconditionFailed:
            assert resource is not None
            return await self.conflicts.settle(conn, account, resource, stored, body)
        except remote.UidTaken as exc:
            assert resource is not None
            return await self.conflicts.adopt(conn, account, resource, stored, body, exc.href)
        except remote.Gone as exc:
            if resource is not None and resource.etag is not None:
                # Our update's object is gone from the server: the user is asked, not ignored.
                return await self.conflicts.gone(conn, account, resource)
            await mark(conn, user_id, event_id, "rejected")
            return Outcome("rejected", str(exc)[:500])
        except remote.Rejected as exc:
            await mark(conn, user_id, event_id, "rejected")
            return Outcome("rejected", str(exc)[:500])
        except remote.Unavailable as exc:
            return retry(exc)
        await mark(conn, user_id, event_id, None)
        return Outcome("delivered")

    async def _with_servers_copy(
        self,
        account: rows.Account,
        resource: rows.Resource | None,
        master: Event | None,
        stored: list[Event],
        event_id: str,
    ) -> list[Event]:
        if master is not None and master.ical is None and resource is not None:
            # Stored before objects were kept: the server's copy, if it is the one we last
            # saw, is what the change is patched into.
            found = await asyncio.to_thread(remote.fetch, account.login, resource.calendar_url, resource.href)
            if found is not None and found.etag == resource.etag:
                stored = [r.evolve(ical=found.body) if r.id == event_id else r for r in stored]
        return stored

    async def _move(
        self,
        conn: AsyncConnection,
        account: rows.Account,
        resource: rows.Resource,
        target: rows.Route,
        event_id: str,
        uid: str,
    ) -> tuple[rows.Account, rows.Resource]:
        """Moved to another connected calendar: deleted from the old one first (a change made
        there since wins, as for any write), then created in the new one by the caller's PUT.
        The account and resource are the caller's only once the DELETE went through: a 412 on
        it is a conflict about the old ones."""
        await asyncio.to_thread(
            remote.delete, account.login, resource.calendar_url, resource.href, resource.etag
        )
        href = remote.href_for(target.calendar_url, uid)
        await rows.move_resource(conn, event_id, target, href)
        account = target.account
        resource = replace(
            resource, account_id=account.id, calendar_url=target.calendar_url, href=href, etag=None
        )
        return account, resource

    async def _put(
        self,
        conn: AsyncConnection,
        login: remote.Login,
        resource: rows.Resource,
        body: str,
        if_match: str | None,
    ) -> None:
        etag = await asyncio.to_thread(
            remote.put, login, resource.calendar_url, resource.href, body, if_match
        )
        await self._saved(conn, login, resource, etag, body)

    async def _delete(
        self, conn: AsyncConnection, login: remote.Login, resource: rows.Resource, event_id: str
    ) -> None:
        await asyncio.to_thread(remote.delete, login, resource.calendar_url, resource.href, resource.etag)
        await conn.execute(caldav_resources.delete().where(caldav_resources.c.event_id == event_id))

    async def _saved(
        self, conn: AsyncConnection, login: remote.Login, resource: rows.Resource, etag: str | None, body: str
    ) -> None:
        """After a PUT: the resource's ETag, and the object the next change is patched into. A
        server that gave no ETag may have altered what it stored (RFC 4791 §5.3.4): its copy is
        read back and kept instead of ours."""
        if etag is None:
            found = await asyncio.to_thread(remote.fetch, login, resource.calendar_url, resource.href)
            if found is not None:
                etag, body = found.etag, found.body
        await rows.save_resource(conn, resource, etag)
        await keep_object(conn, resource.user_id, resource.event_id, body)


@dataclass(frozen=True)
class _Claim:
    """The claimed row and every waiting row of its resource (`batch`: one delivery answers them
    all; empty when the resource is not this replica's to deliver now)."""

    row: Row[*tuple[Any, ...]]
    batch: list[int]
    refusals: int  # the most refused row's: how many of the bounded tries are left


async def _claim(conn: AsyncConnection, busy: set[str]) -> _Claim | None:
    """The oldest due row, skipping rows other replicas hold; None when none is due."""
    due = select(
        caldav_outbox.c.id,
        caldav_outbox.c.user_id,
        caldav_outbox.c.event_id,
        caldav_outbox.c.trace_context,
        caldav_outbox.c.attempts,
        caldav_outbox.c.refusals,
        caldav_outbox.c.kind,
    ).where(
        caldav_outbox.c.delivered_at.is_(None),
        caldav_outbox.c.not_before <= func.clock_timestamp(),
    )
    if busy:
        due = due.where(caldav_outbox.c.event_id.not_in(sorted(busy)))
    claimed = (
        await conn.execute(due.order_by(caldav_outbox.c.id).limit(1).with_for_update(skip_locked=True))
    ).first()
    if claimed is None:
        return None
    # Tried, not waited for: a replica holding the resource needs every row of it, this one's
    # claimed row too — waiting here while holding it would deadlock the two. The row is let go;
    # the replica delivering the resource takes it into its batch.
    taken = await conn.scalar(
        select(func.pg_try_advisory_xact_lock(func.hashtextextended("caldav:" + claimed.event_id, 0)))
    )
    if not taken:
        busy.add(claimed.event_id)
        return _Claim(claimed, [], 0)
    # Every waiting row of this resource: one delivery answers them all.
    waiting = (
        await conn.execute(
            select(caldav_outbox.c.id, caldav_outbox.c.refusals)
            .where(caldav_outbox.c.event_id == claimed.event_id, caldav_outbox.c.delivered_at.is_(None))
            .with_for_update()
        )
    ).all()
    batch = [r.id for r in waiting]
    if claimed.id not in batch:  # another replica delivered it while we waited for the lock
        return _Claim(claimed, [], 0)
    return _Claim(claimed, batch, max(r.refusals for r in waiting))


async def _record(conn: AsyncConnection, claim: _Claim, outcome: Outcome) -> None:
    """The batch's rows as the delivery left them: due again after a backoff, or settled."""
    rows_of_batch = caldav_outbox.c.id.in_(claim.batch)
    if outcome.kind == "retry":
        await conn.execute(
            update(caldav_outbox)
            .where(rows_of_batch)
            .values(
                attempts=caldav_outbox.c.attempts + 1,
                refusals=caldav_outbox.c.refusals + int(outcome.refused),
                not_before=func.clock_timestamp() + backoff(claim.row.attempts + 1),
                last_error=outcome.error,
            )
        )
        return
    await conn.execute(
        update(caldav_outbox)
        .where(rows_of_batch)
        .values(
            delivered_at=func.clock_timestamp(),
            outcome=outcome.kind,
            last_error=outcome.error,
            attempts=caldav_outbox.c.attempts + 1,
        )
    )


async def _tell_account(conn: AsyncConnection, outcome: Outcome) -> None:
    """The account's health (contract §22): a delivery that failed is its last delivery error, in
    our words; one that went through clears it."""
    if outcome.account_id is None:
        return
    account = caldav_accounts.c.id == outcome.account_id
    if outcome.kind in ("retry", "rejected"):
        await conn.execute(
            update(caldav_accounts)
            .where(account)
            .values(
                delivery_error=f"a change could not be sent: {outcome.error}"[:500],
                delivery_error_at=func.clock_timestamp(),
            )
        )
    elif outcome.kind in ("delivered", "conflict"):
        await conn.execute(
            update(caldav_accounts)
            .where(account, caldav_accounts.c.delivery_error.is_not(None))
            .values(delivery_error=None, delivery_error_at=None)
        )


async def pending(conn: AsyncConnection, user_id: str) -> int:
    value = await conn.scalar(
        text("SELECT count(*) FROM commands.caldav_outbox WHERE user_id = :u AND delivered_at IS NULL"),
        {"u": user_id},
    )
    return int(value or 0)


def _new_resource(
    user_id: str, account: rows.Account, target: rows.Route, event_id: str, uid: str
) -> rows.Resource:
    """A resource not yet on any server: in the route's calendar, under a name made from its UID."""
    calendar_url = target.calendar_url
    href = remote.href_for(calendar_url, uid)
    return rows.Resource(event_id, user_id, account.id, calendar_url, href, uid, None, "local")
