"""The SQL store: one `UnitOfWork` per transaction over an asyncpg connection.

Every statement goes through `_run`, which also adds its duration to `db_ms` so a result can say how
much of its time the database took.
"""

from __future__ import annotations

import time as _time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import date, datetime
from typing import Any

from opentelemetry import propagate
from sqlalchemy import (
    ARRAY,
    ColumnElement,
    DateTime,
    Executable,
    Result,
    Row,
    String,
    and_,
    bindparam,
    case,
    exists,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from calagent.commands.adapters.tables import (
    ACTIVE_SQL,
    caldav_accounts,
    caldav_cards,
    caldav_outbox,
    calendars,
    change_rows,
    changes,
    contacts,
    events,
    feeds,
    idempotency,
    inbound_mail,
    mail_outbox,
    mailboxes,
    plans,
    sharing,
    stubs,
    user_settings,
)
from calagent.commands.domain.changelog import (
    BOOKKEEPING,
    ChangeContext,
    LoggedChange,
    RowChange,
    Snapshot,
    event_of,
)
from calagent.commands.domain.model import Event, Stub, local_uid
from calagent.commands.domain.people import Contact
from calagent.commands.domain.settings import StoredSettings
from calagent.commands.ports import KeyInFlightError
from calagent.contracts.commands import CommandResult, PlanOut, StubSlots
from calagent.contracts.people import Attendee
from calagent.contracts.settings import ShareEntry


def event_from_row(row: Row[Any]) -> Event:
    return Event(
        id=row.id,
        user_id=row.user_id,
        title=row.title,
        start=row.start_at,
        end=row.end_at,
        calendar=row.calendar,
        all_day=row.all_day,
        completed=row.completed,
        tz=row.tz,
        rrule=row.rrule,
        exdates=tuple(datetime.fromisoformat(d) for d in row.exdates),
        series_id=row.series_id,
        recurrence_id=row.recurrence_id,
        reminder_minutes=row.reminder_minutes,
        sync_state=row.sync_state,
        uid=row.uid or local_uid(row.id),
        location=row.location,
        notes=row.notes,
        url=row.url,
        ical=row.ical,
        attendees=tuple(Attendee.model_validate(a) for a in row.attendees),
        organizer=row.organizer,
    )


def _event_values(event: Event) -> dict[str, object]:
    return {
        "title": event.title,
        "start_at": event.start,
        "end_at": event.end,
        "all_day": event.all_day,
        "calendar": event.calendar,
        "completed": event.completed,
        "tz": event.tz,
        "rrule": event.rrule,
        "exdates": [d.isoformat() for d in event.exdates],
        "series_id": event.series_id,
        "recurrence_id": event.recurrence_id,
        "reminder_minutes": event.reminder_minutes,
        "location": event.location,
        "notes": event.notes,
        "url": event.url,
        "attendees": [a.model_dump(mode="json") for a in event.attendees],
        "organizer": event.organizer,
    }


def event_insert_values(event: Event, *, turn_id: str, key: str | None) -> dict[str, object]:
    """A row as it is: the UID and object it carries (a sync's rows say what the server holds)."""
    return {
        "id": event.id,
        "user_id": event.user_id,
        "created_by_turn": turn_id,
        "created_by_key": key,
        "uid": event.uid or local_uid(event.id),
        "ical": event.ical if event.series_id is None else None,
        **_event_values(event),
    }


def _series_uid(event: Event) -> ColumnElement[Any]:
    """An override's UID is its series' (read in the statement that writes the row)."""
    master = events.alias("master")
    return func.coalesce(
        select(master.c.uid)
        .where(master.c.user_id == event.user_id, master.c.id == event.series_id)
        .scalar_subquery(),
        event.uid or local_uid(event.id),
    )


def _born_uid(event: Event) -> ColumnElement[Any] | str:
    """The UID of a new event or series: the one it carries unless another event of the user
    already owns it (a series split from another is copied from it with its UID: the new series
    is a new event and is born with its own UID), else `local_uid`."""
    own = local_uid(event.id)
    if event.uid is None or event.uid == own:
        return own
    other = events.alias("other")
    taken = exists().where(
        other.c.user_id == event.user_id,
        other.c.uid == event.uid,
        other.c.series_id.is_(None),
        other.c.id != event.id,
    )
    return case((taken, literal(own)), else_=literal(event.uid))


def _stub(row: Row[Any]) -> Stub:
    return Stub(
        id=row.id,
        user_id=row.user_id,
        title=row.title,
        slots=StubSlots.model_validate(row.slots),
        status=row.status,
        expires_at=row.expires_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
        candidates=tuple(date.fromisoformat(d) for d in row.candidates),
        conflict_event_ids=tuple(row.conflict_event_ids),
        hold_reason=row.hold_reason,
        requested_hold=row.requested_hold,
        confirmed=row.confirmed,
        proposed_start=row.proposed_start,
        proposed_end=row.proposed_end,
        created_by_turn=row.created_by_turn,
        kind=row.kind,
        change=row.change,
        attendee_query=row.attendee_query,
        attendee_candidates=tuple(Attendee.model_validate(a) for a in row.attendee_candidates),
        recipients=tuple(Attendee.model_validate(a) for a in row.recipients),
    )


def _stub_values(stub: Stub) -> dict[str, object]:
    return {
        "title": stub.title,
        "slots": stub.slots.model_dump(mode="json"),
        "status": stub.status,
        "candidates": [d.isoformat() for d in stub.candidates],
        "conflict_event_ids": list(stub.conflict_event_ids),
        "hold_reason": stub.hold_reason,
        "requested_hold": stub.requested_hold,
        "confirmed": stub.confirmed,
        "proposed_start": stub.proposed_start,
        "proposed_end": stub.proposed_end,
        "expires_at": stub.expires_at,
        "updated_at": stub.updated_at,
        "kind": stub.kind,
        "change": stub.change,
        "attendee_query": stub.attendee_query,
        "attendee_candidates": [a.model_dump(mode="json") for a in stub.attendee_candidates],
        "recipients": [a.model_dump(mode="json") for a in stub.recipients],
    }


# Kept as the row has them when an undo writes a row back: who it is, how it was made, and the
# object the server holds (the outbox patches the restored values into it).
_KEPT_ON_RESTORE = ("id", "user_id", "ical", "created_at", "created_by_turn", "created_by_key", "sync_state")


_ROWS = (
    "SELECT to_jsonb(e) AS row FROM commands.events e WHERE e.user_id = :user AND e.id = ANY(:ids) FOR UPDATE"
)
_ROWS_WITH_SERIES = (
    "SELECT to_jsonb(e) AS row FROM commands.events e "
    "WHERE e.user_id = :user AND (e.id = ANY(:ids) OR e.series_id = ANY(:ids)) FOR UPDATE"
)


def _snapshot_values(snapshot: Snapshot) -> dict[str, object]:
    """A logged row (`to_jsonb`) as the values of an INSERT or UPDATE of `events`."""
    values: dict[str, object] = {}
    for column in events.c:
        if column.name not in snapshot:
            continue
        value = snapshot[column.name]
        if isinstance(column.type, DateTime) and value is not None:
            value = datetime.fromisoformat(str(value))
        values[column.name] = value
    values["updated_at"] = func.now()
    return values


def resource_of(event: Event) -> str:
    """The id of the calendar object an event row belongs to: an override lives in its series'."""
    return event.series_id or event.id


class SqlUnitOfWork:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._seconds = 0.0
        self.committed = False
        # Per user, the events (resources) this transaction wrote: their outbox rows are added at
        # commit, in the same transaction. Off for writes that came *from* the CalDAV server.
        self.outbound = True
        self.touched: dict[str, set[str]] = {}
        self.outbox_users: tuple[str, ...] = ()
        # Per user, the touched resources that may have people to mail (contract §16); the objects
        # of those deleted, with their organizer; the users whose mail was queued at commit.
        self.invited: dict[str, set[str]] = {}
        self.deleted_objects: dict[str, tuple[str, str]] = {}
        self.mail_users: tuple[str, ...] = ()
        # Off for a change that is itself someone's answer (an attendee's REPLY): it mails nobody.
        self.mail_people = True
        self.before_commit: Callable[[SqlUnitOfWork], Awaitable[None]] | None = None
        # What this transaction's writes to events are logged as (contract §15); None: a write
        # that is not a command's (the sync), which the log's trigger records as `sync`.
        self.change: ChangeContext | None = None
        self._change_sent: str | None = None

    def log_changes_as(self, context: ChangeContext) -> None:
        self.change = context

    async def _log(self) -> None:
        """Tell the log's trigger, once per transaction (and again if it changed), which change
        the next row writes belong to."""
        if self.change is None:
            return
        payload = self.change.as_json()
        if payload != self._change_sent:
            await self._run(select(func.set_config("calagent.change", payload, True)))
            self._change_sent = payload

    def touch(self, user_id: str, resource_id: str) -> None:
        self.touched.setdefault(user_id, set()).add(resource_id)

    def _may_invite(self, event: Event) -> None:
        # An override may change a meeting whose people are on its master: looked at at commit.
        if event.organizer or event.attendees or event.series_id:
            self.invited.setdefault(event.user_id, set()).add(resource_of(event))

    @property
    def db_ms(self) -> float:
        return round(self._seconds * 1000.0, 3)

    def add_seconds(self, seconds: float) -> None:
        self._seconds += seconds

    async def _run(self, statement: Executable) -> Result[Any]:
        started = _time.perf_counter()
        try:
            return await self._conn.execute(statement)
        finally:
            self._seconds += _time.perf_counter() - started

    # ---- idempotency -----------------------------------------------------------------------------

    async def claim_key(self, user_id: str, key: str) -> CommandResult | None:
        # The unique key is the lock: a concurrent duplicate's INSERT waits here for the first
        # transaction, then finds the row (committed) or inserts it itself (the first rolled back).
        claimed = await self._run(
            pg_insert(idempotency)
            .values(user_id=user_id, key=key, result=None)
            .on_conflict_do_nothing(index_elements=["user_id", "key"])
            .returning(idempotency.c.key)
        )
        if claimed.first() is not None:
            return None
        stored = await self._run(
            select(idempotency.c.result).where(idempotency.c.user_id == user_id, idempotency.c.key == key)
        )
        value = stored.scalar_one_or_none()
        if value is None:
            raise KeyInFlightError(f"idempotency key {key!r} has no stored result yet")
        return CommandResult.model_validate(value)

    async def store_result(self, user_id: str, key: str, result: CommandResult) -> None:
        await self._run(
            update(idempotency)
            .where(idempotency.c.user_id == user_id, idempotency.c.key == key)
            .values(result=result.model_dump(mode="json"))
        )

    async def lock_user(self, user_id: str) -> None:
        await self._run(select(func.pg_advisory_xact_lock(func.hashtextextended(user_id, 0))))

    # ---- calendars -------------------------------------------------------------------------------

    async def calendars(self, user_id: str, defaults: Sequence[str]) -> list[str]:
        query = (
            select(calendars.c.name)
            .where(calendars.c.user_id == user_id)
            .order_by(calendars.c.position, calendars.c.name)
        )
        names = list((await self._run(query)).scalars())
        if names:
            return names
        await self._run(
            pg_insert(calendars)
            .values([{"user_id": user_id, "name": name, "position": i} for i, name in enumerate(defaults)])
            .on_conflict_do_nothing()
        )
        return list((await self._run(query)).scalars())

    # ---- stubs -----------------------------------------------------------------------------------

    async def get_stub(self, user_id: str, stub_id: str) -> Stub | None:
        row = (
            await self._run(
                select(stubs).where(stubs.c.id == stub_id, stubs.c.user_id == user_id).with_for_update()
            )
        ).first()
        return _stub(row) if row is not None else None

    async def active_stub(self, user_id: str) -> Stub | None:
        row = (
            await self._run(
                select(stubs).where(stubs.c.user_id == user_id, text(ACTIVE_SQL)).with_for_update()
            )
        ).first()
        return _stub(row) if row is not None else None

    async def insert_stub(self, stub: Stub) -> None:
        await self._run(
            stubs.insert().values(
                id=stub.id,
                user_id=stub.user_id,
                created_at=stub.created_at,
                created_by_turn=stub.created_by_turn,
                **_stub_values(stub),
            )
        )

    async def update_stub(self, stub: Stub) -> None:
        await self._run(
            update(stubs)
            .where(stubs.c.id == stub.id, stubs.c.user_id == stub.user_id)
            .values(**_stub_values(stub))
        )

    # ---- events ----------------------------------------------------------------------------------

    async def events_overlapping(
        self, user_id: str, start: datetime, end: datetime, *, incomplete_only: bool = False
    ) -> list[Event]:
        # Rows that overlap, plus every series master that began before the window ends: its
        # later occurrences may fall inside; the caller expands them. An override whose slot comes
        # before the window's end is returned wherever it was moved to: without it, a slot whose
        # occurrence moved out of the window would show at its old time.
        query = select(events).where(
            events.c.user_id == user_id,
            or_(
                and_(
                    events.c.start_at < end,
                    or_(events.c.end_at > start, events.c.rrule.is_not(None)),
                ),
                and_(events.c.series_id.is_not(None), events.c.recurrence_id < end),
            ),
        )
        if incomplete_only:
            query = query.where(events.c.completed.is_(False))
        rows = await self._run(query.order_by(events.c.start_at, events.c.id))
        return [event_from_row(row) for row in rows]

    async def events_by_ids(self, user_id: str, ids: Sequence[str]) -> list[Event]:
        if not ids:
            return []
        rows = await self._run(
            select(events)
            .where(events.c.user_id == user_id, events.c.id.in_(list(ids)))
            .order_by(events.c.start_at, events.c.id)
        )
        return [event_from_row(row) for row in rows]

    async def all_events(self, user_id: str) -> list[Event]:
        rows = await self._run(
            select(events).where(events.c.user_id == user_id).order_by(events.c.start_at, events.c.id)
        )
        return [event_from_row(row) for row in rows]

    async def insert_event(self, event: Event, *, turn_id: str, key: str | None) -> None:
        await self._log()
        self.touch(event.user_id, resource_of(event))
        self._may_invite(event)
        values = event_insert_values(event, turn_id=turn_id, key=key)
        values["uid"] = _series_uid(event) if event.series_id is not None else _born_uid(event)
        await self._run(events.insert().values(**values))

    async def get_event(self, user_id: str, event_id: str) -> Event | None:
        row = (
            await self._run(
                select(events).where(events.c.id == event_id, events.c.user_id == user_id).with_for_update()
            )
        ).first()
        return event_from_row(row) if row is not None else None

    async def update_event(self, event: Event) -> None:
        # The UID and the object are the sync's: a change never rewrites them, except that an
        # override moved to another series (a split) takes that series' UID.
        await self._log()
        self.touch(event.user_id, resource_of(event))
        self._may_invite(event)
        values: dict[str, object] = {"updated_at": func.now(), **_event_values(event)}
        if event.series_id is not None:
            values["uid"] = _series_uid(event)
        await self._run(
            update(events).where(events.c.id == event.id, events.c.user_id == event.user_id).values(**values)
        )

    async def delete_events(self, user_id: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        await self._log()
        result = await self._run(
            events.delete()
            .where(events.c.user_id == user_id, events.c.id.in_(list(ids)))
            .returning(events.c.id, events.c.series_id, events.c.organizer, events.c.ical)
        )
        gone = result.all()
        for row in gone:
            self.touch(user_id, row.series_id or row.id)
            if row.organizer or row.series_id:
                self.invited.setdefault(user_id, set()).add(row.series_id or row.id)
            if row.series_id is None and row.organizer and row.ical:
                self.deleted_objects[row.id] = (row.organizer, row.ical)
        return len(gone)

    async def resource_rows(self, user_id: str, resource_id: str) -> list[Event]:
        """The rows of one calendar object: the event (or master) and its overrides."""
        rows = await self._run(
            select(events)
            .where(
                events.c.user_id == user_id,
                or_(events.c.id == resource_id, events.c.series_id == resource_id),
            )
            .order_by(events.c.start_at, events.c.id)
        )
        return [event_from_row(row) for row in rows]

    async def keep_object(self, user_id: str, event_id: str, ical: str) -> None:
        """The object as the people invited were sent it: what the next change is patched into."""
        await self._run(
            update(events).where(events.c.user_id == user_id, events.c.id == event_id).values(ical=ical)
        )

    async def queue_mail(
        self, user_id: str, sender: str, mails: Sequence[tuple[str, Any]], carrier: dict[str, str]
    ) -> None:
        """iMIP messages into the mail outbox; one already queued (same Message-ID) stays once."""
        await self._run(
            pg_insert(mail_outbox)
            .values(
                [
                    {
                        "user_id": user_id,
                        "event_uid": uid,
                        "method": mail.method,
                        "sequence": mail.sequence,
                        "sender": sender,
                        "recipient": mail.recipient,
                        "message_id": mail.message_id,
                        "message": mail.text,
                        "trace_context": carrier,
                    }
                    for uid, mail in mails
                ]
            )
            .on_conflict_do_nothing(index_elements=[mail_outbox.c.message_id])
        )
        if mails and user_id not in self.mail_users:
            self.mail_users = (*self.mail_users, user_id)  # the outbox is woken after commit

    async def series_overrides(self, user_id: str, series_id: str) -> list[Event]:
        rows = await self._run(
            select(events)
            .where(events.c.user_id == user_id, events.c.series_id == series_id)
            .order_by(events.c.recurrence_id)
        )
        return [event_from_row(row) for row in rows]

    # ---- the change log (contract §15) -----------------------------------------------------------

    async def _logged(self, found: Sequence[Row[Any]]) -> list[LoggedChange]:
        if not found:
            return []
        rows = await self._run(
            select(change_rows)
            .where(change_rows.c.change_id.in_([c.id for c in found]))
            .order_by(change_rows.c.seq)
        )
        by_change: dict[str, list[RowChange]] = {}
        for r in rows:
            by_change.setdefault(r.change_id, []).append(RowChange(r.event_id, r.before, r.after))
        return [
            LoggedChange(
                id=c.id,
                at=c.at,
                source=c.source,
                turn_id=c.turn_id,
                scope=c.scope,
                undoes=c.undoes,
                undone_by=c.undone_by,
                rows=tuple(by_change[c.id]),
            )
            for c in found
            if c.id in by_change
        ]

    async def change_page(self, user_id: str, limit: int, before: str | None = None) -> list[LoggedChange]:
        """The user's changes, newest first; `before`: only those older than that change."""
        query = select(changes).where(changes.c.user_id == user_id)
        if before is not None:
            older = select(changes.c.seq).where(changes.c.user_id == user_id, changes.c.id == before)
            query = query.where(changes.c.seq < older.scalar_subquery())
        found = (await self._run(query.order_by(changes.c.seq.desc()).limit(limit))).all()
        return await self._logged(found)

    async def get_change(self, user_id: str, change_id: str) -> LoggedChange | None:
        """One of the user's changes, locked; another user's id is answered like an unknown one."""
        found = (
            await self._run(
                select(changes)
                .where(changes.c.user_id == user_id, changes.c.id == change_id)
                .with_for_update()
            )
        ).all()
        logged = await self._logged(found)
        return logged[0] if logged else None

    async def latest_change(self, user_id: str, turn_id: str | None = None) -> LoggedChange | None:
        """The user's latest change made by the assistant and not undone (of one turn, if given)."""
        query = select(changes).where(
            changes.c.user_id == user_id, changes.c.source != "sync", changes.c.undone_by.is_(None)
        )
        if turn_id is not None:
            query = query.where(changes.c.turn_id == turn_id)
        found = (await self._run(query.order_by(changes.c.seq.desc()).limit(1).with_for_update())).all()
        logged = await self._logged(found)
        return logged[0] if logged else None

    async def change_logged(self, change_id: str) -> bool:
        """Whether this transaction's change altered anything a user can see (the commit prunes
        rows that differ only in bookkeeping, and a change left without rows)."""
        found = await self._run(
            select(
                exists().where(
                    change_rows.c.change_id == change_id,
                    change_rows.c.before.op("-")(
                        literal(sorted(BOOKKEEPING), ARRAY(String()))
                    ).is_distinct_from(
                        change_rows.c.after.op("-")(literal(sorted(BOOKKEEPING), ARRAY(String())))
                    ),
                )
            )
        )
        return bool(found.scalar())

    async def mark_undone(self, user_id: str, change_id: str, by: str) -> None:
        await self._run(
            update(changes)
            .where(changes.c.user_id == user_id, changes.c.id == change_id)
            .values(undone_by=by)
        )

    async def current_rows(
        self, user_id: str, ids: Sequence[str], *, series: bool = False
    ) -> dict[str, Snapshot]:
        """The rows stored now, as the log records them (`to_jsonb`), locked; `series`: with the
        overrides of any of them."""
        if not ids:
            return {}
        statement = (
            text(_ROWS_WITH_SERIES if series else _ROWS)
            .bindparams(
                bindparam("ids", value=list(ids), type_=ARRAY(String())),
                bindparam("user", value=user_id, type_=String()),
            )
            .columns(row=JSONB)
        )
        found = await self._run(statement)
        return {r.row["id"]: r.row for r in found}

    async def restore_rows(
        self, user_id: str, plan: Sequence[tuple[str, Snapshot | None]], current: Mapping[str, Snapshot]
    ) -> None:
        """Write every row of `plan` back to the snapshot given (None: remove it), keeping the
        object each row has now (the outbox patches the restored values into it); a row that comes
        back gets its object, UID and id as they were."""
        await self._log()
        gone = [event_id for event_id, snap in plan if snap is None and event_id in current]
        await self.delete_events(user_id, gone)
        for event_id, snap in plan:
            if snap is None:
                continue
            event = event_of(snap)
            self.touch(user_id, event.series_id or event.id)
            self._may_invite(event)
            values = _snapshot_values(snap)
            if event_id in current:
                for kept in _KEPT_ON_RESTORE:
                    values.pop(kept, None)
                await self._run(
                    update(events)
                    .where(events.c.user_id == user_id, events.c.id == event_id)
                    .values(**values)
                )
            else:
                await self._run(events.insert().values(**values))

    # ---- plans -----------------------------------------------------------------------------------

    async def insert_plan(self, user_id: str, plan: PlanOut, *, stub_id: str, key: str) -> None:
        await self._run(
            plans.insert().values(
                id=plan.id,
                user_id=user_id,
                trigger=plan.trigger,
                steps=list(plan.steps),
                status=plan.status,
                stub_id=stub_id,
                created_by_key=key,
                created_at=plan.created_at,
                updated_at=plan.created_at,
            )
        )

    async def set_plan_status(self, user_id: str, plan_id: str, status: str, at: datetime) -> None:
        await self._run(
            update(plans)
            .where(plans.c.id == plan_id, plans.c.user_id == user_id)
            .values(status=status, updated_at=at)
        )

    async def plans(self, user_id: str) -> list[PlanOut]:
        rows = await self._run(
            select(plans)
            .where(plans.c.user_id == user_id, plans.c.status != "deleted")
            .order_by(plans.c.created_at.desc(), plans.c.id)
        )
        return [
            PlanOut(
                id=r.id, trigger=r.trigger, steps=tuple(r.steps), status=r.status, created_at=r.created_at
            )
            for r in rows
        ]

    async def delete_plan(self, user_id: str, plan_id: str, at: datetime) -> bool:
        result = await self._run(
            update(plans)
            .where(plans.c.id == plan_id, plans.c.user_id == user_id, plans.c.status != "deleted")
            .values(status="deleted", updated_at=at)
        )
        return bool(getattr(result, "rowcount", 0))

    async def _enqueue_outbound(self) -> None:
        """One outbox row per touched resource of each user who has a connected account (none
        otherwise: the statement inserts nothing), committed with the write itself."""
        if not self.outbound or not self.touched:
            return
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        users: list[str] = []
        for user_id, resources in self.touched.items():
            inserted = await self._run(
                pg_insert(caldav_outbox).from_select(
                    ["user_id", "event_id", "trace_context"],
                    select(
                        literal(user_id),
                        func.unnest(literal(sorted(resources), ARRAY(String()))),
                        literal(carrier, JSONB()),
                    ).where(exists().where(caldav_accounts.c.user_id == user_id)),
                )
            )
            if getattr(inserted, "rowcount", 0):
                users.append(user_id)
        self.outbox_users = tuple(users)

    async def take_sync_notices(self, user_id: str, limit: int = 5) -> list[tuple[str, Event]]:
        """Deliveries refused or lost to the server's version since the last turn, each told once:
        (outcome, the event as stored now). An event gone since is not worth a line."""
        claimed = await self._run(
            update(caldav_outbox)
            .where(
                caldav_outbox.c.id.in_(
                    select(caldav_outbox.c.id)
                    .where(
                        caldav_outbox.c.user_id == user_id,
                        caldav_outbox.c.outcome.in_(("rejected", "conflict")),
                        caldav_outbox.c.reported_at.is_(None),
                    )
                    .order_by(caldav_outbox.c.id)
                    .limit(limit)
                    .with_for_update(skip_locked=True)
                    .scalar_subquery()
                )
            )
            .values(reported_at=func.clock_timestamp())
            .returning(caldav_outbox.c.event_id, caldav_outbox.c.outcome)
        )
        found = claimed.all()
        if not found:
            return []
        by_id = {e.id: e for e in await self.events_by_ids(user_id, [r.event_id for r in found])}
        seen: set[str] = set()
        notices = []
        for row in found:
            event = by_id.get(row.event_id)
            if event is not None and row.event_id not in seen:
                seen.add(row.event_id)
                notices.append((str(row.outcome), event))
        return notices

    async def commit(self) -> None:
        if self.before_commit is not None:
            await self.before_commit(self)
        await self._enqueue_outbound()
        started = _time.perf_counter()
        try:
            await self._conn.commit()
        finally:
            self._seconds += _time.perf_counter() - started
        self.committed = True

    # ---- people ----------------------------------------------------------------------------------

    async def contacts(self, user_id: str) -> list[Contact]:
        """The user's own contacts, then the cards of their connected address books."""
        rows = await self._run(
            select(contacts)
            .where(contacts.c.user_id == user_id)
            .order_by(contacts.c.created_at, contacts.c.id)
        )
        cards = await self._run(
            select(caldav_cards)
            .where(caldav_cards.c.user_id == user_id)
            .order_by(caldav_cards.c.name, caldav_cards.c.id)
        )
        return [
            Contact(id=r.id, name=r.name, email=r.email, aliases=tuple(r.aliases), created_at=r.created_at)
            for r in rows
        ] + [
            Contact(
                id=r.id,
                name=r.name,
                email=r.email,
                aliases=tuple(r.aliases),
                created_at=r.created_at,
                source="carddav",
            )
            for r in cards
        ]

    async def add_contact(self, user_id: str, contact: Contact) -> None:
        await self._run(
            contacts.insert().values(
                id=contact.id,
                user_id=user_id,
                name=contact.name,
                email=contact.email,
                aliases=list(contact.aliases),
                created_at=contact.created_at or func.now(),
            )
        )

    async def delete_contact(self, user_id: str, contact_id: str) -> bool:
        result = await self._run(
            contacts.delete().where(contacts.c.user_id == user_id, contacts.c.id == contact_id)
        )
        return bool(getattr(result, "rowcount", 0))

    async def mailbox(self, user_id: str, make: str | None = None, at: datetime | None = None) -> str | None:
        if make is not None:
            await self._run(
                pg_insert(mailboxes)
                .values(user_id=user_id, address=make, created_at=at or func.now())
                .on_conflict_do_nothing(index_elements=[mailboxes.c.user_id])
            )
        address = await self._run(select(mailboxes.c.address).where(mailboxes.c.user_id == user_id))
        found: str | None = address.scalar_one_or_none()
        return found

    async def mailbox_owner(self, address: str) -> str | None:
        found = await self._run(
            select(mailboxes.c.user_id).where(func.lower(mailboxes.c.address) == address.strip().lower())
        )
        owner: str | None = found.scalar_one_or_none()
        return owner

    async def claim_inbound(self, user_id: str, message_id: str, sender: str, at: datetime) -> int | None:
        """The record of one received message, or None when this Message-ID was received before
        (a concurrent delivery of the same message waits here for the first to commit)."""
        result = await self._run(
            pg_insert(inbound_mail)
            .values(user_id=user_id, message_id=message_id, sender=sender, received_at=at, verdict="received")
            .on_conflict_do_nothing(constraint="uq_inbound_mail_message")
            .returning(inbound_mail.c.id)
        )
        claimed: int | None = result.scalar_one_or_none()
        return claimed

    async def settle_inbound(
        self,
        record_id: int,
        verdict: str,
        reason: str | None,
        method: str | None,
        offer: dict[str, Any] | None = None,
    ) -> None:
        await self._run(
            update(inbound_mail)
            .where(inbound_mail.c.id == record_id)
            .values(verdict=verdict, reason=reason, method=method, offer=offer)
        )

    async def next_waiting(self, user_id: str) -> tuple[int, dict[str, Any]] | None:
        row = (
            await self._run(
                select(inbound_mail.c.id, inbound_mail.c.offer)
                .where(inbound_mail.c.user_id == user_id, inbound_mail.c.verdict == "waiting")
                .order_by(inbound_mail.c.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
        ).first()
        return (int(row.id), dict(row.offer)) if row is not None else None

    async def events_by_uid(self, user_id: str, uid: str) -> list[Event]:
        """The user's object with this UID: its master (or single event) first, then overrides."""
        rows = await self._run(
            select(events)
            .where(events.c.user_id == user_id, events.c.uid == uid)
            .order_by(events.c.series_id.is_not(None), events.c.start_at, events.c.id)
            .with_for_update()
        )
        return [event_from_row(row) for row in rows]

    def quiet_people(self) -> None:
        self.mail_people = False

    # ---- settings and sharing ----------------------------------------------------------------------

    async def settings_of(self, user_ids: Sequence[str]) -> dict[str, StoredSettings]:
        rows = await self._run(select(user_settings).where(user_settings.c.user_id.in_(list(user_ids))))
        return {
            r.user_id: StoredSettings(tz=r.tz, email=r.email, language=r.language, work_hours=r.work_hours)
            for r in rows
        }

    async def save_settings(self, user_id: str, saved: StoredSettings, at: datetime) -> None:
        values = {
            "tz": saved.tz,
            "email": saved.email,
            "language": saved.language,
            "work_hours": saved.work_hours,
            "updated_at": at,
        }
        statement = pg_insert(user_settings).values(user_id=user_id, **values)
        await self._run(
            statement.on_conflict_do_update(index_elements=[user_settings.c.user_id], set_=values)
        )

    async def users_with_email(self, addresses: Sequence[str]) -> dict[str, list[str]]:
        wanted = [a.casefold() for a in addresses]
        rows = await self._run(
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
        await self._run(
            statement.on_conflict_do_update(
                index_elements=[sharing.c.owner_id, sharing.c.with_user_id], set_={"level": level}
            )
        )

    async def unshare(self, owner_id: str, with_user_id: str) -> bool:
        result = await self._run(
            sharing.delete().where(sharing.c.owner_id == owner_id, sharing.c.with_user_id == with_user_id)
        )
        return bool(getattr(result, "rowcount", 0))

    async def sharing_of(self, user_id: str) -> tuple[list[ShareEntry], list[ShareEntry]]:
        rows = await self._run(
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
        await self._run(
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
            await self._run(select(feeds.c.user_id, feeds.c.tz).where(feeds.c.secret_hash == secret_hash))
        ).first()
        return (row.user_id, row.tz) if row is not None else None


class SqlStore:
    def __init__(
        self,
        engine: AsyncEngine,
        on_outbox: Callable[[Sequence[str]], None] | None = None,
        before_commit: Callable[[SqlUnitOfWork], Awaitable[None]] | None = None,
    ) -> None:
        self.engine = engine
        # Told the users whose writes wait in an outbox (CalDAV or mail), after their commit.
        self.on_outbox = on_outbox
        # Run inside each transaction just before it commits (the invitations a write causes).
        self.before_commit = before_commit

    @asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[SqlUnitOfWork]:
        started = _time.perf_counter()
        async with self.engine.connect() as conn:
            await conn.begin()
            uow = SqlUnitOfWork(conn)
            uow.before_commit = self.before_commit
            uow.add_seconds(_time.perf_counter() - started)
            try:
                yield uow
            finally:
                if not uow.committed:
                    await conn.rollback()
            waiting = (*uow.outbox_users, *(u for u in uow.mail_users if u not in uow.outbox_users))
            if uow.committed and waiting and self.on_outbox is not None:
                self.on_outbox(waiting)
