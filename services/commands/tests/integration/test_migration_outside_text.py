"""Migration 0022w on a database with events a sync stored and events written here: what the sync
brought was never compared with what we wrote, so it is marked someone else's words (contract §19);
what was written here is not. Read back through the store as the code reads it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from calagent.commands.adapters.store import SqlStore
from calagent.commands.app import MIGRATIONS_DIR
from calagent.runtime.db import alembic_config

pytestmark = pytest.mark.integration

START = datetime(2026, 9, 25, 2, 0, tzinfo=UTC)


async def test_events_a_sync_stored_before_are_marked_outside_text_and_ours_are_not(
    database_url: str,
) -> None:
    config = alembic_config(database_url, MIGRATIONS_DIR, "commands")
    await asyncio.to_thread(command.upgrade, config, "0021t")
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as conn:
            for event_id, turn in (("synced", "caldav-sync"), ("mine", "t-1")):
                await conn.execute(
                    text(
                        "INSERT INTO commands.events (id, user_id, title, start_at, end_at, calendar, "
                        "created_by_turn) VALUES (:id, 'u1', :id, :start, CAST(:start AS timestamptz) + interval '1 hour', "
                        "'工作', :turn)"
                    ),
                    {"id": event_id, "start": START, "turn": turn},
                )
        await asyncio.to_thread(command.upgrade, config, "head")

        async with SqlStore(engine).unit_of_work() as uow:
            found = await uow.events.events_by_ids("u1", ["synced", "mine"])
        assert {e.id: e.outside_text for e in found} == {"synced": True, "mine": False}

        await asyncio.to_thread(command.downgrade, config, "0021t")
        await asyncio.to_thread(command.upgrade, config, "head")
    finally:
        await engine.dispose()
