"""The one connection every repository of a SQL unit of work shares: the statements it runs, the
time they took, and the change context its event writes are logged as.

Every statement goes through `run`, which also adds its duration to `db_ms` so a result can say how
much of its time the database took.
"""

from __future__ import annotations

import time as _time
from typing import Any

from sqlalchemy import Executable, Result, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from calagent.commands.domain.changelog import ChangeContext

# The transaction-local setting the change log's trigger reads (migration 0007).
CHANGE_SETTING = "calagent.change"


class SqlSession:
    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn
        self._seconds = 0.0
        # What this transaction's writes to events are logged as (contract §15); None: a write
        # that is not a command's (the sync), which the log's trigger records as `sync`.
        self.change: ChangeContext | None = None
        self.change_sent: str | None = None

    def log_changes_as(self, context: ChangeContext) -> None:
        self.change = context

    def change_to_send(self) -> str | None:
        """The change context the log's trigger has not been told yet, or None."""
        if self.change is None:
            return None
        payload = self.change.as_json()
        return payload if payload != self.change_sent else None

    async def log(self) -> None:
        """Tell the log's trigger, once per transaction (and again if it changed), which change
        the next row writes belong to."""
        payload = self.change_to_send()
        if payload is not None:
            await self.run(select(func.set_config(CHANGE_SETTING, payload, True)))
            self.change_sent = payload

    @property
    def db_ms(self) -> float:
        return round(self._seconds * 1000.0, 3)

    def add_seconds(self, seconds: float) -> None:
        self._seconds += seconds

    async def run(self, statement: Executable, parameters: dict[str, Any] | None = None) -> Result[Any]:
        """Run `statement`; a statement built once (a module constant with `bindparam`s) takes its
        values as `parameters`, so SQLAlchemy neither rebuilds nor re-keys it for its cache."""
        started = _time.perf_counter()
        try:
            return await self.conn.execute(statement, parameters)
        finally:
            self._seconds += _time.perf_counter() - started

    async def commit(self) -> None:
        started = _time.perf_counter()
        try:
            await self.conn.commit()
        finally:
            self._seconds += _time.perf_counter() - started
