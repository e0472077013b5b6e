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
from sqlalchemy import ColumnElement, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from calagent.commands.adapters.store import SqlUnitOfWork, from_server
from calagent.commands.adapters.tables import caldav_accounts, caldav_outbox, caldav_resources, events, stubs
from calagent.commands.caldav import remote, rows
from calagent.commands.caldav.addresses import Guard
from calagent.commands.caldav.credentials import Vault
from calagent.commands.caldav.todos import TaskDeliverer, still_blocks, task_uids_by_id
from calagent.commands.caldav.withheld import Holds
from calagent.commands.domain.changes import asked_between, change_onto, row_values
from calagent.commands.domain.model import Event, local_uid
from calagent.commands.domain.payloads import ChangeAfter, HeldChange, HeldTaskChange
from calagent.commands.domain.pending import Ask
from calagent.commands.ical.parse import UnreadableObject, fingerprint, parse_resource
from calagent.commands.ical.render import render_resource
from calagent.commands.pending import BackgroundTxn, Pending
from calagent.commands.views import event_out
from calagent.contracts.commands import ChangeOut, StubKind
from calagent.runtime.clock import Clock

log = logging.getLogger("calagent.commands.caldav")
tracer = trace.get_tracer("calagent.commands.caldav")

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 60.0
DEFAULT_MAX_ATTEMPTS = 8  # CALAGENT_CALDAV_MAX_ATTEMPTS


def backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, attempts - 1)))


@dataclass(frozen=True)
class Outcome:
    kind: str  # delivered | rejected | conflict | dropped | retry
    error: str | None = None
    # A retry the server answered (5xx …) or our own code failed: one of the bounded attempts. A
    # server that could not be reached refused nothing: its retries wait for it, unbounded.
    refused: bool = True
    account_id: str | None = None  # the account it was for: its health shows how it went


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
    ) -> None:
        self.engine = engine
        self.vault = vault
        self.guard = guard
        self.clock = clock
        self.stub_ttl = stub_ttl
        self.max_attempts = max_attempts
        self.holds = Holds(clock, stub_ttl)
        self.tasks = TaskDeliverer(vault, guard, clock, ZoneInfo(default_tz))

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
        is delivering right now, skipped by this pass (one found busy is added to it)."""
        busy = busy if busy is not None else set()
        async with self.engine.connect() as conn:
            await conn.begin()
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
                await conn.execute(
                    due.order_by(caldav_outbox.c.id).limit(1).with_for_update(skip_locked=True)
                )
            ).first()
            if claimed is None:
                await conn.rollback()
                return False
            # Tried, not waited for: a replica holding the resource needs every row of it, this
            # one's claimed row too — waiting here while holding it would deadlock the two. The
            # row is let go; the replica delivering the resource takes it into its batch.
            taken = await conn.scalar(
                select(func.pg_try_advisory_xact_lock(func.hashtextextended("caldav:" + claimed.event_id, 0)))
            )
            if not taken:
                await conn.rollback()
                busy.add(claimed.event_id)
                return True
            # Every waiting row of this resource: one delivery answers them all.
            waiting = (
                await conn.execute(
                    select(caldav_outbox.c.id, caldav_outbox.c.refusals)
                    .where(
                        caldav_outbox.c.event_id == claimed.event_id, caldav_outbox.c.delivered_at.is_(None)
                    )
                    .with_for_update()
                )
            ).all()
            batch = [r.id for r in waiting]
            if claimed.id not in batch:  # another replica delivered it while we waited for the lock
                await conn.commit()
                return True
            # The bound counts for the resource: its most refused row says how many tries are left.
            refusals = max(r.refusals for r in waiting)
            context = propagate.extract(claimed.trace_context or {})
            with tracer.start_as_current_span(
                "sync.deliver",
                context=context,
                attributes={"calagent.event_id": claimed.event_id, "calagent.attempt": claimed.attempts + 1},
            ) as span:
                try:
                    if claimed.kind == "task":
                        outcome = await self._deliver_task(conn, claimed.user_id, claimed.event_id)
                    else:
                        outcome = await self._deliver(conn, claimed.user_id, claimed.event_id)
                except remote.Unavailable as exc:  # met settling a conflict: as for any request
                    outcome = _retry(exc)
                except Exception as exc:  # a bug or a broken row: retried a bounded number of times
                    log.exception("delivering %s failed", claimed.event_id)
                    outcome = Outcome("retry", f"it could not be sent ({type(exc).__name__})")
                outcome = settled(outcome, refusals, self.max_attempts)
                if outcome.kind == "rejected":
                    await self._mark(conn, claimed.user_id, claimed.event_id, "rejected")
                await _tell_account(conn, outcome)
                span.set_attribute("calagent.outcome", outcome.kind)
            if outcome.kind == "retry":
                await conn.execute(
                    update(caldav_outbox)
                    .where(caldav_outbox.c.id.in_(batch))
                    .values(
                        attempts=caldav_outbox.c.attempts + 1,
                        refusals=caldav_outbox.c.refusals + int(outcome.refused),
                        not_before=func.clock_timestamp() + backoff(claimed.attempts + 1),
                        last_error=outcome.error,
                    )
                )
            else:
                await conn.execute(
                    update(caldav_outbox)
                    .where(caldav_outbox.c.id.in_(batch))
                    .values(
                        delivered_at=func.clock_timestamp(),
                        outcome=outcome.kind,
                        last_error=outcome.error,
                        attempts=caldav_outbox.c.attempts + 1,
                    )
                )
            await conn.commit()
            return True

    async def _deliver_task(self, conn: AsyncConnection, user_id: str, task_id: str) -> Outcome:
        """A task's VTODO (caldav/todos.py): the same rows, locks, bounds and outcomes."""
        sent = await self.tasks.deliver(conn, user_id, task_id)
        if sent.offer is not None:
            await self._offer_task(conn, user_id, sent.offer)
        return Outcome(sent.kind, sent.error, sent.refused, sent.account_id)

    async def _offer_task(self, conn: AsyncConnection, user_id: str, offer: HeldTaskChange) -> None:
        """A held task change stub: our change to the task, on the server's version. Nothing
        changes until the user confirms it."""
        uow = from_server(conn)
        await uow.lock_user(user_id)
        task = offer.change.after or offer.change.before  # a removal is named by the task kept
        ask = Ask(title=task.title, hold_reason="sync_conflict", payload=offer)
        earlier = await _offers_about(conn, user_id, stubs.c.change[("change", "before", "id")], task.id)
        await self._from_outside(uow, user_id, self.tasks.tz, ask, "task_change", earlier)

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
            return _retry(exc)
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
            return await self._conflict(conn, account, resource, stored, body)
        except remote.UidTaken as exc:
            assert resource is not None
            return await self._adopt(conn, account, resource, stored, body, exc.href)
        except remote.Gone as exc:
            if resource is not None and resource.etag is not None:
                # Our update's object is gone from the server: the user is asked, not ignored.
                return await self._gone(conn, account, resource)
            await self._mark(conn, user_id, event_id, "rejected")
            return Outcome("rejected", str(exc)[:500])
        except remote.Rejected as exc:
            await self._mark(conn, user_id, event_id, "rejected")
            return Outcome("rejected", str(exc)[:500])
        except remote.Unavailable as exc:
            return _retry(exc)
        await self._mark(conn, user_id, event_id, None)
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
        await self._keep_object(conn, resource.user_id, resource.event_id, body)

    async def _keep_object(self, conn: AsyncConnection, user_id: str, event_id: str, body: str) -> None:
        await conn.execute(
            update(events).where(events.c.user_id == user_id, events.c.id == event_id).values(ical=body)
        )

    async def _mark(self, conn: AsyncConnection, user_id: str, event_id: str, state: str | None) -> None:
        await conn.execute(
            update(events)
            .where(
                events.c.user_id == user_id,
                (events.c.id == event_id) | (events.c.series_id == event_id),
                events.c.sync_state.is_distinct_from(state),
            )
            .values(sync_state=state)
        )

    # ---- both sides changed it -----------------------------------------------------------------

    async def _conflict(
        self,
        conn: AsyncConnection,
        account: rows.Account,
        resource: rows.Resource,
        ours: list[Event],
        body: str | None,
    ) -> Outcome:
        server = await asyncio.to_thread(remote.fetch, account.login, resource.calendar_url, resource.href)
        uow = from_server(conn)  # what comes from the server is not sent back to it
        await uow.lock_user(resource.user_id)
        if server is None:
            if body is None:  # we wanted it gone and it is gone
                await conn.execute(
                    caldav_resources.delete().where(caldav_resources.c.event_id == resource.event_id)
                )
                return Outcome("delivered")
            return await self._gone(conn, account, resource)
        fallback = ZoneInfo(ours[0].tz) if ours and ours[0].tz else ZoneInfo("UTC")
        place = await rows.place(conn, account.id, resource.calendar_url)
        name = place.name
        try:
            theirs = place.rows(
                parse_resource(
                    server.body,
                    master_id=resource.event_id,
                    user_id=resource.user_id,
                    calendar=name,
                    fallback_tz=fallback,
                )
            )
        except UnreadableObject as exc:
            await self._mark(conn, resource.user_id, resource.event_id, "rejected")
            return Outcome("rejected", str(exc))
        theirs = still_blocks(theirs, {e.id: e.task_id for e in ours if e.task_id})
        if body is not None:
            sent = parse_resource(
                body,
                master_id=resource.event_id,
                user_id=resource.user_id,
                calendar=name,
                fallback_tz=fallback,
            )
            if fingerprint(sent) == fingerprint(theirs):
                # Our own earlier PUT, whose commit was lost: it is there already, once.
                await rows.save_resource(conn, resource, server.etag)
                await self._keep_object(conn, resource.user_id, resource.event_id, server.body)
                await self._mark(conn, resource.user_id, resource.event_id, None)
                return Outcome("delivered")
        # The server's version wins: stored as it is, the assistant's change offered again.
        await uow.events.delete_events(resource.user_id, [e.id for e in ours])
        for row in theirs:
            await uow.events.insert_event(row, turn_id="caldav-sync", key=None)
        await rows.save_resource(conn, resource, server.etag)
        mine = next((e for e in ours if e.id == resource.event_id), None)
        kept = theirs[0]
        if mine is None or body is None:
            if body is None and kept.rrule is None:
                await self._offer(conn, uow, kept, None)
        elif mine.rrule is None and kept.rrule is None and len(ours) == 1:
            asked = asked_between(self._base(mine, name, fallback), mine, kept)
            if asked:
                await self._offer(conn, uow, kept, change_onto(kept, mine, asked))
        return Outcome("conflict", "changed on the server since the last sync")

    def _base(self, mine: Event, calendar: str, fallback: ZoneInfo) -> Event | None:
        """The version `mine` was edited from: the object as the server last gave it (None when
        none was kept, or it cannot be read)."""
        if mine.ical is None:
            return None
        try:
            found = parse_resource(
                mine.ical, master_id=mine.id, user_id=mine.user_id, calendar=calendar, fallback_tz=fallback
            )
        except UnreadableObject:
            return None
        return next((row for row in found if row.id == mine.id), None)

    async def _adopt(
        self,
        conn: AsyncConnection,
        account: rows.Account,
        resource: rows.Resource,
        ours: list[Event],
        body: str | None,
        href: str | None,
    ) -> Outcome:
        """Our new object's UID is in the calendar already under another name (a calendar app
        stored it first): that object becomes the event's resource — never a second one — and
        is settled as any object changed on both sides (same content: delivered; else the
        server's version is kept and ours offered)."""
        if href is None:
            found = await asyncio.to_thread(
                remote.find_uid, account.login, resource.calendar_url, resource.uid
            )
            if found is None:
                await self._mark(conn, resource.user_id, resource.event_id, "rejected")
                return Outcome("rejected", "the server holds this UID but shows no object with it")
            href = found.href
        taken = await conn.scalar(
            select(caldav_resources.c.event_id).where(
                caldav_resources.c.account_id == account.id,
                caldav_resources.c.href == remote.normal_href(href),
                caldav_resources.c.event_id != resource.event_id,
            )
        )
        if taken is not None:
            await self._mark(conn, resource.user_id, resource.event_id, "rejected")
            return Outcome("rejected", "the server holds this UID as another event")
        return await self._conflict(conn, account, replace(resource, href=href, etag=None), ours, body)

    async def _gone(self, conn: AsyncConnection, account: rows.Account, resource: rows.Resource) -> Outcome:
        """Our write found its object gone (removed in the calendar app): neither resurrected nor
        dropped without a word — the event stays here with the user's change and the user is asked
        whether to remove it here too (withheld.py)."""
        uow = from_server(conn)
        await uow.lock_user(resource.user_id)
        place = await rows.place(conn, account.id, resource.calendar_url)
        await self.holds.withhold(conn, uow, account, place, [resource.event_id], unsent=True)
        return Outcome("conflict", "removed on the server: kept here until the user answers")

    async def _offer(
        self, conn: AsyncConnection, uow: SqlUnitOfWork, kept: Event, after: ChangeAfter | None
    ) -> None:
        """A held change stub: the assistant's update (`after`: only what it changed, on the
        server's version) or delete (None) of the event as the server has it now. Nothing
        changes until the user confirms it."""
        tz = ZoneInfo(kept.tz) if kept.tz else ZoneInfo("UTC")
        before = event_out(kept, tz)
        mine = None if after is None else kept.evolve(**row_values(kept, after))
        if mine is None:
            view = ChangeOut(
                action="delete", scope="this", before=before, removed_starts=(kept.start,), removed_count=1
            )
        else:
            view = ChangeOut(action="update", scope="this", before=before, after=event_out(mine, tz))
        # An offer from outside: it never ends the user's pending request; it waits beside it.
        ask = Ask(
            title=(mine or kept).title,
            hold_reason="sync_conflict",
            proposed_start=mine.start if mine else None,
            proposed_end=mine.end if mine else None,
            payload=HeldChange(
                view=view,
                action="delete" if mine is None else "update",
                scope="this",
                row_id=kept.id,
                master_id=None,
                occurrence_start=None,
                after=after,
            ),
        )
        earlier = await _offers_about(conn, kept.user_id, stubs.c.change["row_id"], kept.id)
        await self._from_outside(uow, kept.user_id, tz, ask, "change", earlier)

    async def _from_outside(
        self, uow: SqlUnitOfWork, user_id: str, tz: ZoneInfo, ask: Ask, kind: StubKind, earlier: list[str]
    ) -> None:
        txn = BackgroundTxn(uow, self.clock.now(), user_id, tz)
        pending = Pending(self.stub_ttl)
        # One offer per event or task: an earlier conflict offer about it (the server changed it
        # again since) gives way to this one, made from the version the server holds now.
        for stub_id in earlier:
            stub = await uow.stubs.get_stub(user_id, stub_id)
            if stub is not None and stub.active:
                await pending.store(txn, pending.of(stub).supersede(txn.now))
        await pending.from_outside(txn, ask, kind)


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


async def _offers_about(
    conn: AsyncConnection, user_id: str, about: ColumnElement[Any], resource_id: str
) -> list[str]:
    """The user's open sync-conflict offers about one event or task (`about`: where the payload
    names it), not those naming several."""
    found = await conn.execute(
        select(stubs.c.id).where(
            stubs.c.user_id == user_id,
            stubs.c.hold_reason == "sync_conflict",
            stubs.c.status == "held",
            about.astext == resource_id,
            stubs.c.change["gone_ids"].is_(None),
        )
    )
    return [r.id for r in found]


def _retry(exc: remote.Unavailable) -> Outcome:
    return Outcome("retry", str(exc)[:500], refused=not isinstance(exc, remote.Unreachable))


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
