"""The SQL store: one `UnitOfWork` per transaction over an asyncpg connection.

The unit of work *has* one repository per concern (`sql_*.py`), all over one `SqlSession` (the
connection, its timing, the change context), and one `Effects` collector that the repositories
record into. This module keeps what makes it a transaction: the idempotency key that claims it,
the user lock, and the commit, where the effects are handled in one place.
"""

from __future__ import annotations

import time as _time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    String,
    bindparam,
    case,
    exists,
    func,
    literal_column,
    null,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from calagent.commands.adapters.sql_changes import CHANGE_LOGGED, SqlChanges
from calagent.commands.adapters.sql_core import CHANGE_SETTING, SqlSession
from calagent.commands.adapters.sql_events import SqlEvents
from calagent.commands.adapters.sql_people import SqlPeople
from calagent.commands.adapters.sql_settings import (
    SqlSettings,
    calendar_order,
    connected_names,
    make_defaults,
)
from calagent.commands.adapters.sql_stubs import SqlStubs, active_stub_of, stub_of
from calagent.commands.adapters.sql_sync import SqlSync, take_notices
from calagent.commands.adapters.sql_tasks import SqlTasks
from calagent.commands.adapters.tables import calendars, idempotency, tasks
from calagent.commands.domain.effects import Effects
from calagent.commands.ports import KeyInFlightError, TurnReading
from calagent.contracts.commands import CommandResult


def _user_lock(user_id: str | BindParameter[str]) -> ColumnElement[Any]:
    return func.pg_advisory_xact_lock(func.hashtextextended(user_id, 0))


def _claim(change: bool) -> Select[Any]:
    """The key's row inserted; for a claimed key (a row returned), the user's lock taken and,
    with `change`, the change context set (each evaluated once, only for the returned row)."""
    user_id = bindparam("claim_user", type_=String)
    claimed = (
        pg_insert(idempotency)
        .values(user_id=user_id, key=bindparam("claim_key", type_=String), result=None)
        .on_conflict_do_nothing(index_elements=["user_id", "key"])
        .returning(idempotency.c.key)
        .cte("claimed")
    )
    context = (
        func.set_config(CHANGE_SETTING, bindparam("change", type_=String), True) if change else null()
    ).label("change")
    # Whether the user has an open task, for the blocks' TRANSP after the write (contract §21),
    # read here so a user without one pays no round trip for it. Read in the statement's snapshot:
    # a task another transaction of the user's commits while this one waits for the lock is not seen.
    open_tasks = exists().where(tasks.c.user_id == user_id, tasks.c.status == "open").label("open_tasks")
    return select(claimed.c.key, _user_lock(user_id), context, open_tasks).select_from(claimed)


# The statements every command runs, built once (their parameters bound per call).
CLAIM = _claim(change=False)
CLAIM_AS_CHANGE = _claim(change=True)
STORED_RESULT = select(idempotency.c.result).where(
    idempotency.c.user_id == bindparam("user_id"), idempotency.c.key == bindparam("key")
)
_RESULT = idempotency.c.result.type
_OWN_KEY = (idempotency.c.user_id == bindparam("owner"), idempotency.c.key == bindparam("owned_key"))
STORE_RESULT = update(idempotency).where(*_OWN_KEY).values(result=bindparam("stored_result", type_=_RESULT))
# The change log's answer and the stored result in one statement: the result naming the change
# when the change altered anything the log keeps, else the plain one; RETURNING says which.
STORE_LOGGED_RESULT = (
    update(idempotency)
    .where(*_OWN_KEY)
    .values(
        result=case(
            (CHANGE_LOGGED, bindparam("logged_result", type_=_RESULT)),
            else_=bindparam("stored_result", type_=_RESULT),
        )
    )
    .returning(idempotency.c.result["change_id"].astext.is_not(None))
)


def _turn_context() -> Select[Any]:
    """The active stub (locked while the statement runs, as a write would lock it), the calendars
    (made under the default names when the user has none) in their order, and the sync notices,
    marked told: one row, the stub's columns (all NULL without one) and five arrays (the names a
    connected account brought too)."""
    # Not `user_id`: the notices' UPDATE would take it as a value to set.
    user_id = bindparam("context_user", type_=String)
    stub = active_stub_of(user_id).cte("stub")
    existing = (
        select(calendars.c.name, calendars.c.position).where(calendars.c.user_id == user_id).cte("existing")
    )
    made = (
        make_defaults(user_id, ~select(existing.c.name).exists())
        .returning(calendars.c.name, calendars.c.position)
        .cte("made")
    )
    listed = union_all(
        select(existing.c.name, existing.c.position), select(made.c.name, made.c.position)
    ).cte("listed")
    told = take_notices(user_id).cte("told")
    names = select(
        func.array_agg(
            aggregate_order_by(listed.c.name, *calendar_order(user_id, listed.c.name, listed.c.position))
        )
    ).scalar_subquery()
    outcomes = select(func.array_agg(aggregate_order_by(told.c.outcome, told.c.id))).scalar_subquery()
    told_events = select(func.array_agg(aggregate_order_by(told.c.event_id, told.c.id))).scalar_subquery()
    told_kinds = select(func.array_agg(aggregate_order_by(told.c.kind, told.c.id))).scalar_subquery()
    connected = connected_names(user_id).subquery("connected")
    connected_list = select(func.array_agg(connected.c.name)).scalar_subquery()
    one = select(literal_column("1").label("one")).subquery("one")
    return select(
        stub,
        names.label("calendar_names"),
        outcomes.label("notice_outcomes"),
        told_events.label("notice_events"),
        told_kinds.label("notice_kinds"),
        connected_list.label("connected_names"),
    ).select_from(one.outerjoin(stub, true()))


# Every turn's context: built once, its parameters bound per call.
TURN_CONTEXT = _turn_context()
# The sync notices a turn tells at most.
NOTICES_PER_TURN = 5


# Run inside a committing transaction just before its commit (the invitations a write causes).
BeforeCommit = Callable[["SqlUnitOfWork"], Awaitable[None]]


class SqlUnitOfWork:
    """One transaction: its repositories, what their writes decided must go with the commit
    (`effects`), and the commit. Opened by `SqlStore.unit_of_work` or `from_server`, which say
    whether its writes go out and what runs before its commit."""

    def __init__(self, conn: AsyncConnection, *, outbound: bool, before_commit: BeforeCommit | None) -> None:
        self._session = SqlSession(conn)
        self.effects = Effects(outbound=outbound)
        self.before_commit = before_commit
        self.committed = False
        self.events = SqlEvents(self._session, self.effects)
        self.changes = SqlChanges(self._session, self.events, self.effects)
        self.stubs = SqlStubs(self._session)
        self.people = SqlPeople(self._session, self.effects)
        self.settings = SqlSettings(self._session)
        self.tasks = SqlTasks(self._session, self.effects)
        self.sync = SqlSync(self._session, self.events, self.tasks)
        # Until a claim says otherwise, the user may have open tasks.
        self._open_tasks = True

    @property
    def db_ms(self) -> float:
        return self._session.db_ms

    @property
    def has_open_tasks(self) -> bool:
        return self._open_tasks

    # ---- idempotency -----------------------------------------------------------------------------

    async def claim_key(self, user_id: str, key: str) -> CommandResult | None:
        # The unique key is the lock: a concurrent duplicate's INSERT waits here for the first
        # transaction, then finds the row (committed) or inserts it itself (the first rolled back).
        # Once the key is claimed, the same statement takes the user's lock and tells the log's
        # trigger the change already named: one round trip, not three.
        session = self._session
        change = session.change_to_send()
        claim_params = {"claim_user": user_id, "claim_key": key}
        if change is None:
            claimed = await session.run(CLAIM, claim_params)
        else:
            claimed = await session.run(CLAIM_AS_CHANGE, {**claim_params, "change": change})
        row = claimed.first()
        if row is not None:
            session.change_sent = row.change
            self._open_tasks = bool(row.open_tasks)
            return None
        stored = await session.run(STORED_RESULT, {"user_id": user_id, "key": key})
        value = stored.scalar_one_or_none()
        if value is None:
            raise KeyInFlightError(f"idempotency key {key!r} has no stored result yet")
        return CommandResult.model_validate(value)

    async def store_result(
        self, user_id: str, key: str, result: CommandResult, *, logged_as: CommandResult | None = None
    ) -> CommandResult:
        params = {"owner": user_id, "owned_key": key, "stored_result": result.model_dump(mode="json")}
        if logged_as is None or logged_as.change_id is None:
            await self._session.run(STORE_RESULT, params)
            return result
        found = await self._session.run(
            STORE_LOGGED_RESULT,
            {**params, "logged_result": logged_as.model_dump(mode="json"), "change_id": logged_as.change_id},
        )
        return logged_as if found.scalar() else result

    async def turn_context(self, user_id: str, defaults: Sequence[str]) -> TurnReading:
        found = await self._session.run(
            TURN_CONTEXT,
            {
                "context_user": user_id,
                "defaults": list(defaults),
                "notices_limit": NOTICES_PER_TURN,
            },
        )
        row = found.one()
        stub = stub_of(row) if row.id is not None else None
        names = list(row.calendar_names or ())
        if not names and defaults:
            # Another first turn of the user's made them meanwhile: not in this statement's
            # snapshot, read as committed.
            names = await self.settings.calendars(user_id, defaults)
        taken = list(
            zip(row.notice_outcomes or (), row.notice_events or (), row.notice_kinds or (), strict=True)
        )
        return TurnReading(
            stub=stub,
            calendars=names,
            connected=sorted(set(row.connected_names or ())),
            notices=await self.sync.notices_of(user_id, taken),
            conflicts=await self.events.events_by_ids(user_id, stub.conflict_event_ids) if stub else [],
            db_ms=self.db_ms,
        )

    async def lock_user(self, user_id: str) -> None:
        await self._session.run(select(_user_lock(user_id)))

    async def commit(self) -> None:
        """The effects the writes recorded, written into the transaction (the mail the invitation
        rule queues, then one outbox row per touched resource), then the commit. Whom to wake
        after it is `effects.to_wake()`."""
        if self.before_commit is not None:
            await self.before_commit(self)
        if self.effects.outbound and self.effects.touched:
            self.effects.deliveries_queued(await self.sync.queue_deliveries(self.effects.touched))
        if self.effects.outbound and self.effects.tasks_touched:
            self.effects.deliveries_queued(
                await self.sync.queue_deliveries(self.effects.tasks_touched, kind="task")
            )
        await self._session.commit()
        self.committed = True

    async def rollback(self) -> None:
        await self._session.conn.rollback()


def from_server(conn: AsyncConnection) -> SqlUnitOfWork:
    """A unit of work over `conn` whose writes are not sent anywhere: what came from the CalDAV
    server (a sync, a conflict the server won) is not sent back to it, and an account's own
    bookkeeping is no change to send. No outbox rows, no mail, nobody to wake; the caller commits
    `conn` with the rest of its own statements."""
    return SqlUnitOfWork(conn, outbound=False, before_commit=None)


class SqlStore:
    def __init__(
        self,
        engine: AsyncEngine,
        on_outbox: Callable[[Sequence[str]], None] | None = None,
        before_commit: BeforeCommit | None = None,
    ) -> None:
        self.engine = engine
        # Told the users whose writes wait in an outbox (CalDAV or mail), after their commit.
        self.on_outbox = on_outbox
        # Run inside each transaction just before it commits (the invitations a write causes).
        self.before_commit = before_commit

    async def turn_context(self, user_id: str, defaults: Sequence[str]) -> TurnReading:
        started = _time.perf_counter()
        async with self.engine.connect() as conn:
            # One statement is its own transaction: no BEGIN and COMMIT around it (the notices'
            # events and a stub's conflicts, when there are any, are read after it).
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            uow = SqlUnitOfWork(auto, outbound=False, before_commit=None)
            uow._session.add_seconds(_time.perf_counter() - started)
            return await uow.turn_context(user_id, defaults)

    @asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[SqlUnitOfWork]:
        started = _time.perf_counter()
        async with self.engine.connect() as conn:
            await conn.begin()
            uow = SqlUnitOfWork(conn, outbound=True, before_commit=self.before_commit)
            uow._session.add_seconds(_time.perf_counter() - started)
            try:
                yield uow
            finally:
                if not uow.committed:
                    await uow.rollback()
            waiting = uow.effects.to_wake()
            if uow.committed and waiting and self.on_outbox is not None:
                self.on_outbox(waiting)
