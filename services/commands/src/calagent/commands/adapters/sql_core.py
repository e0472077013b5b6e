"""The core every concern of the SQL unit of work shares: its connection, the time its statements
took, the change context its event writes are logged as, and what it touched for commit.

Every statement goes through `_run`, which also adds its duration to `db_ms` so a result can say how
much of its time the database took.
"""

from __future__ import annotations

import time as _time
from typing import Any

from sqlalchemy import Executable, Result, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from calagent.commands.domain.changelog import ChangeContext
from calagent.commands.domain.model import Event, resource_of

# The transaction-local setting the change log's trigger reads (migration 0007).
CHANGE_SETTING = "calagent.change"


class SqlCore:
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
        # What this transaction's writes to events are logged as (contract §15); None: a write
        # that is not a command's (the sync), which the log's trigger records as `sync`.
        self.change: ChangeContext | None = None
        self._change_sent: str | None = None

    def log_changes_as(self, context: ChangeContext) -> None:
        self.change = context

    def _change_to_send(self) -> str | None:
        """The change context the log's trigger has not been told yet, or None."""
        if self.change is None:
            return None
        payload = self.change.as_json()
        return payload if payload != self._change_sent else None

    async def _log(self) -> None:
        """Tell the log's trigger, once per transaction (and again if it changed), which change
        the next row writes belong to."""
        payload = self._change_to_send()
        if payload is not None:
            await self._run(select(func.set_config(CHANGE_SETTING, payload, True)))
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

    async def _run(self, statement: Executable, parameters: dict[str, Any] | None = None) -> Result[Any]:
        """Run `statement`; a statement built once (a module constant with `bindparam`s) takes its
        values as `parameters`, so SQLAlchemy neither rebuilds nor re-keys it for its cache."""
        started = _time.perf_counter()
        try:
            return await self._conn.execute(statement, parameters)
        finally:
            self._seconds += _time.perf_counter() - started
