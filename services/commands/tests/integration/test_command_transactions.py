"""What a create costs the command service's database, counted on its own engine: one
transaction, and within it one statement per step that needs the database; and what a turn's
context costs it: one statement, no transaction around it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.contracts.queries import TurnContext
from calagent.contracts.tasks import SaveTask, TaskFields

from .conftest import System, envelope
from .test_commands_bus import create

pytestmark = pytest.mark.integration


@contextmanager
def counted(engine: AsyncEngine) -> Iterator[tuple[list[str], list[str]]]:
    begun: list[str] = []
    statements: list[str] = []

    def on_begin(conn: object) -> None:
        begun.append("begin")

    def on_statement(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(" ".join(statement.split()))

    event.listen(engine.sync_engine, "begin", on_begin)
    event.listen(engine.sync_engine, "before_cursor_execute", on_statement)
    try:
        yield begun, statements
    finally:
        event.remove(engine.sync_engine, "begin", on_begin)
        event.remove(engine.sync_engine, "before_cursor_execute", on_statement)


async def test_a_create_is_one_transaction_of_seven_statements(system: System, user: str) -> None:
    engine = system.app.engine
    assert engine is not None
    # The user's first create also makes their calendars; the second is the steady state.
    await system.execute(create(user, title="开会", date="D+1", time="10:00"))
    command = create(user, title="开会", date="D+1", time="15:00")
    with counted(engine) as (begun, statements):
        result = await system.execute(command)
    assert (result.status, result.persisted) == ("created", True)
    assert len(begun) == 1
    # Claim (with the user's lock and the change context), active stub, calendars, conflicts,
    # the insert returning the stored row, the stored result with the change log's answer, the outbox.
    assert len(statements) == 7, statements
    # The receipt is the row as stored, and the change log has it under the receipt's change.
    assert result.event is not None and result.change_id is not None
    logged = await system.scalar(
        "SELECT count(*) FROM commands.change_rows WHERE change_id = :change AND event_id = :event",
        change=result.change_id,
        event=result.event.id,
    )
    assert logged == 1
    # The stored result is the one naming the change: a retry of the key is told the same.
    replayed = await system.execute(command)
    assert replayed.replayed and replayed.change_id == result.change_id
    created_at = await system.scalar(
        "SELECT created_at FROM commands.events WHERE id = :id", id=result.event.id
    )
    assert created_at is not None


async def test_a_create_runs_statements_built_once(system: System, user: str) -> None:
    """SQLAlchemy keys each statement it is given for its compiled cache; a statement built anew
    per call is traversed again on every execution, one built once is keyed once."""
    engine = system.app.engine
    assert engine is not None
    await system.execute(create(user, title="开会", date="D+1", time="10:00"))
    runs: list[list[object]] = []

    def on_execute(conn: object, clause: object, *args: object) -> None:
        runs[-1].append(clause)

    event.listen(engine.sync_engine, "before_execute", on_execute)
    try:
        for hour in (15, 17):
            runs.append([])
            result = await system.execute(create(user, title="开会", date="D+1", time=f"{hour}:00"))
            assert result.status == "created"
    finally:
        event.remove(engine.sync_engine, "before_execute", on_execute)
    first, second = runs
    assert len(first) == len(second) == 7
    assert all(a is b for a, b in zip(first, second, strict=True))


@contextmanager
def isolation_levels(engine: AsyncEngine) -> Iterator[list[str | None]]:
    """The isolation level each statement ran at: AUTOCOMMIT is no BEGIN and COMMIT around it."""
    levels: list[str | None] = []

    def on_statement(conn: Any, *args: object) -> None:
        levels.append(conn.get_execution_options().get("isolation_level"))

    event.listen(engine.sync_engine, "before_cursor_execute", on_statement)
    try:
        yield levels
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", on_statement)


async def test_a_turn_context_is_one_statement_with_no_transaction_around_it(
    system: System, user: str
) -> None:
    engine = system.app.engine
    assert engine is not None
    # A first turn makes the user's calendars; a later one reads them; a turn with an active stub
    # reads it too. Each is one statement, committed as it ran.
    with isolation_levels(engine) as levels:
        first = await system.query(TurnContext(envelope=envelope(user)))
    assert levels == ["AUTOCOMMIT"]
    assert first.calendars and first.stub is None
    stored = await system.rows(
        "SELECT name FROM commands.calendars WHERE user_id = :u ORDER BY position", u=user
    )
    assert [r.name for r in stored] == list(first.calendars)
    asked = await system.execute(create(user, title="修车", date="D+1"))
    assert asked.status == "needs_time" and asked.stub is not None
    with isolation_levels(engine) as levels:
        later = await system.query(TurnContext(envelope=envelope(user)))
    assert levels == ["AUTOCOMMIT"]
    assert later.calendars == first.calendars
    assert later.stub is not None and later.stub.id == asked.stub.id


async def test_a_turn_context_tells_each_sync_notice_once(system: System, user: str) -> None:
    created = await system.execute(create(user, title="团建", date="D+1", time="14:00"))
    assert created.event is not None
    for outcome in ("rejected", "conflict", "delivered"):
        async with system.db.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO commands.caldav_outbox (user_id, event_id, outcome, delivered_at)"
                    " VALUES (:u, :e, :o, clock_timestamp())"
                ),
                {"u": user, "e": created.event.id, "o": outcome},
            )
    told = await system.query(TurnContext(envelope=envelope(user)))
    # Two refused deliveries of one event: one line, under the first outcome taken.
    assert [(n.outcome, n.event and n.event.id) for n in told.sync_notices] == [
        ("rejected", created.event.id)
    ]
    unreported = await system.scalar(
        "SELECT count(*) FROM commands.caldav_outbox WHERE user_id = :u AND outcome IN"
        " ('rejected', 'conflict') AND reported_at IS NULL",
        u=user,
    )
    assert unreported == 0
    again = await system.query(TurnContext(envelope=envelope(user)))
    assert again.sync_notices == ()


async def test_a_turn_context_tells_a_tasks_refused_delivery_beside_an_events(
    system: System, user: str
) -> None:
    """A task's outbox row (kind `task`) names the task, not an event: told with the task as it
    is kept, in the order taken; a task removed since is not told."""
    created = await system.execute(create(user, title="团建", date="D+1", time="14:00"))
    assert created.event is not None
    saved = await system.query(
        SaveTask(envelope=envelope(user), op="create", fields=TaskFields(title="交电费", duration_minutes=15))
    )
    [task] = saved.tasks
    gone = await system.query(
        SaveTask(envelope=envelope(user), op="create", fields=TaskFields(title="旧事", duration_minutes=15))
    )
    [gone_task] = gone.tasks
    await system.query(SaveTask(envelope=envelope(user), op="delete", task_id=gone_task.id))
    for resource, kind, outcome in (
        (task.id, "task", "rejected"),
        (created.event.id, "event", "conflict"),
        (gone_task.id, "task", "rejected"),
        (task.id, "task", "conflict"),
    ):
        async with system.db.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO commands.caldav_outbox (user_id, event_id, kind, outcome, delivered_at)"
                    " VALUES (:u, :e, :k, :o, clock_timestamp())"
                ),
                {"u": user, "e": resource, "k": kind, "o": outcome},
            )
    told = await system.query(TurnContext(envelope=envelope(user)))
    assert [(n.outcome, n.task and n.task.id, n.event and n.event.id) for n in told.sync_notices] == [
        ("rejected", task.id, None),
        ("conflict", None, created.event.id),
    ]
    assert (await system.query(TurnContext(envelope=envelope(user)))).sync_notices == ()
