"""Both sides changed one object: our PUT or DELETE met 412 (or our new object's UID was taken,
or its object is gone). The server's version is not merged by guessing: it is stored as it is, our
change becomes a held offer the user can confirm again (from outside: it waits beside their own
request), and what the server's version leads to here runs as after any write
(`tasks.replans.Replans.after_write`: the re-plan of task blocks it landed on, the blocks' TRANSP) —
which are our writes, queued for the server like any."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncConnection

from calagent.commands.adapters.store import SqlUnitOfWork, from_server
from calagent.commands.adapters.tables import caldav_resources, stubs
from calagent.commands.caldav import remote, rows
from calagent.commands.caldav.delivery import Outcome, keep_object, mark
from calagent.commands.caldav.inbound import AfterSync
from calagent.commands.caldav.todos import still_blocks
from calagent.commands.caldav.withheld import Holds
from calagent.commands.domain.changes import asked_between, change_onto, row_values
from calagent.commands.domain.model import Event
from calagent.commands.domain.payloads import ChangeAfter, HeldChange, HeldTaskChange
from calagent.commands.domain.pending import Ask
from calagent.commands.ical.parse import UnreadableObject, fingerprint, parse_resource
from calagent.commands.pending import BackgroundTxn, Pending
from calagent.commands.views import event_out
from calagent.contracts.commands import ChangeOut, StubKind
from calagent.runtime.clock import Clock


class Conflicts:
    def __init__(
        self, clock: Clock, stub_ttl: timedelta, tz: ZoneInfo, after_sync: AfterSync | None = None
    ) -> None:
        self.clock = clock
        self.stub_ttl = stub_ttl
        self.tz = tz  # a task's: reads floating and DATE values, as the inbound sync does
        self.holds = Holds(clock, stub_ttl)
        self.after_sync = after_sync

    async def offer_task(self, conn: AsyncConnection, user_id: str, offer: HeldTaskChange) -> None:
        """A held task change stub: our change to the task, on the server's version. Nothing
        changes until the user confirms it."""
        uow = from_server(conn)
        await uow.lock_user(user_id)
        task = offer.change.after or offer.change.before  # a removal is named by the task kept
        ask = Ask(title=task.title, hold_reason="sync_conflict", payload=offer)
        earlier = await _offers_about(conn, user_id, stubs.c.change[("change", "before", "id")], task.id)
        await self._from_outside(uow, user_id, self.tz, ask, "task_change", earlier)
        # The task as the server has it now may leave its blocks more room or less.
        await self._after(uow, user_id)

    async def settle(
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
            return await self.gone(conn, account, resource)
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
            await mark(conn, resource.user_id, resource.event_id, "rejected")
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
                await keep_object(conn, resource.user_id, resource.event_id, server.body)
                await mark(conn, resource.user_id, resource.event_id, None)
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
        # The server's version landed here like any write: on task blocks it offers their re-plan.
        await self._after(uow, resource.user_id)
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

    async def adopt(
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
                await mark(conn, resource.user_id, resource.event_id, "rejected")
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
            await mark(conn, resource.user_id, resource.event_id, "rejected")
            return Outcome("rejected", "the server holds this UID as another event")
        return await self.settle(conn, account, replace(resource, href=href, etag=None), ours, body)

    async def gone(self, conn: AsyncConnection, account: rows.Account, resource: rows.Resource) -> Outcome:
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

    async def _after(self, uow: SqlUnitOfWork, user_id: str) -> None:
        """`after_sync` on what the server's version wrote here (the repositories recorded it);
        the blocks it changed are ours, sent to the server like any write of ours."""
        if self.after_sync is None:
            return
        before = {user: set(ids) for user, ids in uow.effects.touched.items()}
        await self.after_sync(uow, user_id, ())
        ours = {user: ids - before.get(user, set()) for user, ids in uow.effects.touched.items()}
        await uow.sync.queue_deliveries({user: ids for user, ids in ours.items() if ids})


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
