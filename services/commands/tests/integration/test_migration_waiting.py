"""Migration 0011w on a database that has invitations waiting on their mail record: each becomes
the waiting stub its offer would have opened, read back through the store as the code reads it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from calagent.commands.adapters.store import SqlStore
from calagent.commands.app import MIGRATIONS_DIR
from calagent.commands.domain.payloads import HeldInvitation
from calagent.contracts.people import InvitationOut
from calagent.runtime.db import alembic_config

pytestmark = pytest.mark.integration

RECEIVED = datetime(2026, 9, 20, 8, 0, tzinfo=UTC)


def offer(uid: str, title: str) -> HeldInvitation:
    return HeldInvitation(
        invitation=InvitationOut(
            method="REQUEST",
            uid=uid,
            organizer="boss@example.com",
            title=title,
            start=datetime(2026, 9, 25, 2, 0, tzinfo=UTC),
            end=datetime(2026, 9, 25, 3, 0, tzinfo=UTC),
        ),
        ical="BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n",
        attendee="me@example.com",
    )


async def test_invitations_waiting_on_their_record_become_waiting_stubs_in_arrival_order(
    database_url: str,
) -> None:
    config = alembic_config(database_url, MIGRATIONS_DIR, "commands")
    await asyncio.to_thread(command.upgrade, config, "0010v")
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as conn:
            for n, (uid, title) in enumerate([("b@x", "季度评审"), ("a@x", "周会")]):
                await conn.execute(
                    text(
                        "INSERT INTO commands.inbound_mail (user_id, received_at, sender, message_id, "
                        "method, verdict, offer) VALUES ('u1', :at, 'boss@example.com', :mid, 'REQUEST', "
                        "'waiting', CAST(:offer AS jsonb))"
                    ),
                    {"at": RECEIVED, "mid": f"<m{n}@x>", "offer": offer(uid, title).model_dump_json()},
                )
        await asyncio.to_thread(command.upgrade, config, "head")

        async with SqlStore(engine).unit_of_work() as uow:
            assert await uow.stubs.active_stub("u1") is None, "a waiting offer is never the active stub"
            waiting = await uow.stubs.waiting_stubs("u1")
        assert [s.payload for s in waiting] == [offer("b@x", "季度评审"), offer("a@x", "周会")]
        first = waiting[0]
        assert (first.kind, first.status, first.hold_reason, first.title) == (
            "invitation",
            "held",
            "invitation_received",
            "季度评审",
        )
        assert first.waiting_since == RECEIVED
        assert first.expires_at == datetime(2026, 9, 25, 2, 0, tzinfo=UTC), "it waits until its event starts"

        await asyncio.to_thread(command.downgrade, config, "0010v")
        async with engine.connect() as conn:
            ended = await conn.execute(text("SELECT DISTINCT status FROM commands.stubs"))
            assert [r[0] for r in ended] == ["expired"]
    finally:
        await engine.dispose()
