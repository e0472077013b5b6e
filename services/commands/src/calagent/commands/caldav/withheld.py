"""Events (and tasks) a connected calendar stopped showing that are not removed here until the
user says so (contract §22).

Two ways lead here. A calendar that held events (or tasks, counted apart) returns none, or loses
more than half of them in one sync (`looks_emptied`): a glitching server must not empty the user's calendar in the assistant
and everything that reads it. And a write of ours finds its object gone (404 on the update, or a
412 whose object is gone): the user's change is not dropped without a word. Either way the events
stay here, the calendar row keeps their ids (`caldav_calendars.withheld`), and one held offer from
outside (a `sync_conflict` delete naming them all, `HeldChange.gone_ids`) asks whether to remove
them here too. The account shows the warning until the user answers.

The answer is settled by the next sync of the calendar (`Holds.settle`): confirmed, the events
were removed here by the confirmation; refused, they are sent to the server again (the server and
the assistant agree again either way); events the calendar shows again leave the hold by
themselves. An offer that lapsed unanswered is made again once the user has no other request open.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from sqlalchemy import Table, null, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from calagent.commands.adapters.store import SqlUnitOfWork
from calagent.commands.adapters.tables import (
    caldav_calendars,
    caldav_outbox,
    caldav_resources,
    events,
    tasks,
)
from calagent.commands.caldav import rows
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.payloads import HeldChange
from calagent.commands.domain.pending import Ask
from calagent.commands.pending import BackgroundTxn, Pending
from calagent.commands.views import event_out
from calagent.contracts.commands import ChangeOut
from calagent.contracts.tasks import TaskOut
from calagent.runtime.clock import Clock

# The starts a removal offer lists (the count says how many in all).
SHOWN_STARTS = 5
# How the offer ends when the user answered it: removed here, or kept (and sent again).
ANSWERED = frozenset({"deleted", "cancelled"})


def looks_emptied(gone: int, known: int) -> bool:
    """Whether one sync's losses look like a server's glitch rather than the user's deletions: a
    calendar that held events shows none, or more than half of them went at once."""
    return known > 0 and gone > 0 and (gone >= known or 2 * gone > known)


@dataclass(frozen=True)
class Withheld:
    """What a calendar row keeps: the events withheld, how many the calendar held and showed when
    the loss was seen (None: an object gone under our write, no count to tell), and the offer."""

    ids: tuple[str, ...]
    had: int | None = None
    shows: int | None = None
    stub: str | None = None
    # Those withheld with a change of ours not delivered (our write found no object): when the
    # calendar shows them again after all, that change still has to go out.
    unsent: tuple[str, ...] = ()

    @classmethod
    def read(cls, value: Mapping[str, Any] | None) -> Withheld | None:
        if not value:
            return None
        return cls(
            tuple(str(i) for i in value.get("ids", ())),
            value.get("had"),
            value.get("shows"),
            value.get("stub"),
            tuple(str(i) for i in value.get("unsent", ())),
        )

    def json(self) -> dict[str, Any]:
        return {
            "ids": list(self.ids),
            "had": self.had,
            "shows": self.shows,
            "stub": self.stub,
            "unsent": list(self.unsent),
        }

    def only(self, ids: Sequence[str], stub: str | None) -> Withheld:
        return Withheld(tuple(ids), self.had, self.shows, stub, tuple(i for i in self.unsent if i in ids))


class Holds:
    def __init__(self, clock: Clock, stub_ttl: timedelta) -> None:
        self.clock = clock
        self.pending = Pending(stub_ttl)

    async def read(self, conn: AsyncConnection, account_id: str, url: str) -> Withheld | None:
        value = await conn.scalar(
            select(caldav_calendars.c.withheld).where(
                caldav_calendars.c.account_id == account_id, caldav_calendars.c.url == url
            )
        )
        return Withheld.read(value)

    async def _store(self, conn: AsyncConnection, account_id: str, url: str, held: Withheld | None) -> None:
        await conn.execute(
            update(caldav_calendars)
            .where(caldav_calendars.c.account_id == account_id, caldav_calendars.c.url == url)
            # SQL NULL, not JSON null: "nothing withheld" is the column's absence.
            .values(withheld=held.json() if held is not None else null())
        )

    async def withhold(
        self,
        conn: AsyncConnection,
        uow: SqlUnitOfWork,
        account: rows.Account,
        place: rows.Place,
        ids: Sequence[str],
        *,
        had: int | None = None,
        shows: int | None = None,
        unsent: bool = False,
    ) -> None:
        """Keep `ids` here and ask: one offer for all the calendar withholds (an earlier offer of
        the same calendar gives way to the one that names them all). `unsent`: they carry a
        change of ours the server did not take."""
        current = await self.read(conn, account.id, place.url)
        before = current.ids if current is not None else ()
        merged = tuple(dict.fromkeys((*before, *ids)))
        pending = tuple(dict.fromkeys((*(current.unsent if current else ()), *(ids if unsent else ()))))
        if current is not None and merged == before:
            if pending != current.unsent:
                await self._store(conn, account.id, place.url, replace(current, unsent=pending))
            return  # asked already
        if current is not None and current.had is not None:
            had, shows = current.had, current.shows
        stub = await self._stub(uow, account.user_id, current)
        held = Withheld(merged, had, shows, stub.id if stub is not None else None, pending)
        await self._offer(conn, uow, account, place, held, stub)

    async def settle(
        self,
        conn: AsyncConnection,
        uow: SqlUnitOfWork,
        account: rows.Account,
        place: rows.Place,
        shown_again: set[str],
    ) -> set[str]:
        """The calendar's hold as the user's answer and the server leave it; the ids still
        withheld (none to delete by this sync)."""
        current = await self.read(conn, account.id, place.url)
        if current is None:
            return set()
        stub = await self._stub(uow, account.user_id, current)
        if stub is not None and stub.status in ANSWERED:
            if stub.status == "cancelled":
                await self._send_again(conn, account.user_id, current.ids)
            await self._store(conn, account.id, place.url, None)
            return set()
        present = await _present(conn, account.user_id, current.ids)
        # Shown again after all (a glitch, or a 404 the server took back): no longer withheld, and
        # a change of ours it never took goes out now.
        back = [i for i in current.unsent if i in present and i in shown_again]
        if back:
            await conn.execute(
                caldav_outbox.insert(), [{"user_id": account.user_id, "event_id": i} for i in back]
            )
        ids = tuple(i for i in current.ids if i in present and i not in shown_again)
        if not ids:
            if stub is not None and stub.active:
                ended = self.pending.of(stub).supersede(self.clock.now())
                await self.pending.store(self._txn(uow, account.user_id), ended)
            await self._store(conn, account.id, place.url, None)
            return set()
        lapsed = stub is None or not stub.active
        if ids != current.ids or (lapsed and await uow.stubs.active_stub(account.user_id) is None):
            await self._offer(conn, uow, account, place, current.only(ids, None), stub)
        return set(ids)

    async def _stub(self, uow: SqlUnitOfWork, user_id: str, held: Withheld | None) -> Stub | None:
        if held is None or held.stub is None:
            return None
        return await uow.stubs.get_stub(user_id, held.stub)

    def _txn(self, uow: SqlUnitOfWork, user_id: str, tz: ZoneInfo | None = None) -> BackgroundTxn:
        return BackgroundTxn(uow, self.clock.now(), user_id, tz or ZoneInfo("UTC"))

    async def _offer(
        self,
        conn: AsyncConnection,
        uow: SqlUnitOfWork,
        account: rows.Account,
        place: rows.Place,
        held: Withheld,
        old: Stub | None,
    ) -> None:
        """The one offer naming every withheld event and task of the calendar, in place of `old`."""
        found = sorted(await uow.events.events_by_ids(account.user_id, list(held.ids)), key=lambda e: e.start)
        found_tasks = await uow.tasks.tasks_by_ids(account.user_id, list(held.ids))
        if not found and not found_tasks:
            await self._store(conn, account.id, place.url, None)
            return
        # The latest event shows on the card: an offer set aside waits until its event starts. A
        # calendar that lost only tasks shows its first task at its due (or now, without one).
        last = found[-1] if found else _as_shown(found_tasks[0], account.user_id, place.name, self.clock)
        tz = ZoneInfo(last.tz) if last.tz else ZoneInfo("UTC")
        txn = self._txn(uow, account.user_id, tz)
        gone_ids = (*(e.id for e in found), *(t.id for t in found_tasks))
        if old is not None and old.active:
            await self.pending.store(txn, self.pending.of(old).supersede(txn.now))
        view = ChangeOut(
            action="delete",
            scope="this",
            before=event_out(last, tz),
            removed_starts=tuple(e.start for e in found[:SHOWN_STARTS]),
            removed_count=len(gone_ids),
        )
        ask = Ask(
            title=_title(account, place, held, last.title, "events and tasks" if found_tasks else "events"),
            hold_reason="sync_conflict",
            payload=HeldChange(
                view=view,
                action="delete",
                scope="this",
                row_id=last.id,
                master_id=None,
                occurrence_start=None,
                after=None,
                gone_ids=gone_ids,
            ),
        )
        stub = await self.pending.from_outside(txn, ask, "change")
        await self._store(conn, account.id, place.url, held.only(gone_ids, stub.id))

    async def _send_again(self, conn: AsyncConnection, user_id: str, ids: Sequence[str]) -> None:
        """The user keeps them: each event or task is written to the server again as a new object
        (If-None-Match, so one the server still has is recognised by its content, never doubled)."""
        kept_events = set(await _ids_in(conn, events, user_id, ids))
        kept_tasks = set(await _ids_in(conn, tasks, user_id, ids))
        kept = sorted(kept_events | kept_tasks)
        if not kept:
            return
        await conn.execute(
            update(caldav_resources).where(caldav_resources.c.event_id.in_(kept)).values(etag=None)
        )
        await conn.execute(
            caldav_outbox.insert(),
            [
                {"user_id": user_id, "event_id": i, "kind": "task" if i in kept_tasks else "event"}
                for i in kept
            ],
        )


async def _ids_in(conn: AsyncConnection, table: Table, user_id: str, ids: Sequence[str]) -> list[str]:
    """Which of `ids` are rows of the user's in `table` (events or tasks) still."""
    found = await conn.execute(
        select(table.c.id).where(table.c.user_id == user_id, table.c.id.in_(list(ids)))
    )
    return [r.id for r in found]


async def _present(conn: AsyncConnection, user_id: str, ids: Sequence[str]) -> set[str]:
    return {*await _ids_in(conn, events, user_id, ids), *await _ids_in(conn, tasks, user_id, ids)}


def _as_shown(task: TaskOut, user_id: str, calendar: str, clock: Clock) -> Event:
    """A task on the offer's card, which shows an event: at its due (or now), its own title."""
    at = task.due or clock.now()
    return Event(id=task.id, user_id=user_id, title=task.title, start=at, end=at, calendar=calendar)


def _title(account: rows.Account, place: rows.Place, held: Withheld, single: str, what: str) -> str:
    """What the offer is called: the calendar and its count when a calendar lost events (or
    tasks: `what`) at once (a shared calendar by no name: its name is its owner's words), else
    the one event's title."""
    if held.had is None:
        return single
    host = urlsplit(account.login.url).hostname or "the server"
    calendar = f"your calendar {place.name}" if place.owned else "a calendar shared with you"
    return f"{calendar} on {host} now shows {held.shows} of {held.had} {what}: remove them here too?"[:200]
