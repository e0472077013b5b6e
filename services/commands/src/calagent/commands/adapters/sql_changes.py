"""The change log (contract §15): reading logged changes and writing rows back for an undo."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, DateTime, Row, String, bindparam, exists, func, literal, select, text, update
from sqlalchemy.dialects.postgresql import JSONB

from calagent.commands.adapters.sql_core import SqlSession
from calagent.commands.adapters.sql_events import SqlEvents
from calagent.commands.adapters.tables import change_rows, changes, events
from calagent.commands.domain.changelog import (
    BOOKKEEPING,
    ChangeContext,
    LoggedChange,
    RowChange,
    Snapshot,
    event_of,
)
from calagent.commands.domain.effects import Effects

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


# Whether the change `change_id` (bound per call) altered anything the log keeps: the commit
# prunes rows that differ only in bookkeeping, and a change left without rows. Asked at the end
# of every write, in the statement that stores its result (`store.STORE_LOGGED_RESULT`).
_BOOKKEEPING = literal(sorted(BOOKKEEPING), ARRAY(String()))
CHANGE_LOGGED = exists().where(
    change_rows.c.change_id == bindparam("change_id"),
    change_rows.c.before.op("-")(_BOOKKEEPING).is_distinct_from(change_rows.c.after.op("-")(_BOOKKEEPING)),
)


class SqlChanges:
    """The change log; an undo writes event rows back through it, recorded in `effects` like any
    other write of events."""

    def __init__(self, session: SqlSession, events: SqlEvents, effects: Effects) -> None:
        self.session = session
        self.events = events
        self.effects = effects

    def log_changes_as(self, context: ChangeContext) -> None:
        self.session.log_changes_as(context)

    async def _logged(self, found: Sequence[Row[Any]]) -> list[LoggedChange]:
        if not found:
            return []
        rows = await self.session.run(
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
        found = (await self.session.run(query.order_by(changes.c.seq.desc()).limit(limit))).all()
        return await self._logged(found)

    async def get_change(self, user_id: str, change_id: str) -> LoggedChange | None:
        """One of the user's changes, locked; another user's id is answered like an unknown one."""
        found = (
            await self.session.run(
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
        found = (
            await self.session.run(query.order_by(changes.c.seq.desc()).limit(1).with_for_update())
        ).all()
        logged = await self._logged(found)
        return logged[0] if logged else None

    async def mark_undone(self, user_id: str, change_id: str, by: str) -> None:
        await self.session.run(
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
        found = await self.session.run(statement)
        return {r.row["id"]: r.row for r in found}

    async def restore_rows(
        self, user_id: str, plan: Sequence[tuple[str, Snapshot | None]], current: Mapping[str, Snapshot]
    ) -> None:
        """Write every row of `plan` back to the snapshot given (None: remove it), keeping the
        object each row has now (the outbox patches the restored values into it); a row that comes
        back gets its object, UID and id as they were."""
        await self.session.log()
        gone = [event_id for event_id, snap in plan if snap is None and event_id in current]
        await self.events.delete_events(user_id, gone)
        for event_id, snap in plan:
            if snap is None:
                continue
            event = event_of(snap)
            self.effects.event_written(event)
            values = _snapshot_values(snap)
            if event_id in current:
                for kept in _KEPT_ON_RESTORE:
                    values.pop(kept, None)
                await self.session.run(
                    update(events)
                    .where(events.c.user_id == user_id, events.c.id == event_id)
                    .values(**values)
                )
            else:
                await self.session.run(events.insert().values(**values))
