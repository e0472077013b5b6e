"""What a create costs the command service's database, counted on its own engine: one
transaction, and within it one statement per step that needs the database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from .conftest import System
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
