"""A held change's payload as PostgreSQL keeps it: the keys it was always stored with, and a row
held before the newest keys existed read, confirmed and written back as it always was."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

from calagent.commands.adapters.store import from_server
from calagent.commands.domain.payloads import HeldChange
from calagent.contracts.commands import PrepareChange
from calagent.contracts.tools import UpdateSchedule

from .conftest import System, envelope
from .test_changes import created
from .test_commands_bus import key, merge

pytestmark = pytest.mark.integration

BOB = {"name": "Bob", "email": "bob@example.com", "status": "ACCEPTED"}


async def stored_change(system: System, stub_id: str) -> dict[str, Any]:
    value = await system.scalar("SELECT change FROM commands.stubs WHERE id = :i", i=stub_id)
    assert isinstance(value, dict)
    return value


async def test_an_old_change_row_is_read_typed_confirmed_and_written_back_with_its_keys(
    system: System, user: str
) -> None:
    made = await created(system, user, title="牙医", date="D+2", time="15:00")
    assert made.event is not None
    event_id = made.event.id
    async with system.db.begin() as conn:
        # People and a place the event has of its own, which an old change row does not mention.
        await conn.execute(
            text(
                "UPDATE commands.events SET attendees = CAST(:a AS jsonb), "
                "organizer = 'carol@example.com', location = '诊所' WHERE id = :i"
            ),
            {"a": json.dumps([BOB]), "i": event_id},
        )
    prepared = await system.execute(
        PrepareChange(
            envelope=envelope(user),
            idempotency_key=key(),
            action="update",
            event_id=event_id,
            update=UpdateSchedule(event_id=event_id, time="17:00"),
        )
    )
    assert prepared.status == "held" and prepared.stub is not None
    stub_id = prepared.stub.id
    fresh = await stored_change(system, stub_id)
    assert set(fresh) == {
        "view",
        "action",
        "scope",
        "row_id",
        "master_id",
        "occurrence_start",
        "after",
        "version",
        "request",
    }
    assert fresh["after"]["start"].endswith("+00:00") and fresh["after"]["asked"] == ["time"]

    # The row as a change held before offers were bound and before people and what was asked
    # were recorded.
    old = {k: v for k, v in fresh.items() if k not in ("version", "request")}
    old["after"] = {
        k: v for k, v in fresh["after"].items() if k not in ("url", "attendees", "organizer", "asked")
    }
    async with system.db.begin() as conn:
        await conn.execute(
            text("UPDATE commands.stubs SET change = CAST(:c AS jsonb) WHERE id = :i"),
            {"c": json.dumps(old), "i": stub_id},
        )
    async with system.db.begin() as conn:
        stub = await from_server(conn).stubs.get_stub(user, stub_id)
    assert stub is not None and isinstance(stub.payload, HeldChange)
    assert not stub.payload.bound and stub.payload.after is not None
    assert not stub.payload.after.given("attendees") and stub.payload.after.asked is None

    done = await system.execute(merge(user, stub_id, confirm=True))
    assert done.status == "updated" and done.event is not None
    row = (
        await system.rows(
            "SELECT attendees, organizer, location, start_at FROM commands.events WHERE id = :i",
            i=event_id,
        )
    )[0]
    # What the old row does not carry is left as the event has it.
    assert row.attendees == [BOB] and row.organizer == "carol@example.com" and row.location == "诊所"
    assert row.start_at == prepared.stub.proposed_start
    assert await stored_change(system, stub_id) == old
