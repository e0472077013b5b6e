"""Event rows: reading, writing and deleting them, and the UIDs they are born or moved with."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Row,
    Select,
    and_,
    bindparam,
    case,
    exists,
    func,
    literal,
    or_,
    select,
    update,
)

from calagent.commands.adapters.sql_core import SqlSession
from calagent.commands.adapters.tables import events
from calagent.commands.domain.effects import Effects
from calagent.commands.domain.model import Event, local_uid
from calagent.contracts.people import Attendee


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
        transparent=row.transparent,
        tentative=row.tentative,
        foreign_calendar=row.foreign_calendar,
        outside_text=row.outside_text,
        task_id=row.task_id,
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
        "transparent": event.transparent,
        "tentative": event.tentative,
        "foreign_calendar": event.foreign_calendar,
        "outside_text": event.outside_text,
        "task_id": event.task_id,
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


def _overlapping(*, incomplete_only: bool) -> Select[Any]:
    query = select(events).where(
        events.c.user_id == bindparam("user_id"),
        or_(
            and_(
                events.c.start_at < bindparam("end"),
                or_(
                    events.c.end_at > bindparam("start"),
                    events.c.rrule.is_not(None),
                    # An event that ends when it starts is in a range that starts with it.
                    and_(events.c.end_at == events.c.start_at, events.c.start_at >= bindparam("start")),
                ),
            ),
            and_(events.c.series_id.is_not(None), events.c.recurrence_id < bindparam("end")),
        ),
    )
    if incomplete_only:
        query = query.where(events.c.completed.is_(False))
    return query.order_by(events.c.start_at, events.c.id)


# Every conflict check and range read runs one of these: built once, parameters bound per call.
OVERLAPPING = _overlapping(incomplete_only=False)
INCOMPLETE_OVERLAPPING = _overlapping(incomplete_only=True)
# A new row whose UID is a plain value (the common case): its columns come as parameters.
INSERT_EVENT = events.insert().returning(events)


class SqlEvents:
    """The user's event rows; every write is recorded in `effects` for the commit."""

    def __init__(self, session: SqlSession, effects: Effects) -> None:
        self.session = session
        self.effects = effects

    async def events_overlapping(
        self, user_id: str, start: datetime, end: datetime, *, incomplete_only: bool = False
    ) -> list[Event]:
        # Rows that overlap, plus every series master that began before the window ends: its
        # later occurrences may fall inside; the caller expands them. An override whose slot comes
        # before the window's end is returned wherever it was moved to: without it, a slot whose
        # occurrence moved out of the window would show at its old time.
        query = INCOMPLETE_OVERLAPPING if incomplete_only else OVERLAPPING
        rows = await self.session.run(query, {"user_id": user_id, "start": start, "end": end})
        return [event_from_row(row) for row in rows]

    async def events_by_ids(self, user_id: str, ids: Sequence[str]) -> list[Event]:
        if not ids:
            return []
        rows = await self.session.run(
            select(events)
            .where(events.c.user_id == user_id, events.c.id.in_(list(ids)))
            .order_by(events.c.start_at, events.c.id)
        )
        return [event_from_row(row) for row in rows]

    async def all_events(self, user_id: str) -> list[Event]:
        rows = await self.session.run(
            select(events).where(events.c.user_id == user_id).order_by(events.c.start_at, events.c.id)
        )
        return [event_from_row(row) for row in rows]

    async def insert_event(self, event: Event, *, turn_id: str, key: str | None) -> Event:
        await self.session.log()
        self.effects.event_written(event)
        values = event_insert_values(event, turn_id=turn_id, key=key)
        values["uid"] = _series_uid(event) if event.series_id is not None else _born_uid(event)
        if isinstance(values["uid"], str):
            inserted = await self.session.run(INSERT_EVENT, values)
        else:
            inserted = await self.session.run(events.insert().values(**values).returning(events))
        return event_from_row(inserted.one())

    async def get_event(self, user_id: str, event_id: str) -> Event | None:
        row = (
            await self.session.run(
                select(events).where(events.c.id == event_id, events.c.user_id == user_id).with_for_update()
            )
        ).first()
        return event_from_row(row) if row is not None else None

    async def update_event(self, event: Event) -> None:
        # The UID and the object are the sync's: a change never rewrites them, except that an
        # override moved to another series (a split) takes that series' UID.
        await self.session.log()
        self.effects.event_written(event)
        values: dict[str, object] = {"updated_at": func.now(), **_event_values(event)}
        if event.series_id is not None:
            values["uid"] = _series_uid(event)
        await self.session.run(
            update(events).where(events.c.id == event.id, events.c.user_id == event.user_id).values(**values)
        )

    async def delete_events(self, user_id: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        await self.session.log()
        result = await self.session.run(
            events.delete()
            .where(events.c.user_id == user_id, events.c.id.in_(list(ids)))
            .returning(events.c.id, events.c.series_id, events.c.organizer, events.c.ical)
        )
        gone = result.all()
        for row in gone:
            self.effects.row_deleted(user_id, row.id, row.series_id, row.organizer, row.ical)
        return len(gone)

    async def resource_rows(self, user_id: str, resource_id: str) -> list[Event]:
        """The rows of one calendar object: the event (or master) and its overrides."""
        rows = await self.session.run(
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
        await self.session.run(
            update(events).where(events.c.user_id == user_id, events.c.id == event_id).values(ical=ical)
        )

    async def series_overrides(self, user_id: str, series_id: str) -> list[Event]:
        rows = await self.session.run(
            select(events)
            .where(events.c.user_id == user_id, events.c.series_id == series_id)
            .order_by(events.c.recurrence_id)
        )
        return [event_from_row(row) for row in rows]

    async def events_by_uid(self, user_id: str, uid: str) -> list[Event]:
        """The user's object with this UID: its master (or single event) first, then overrides."""
        rows = await self.session.run(
            select(events)
            .where(events.c.user_id == user_id, events.c.uid == uid)
            .order_by(events.c.series_id.is_not(None), events.c.start_at, events.c.id)
            .with_for_update()
        )
        return [event_from_row(row) for row in rows]
