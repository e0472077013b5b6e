"""The change log and undo through the command service, against real PostgreSQL (contract §15)."""

from __future__ import annotations

import os
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from calagent.contracts.commands import ChangeAction, CommandResult, PrepareChange, RevertChange
from calagent.contracts.queries import ListChanges, QueryRange
from calagent.contracts.tools import Scope, UpdateSchedule

from .conftest import NOW, System, envelope
from .test_commands_bus import create, key, merge

pytestmark = pytest.mark.integration

# `make test` runs a short profile; CALAGENT_UNDO_EXAMPLES=200 runs a long one.
UNDO_EXAMPLES = int(os.environ.get("CALAGENT_UNDO_EXAMPLES", "12"))


async def table_state(system: System, user: str) -> list[Any]:
    """Every column of every row of the user's events but the time it was last written."""
    rows = await system.rows(
        "SELECT to_jsonb(e) - 'updated_at' FROM commands.events e WHERE user_id = :u ORDER BY id", u=user
    )
    return [r[0] for r in rows]


async def created(system: System, user: str, **args: Any) -> CommandResult:
    result = await system.execute(create(user, **args))
    if result.status in ("held", "conflict") and result.stub is not None:
        result = await system.execute(merge(user, result.stub.id, confirm=True))
    assert result.status == "created", result
    return result


async def changed(
    system: System,
    user: str,
    action: ChangeAction,
    event_id: str,
    scope: Scope,
    update: UpdateSchedule | None,
) -> CommandResult:
    prepared = await system.execute(
        PrepareChange(
            envelope=envelope(user),
            idempotency_key=key(),
            action=action,
            event_id=event_id,
            update=update,
            scope=scope,
        )
    )
    if prepared.stub is None:
        return prepared
    return await system.execute(merge(user, prepared.stub.id, confirm=True))


async def visible_ids(system: System, user: str) -> list[str]:
    found = await system.query(
        QueryRange(envelope=envelope(user), start_at=NOW, end_at=NOW + timedelta(days=40))
    )
    return [e.id for e in found.events]


async def undo(system: System, user: str, change_id: str | None = None) -> CommandResult:
    return await system.execute(
        RevertChange(envelope=envelope(user), idempotency_key=key(), change_id=change_id)
    )


async def seed(system: System, user: str) -> None:
    await created(system, user, title="周会", date="D+1", time="09:00", recurrence="FREQ=WEEKLY;COUNT=6")
    await created(
        system,
        user,
        title="牙医",
        date="D+2",
        time="15:00",
        location="中山路 1 号",
        notes="带病历",
        reminder_minutes=30,
    )


operations = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.integers(1, 20), st.integers(8, 19), st.booleans()),
        st.tuples(
            st.just("update"),
            st.integers(0, 50),
            st.integers(8, 19),
            st.sampled_from(["this", "following", "all"]),
        ),
        st.tuples(
            st.just("delete"),
            st.integers(0, 50),
            st.integers(0, 0),
            st.sampled_from(["this", "following", "all"]),
        ),
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=UNDO_EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
async def test_random_changes_undone_in_reverse_order_return_the_events_table_to_its_first_state(
    system: System, ops: list[tuple[Any, ...]]
) -> None:
    user = f"u-{uuid.uuid4().hex[:10]}"
    await seed(system, user)
    first = await table_state(system, user)
    made: list[str] = []
    for op in ops:
        ids = await visible_ids(system, user)
        if op[0] == "create":
            _, day, hour, placed = op
            result = await created(
                system,
                user,
                title=f"事 {day}-{hour}",
                date=f"D+{day}",
                time=f"{hour:02d}:00",
                location="某处" if placed else None,
            )
        elif not ids:
            continue
        elif op[0] == "update":
            _, index, hour, scope = op
            target = ids[index % len(ids)]
            update = UpdateSchedule(event_id=target, time=f"{hour:02d}:30", title=f"改 {hour}")
            result = await changed(system, user, "update", target, scope, update)
        else:
            _, index, _, scope = op
            result = await changed(system, user, "delete", ids[index % len(ids)], scope, None)
        if result.persisted and result.change_id is not None:
            made.append(result.change_id)
    logged = await system.query(ListChanges(envelope=envelope(user), limit=200))
    # Every write that changed something is in the log, and nothing else of this user's is.
    assert {c.id for c in logged.changes} - {c.id for c in logged.changes if c.source == "chat"} == set()
    assert set(made) <= {c.id for c in logged.changes}
    for change_id in reversed(made):
        reverted = await undo(system, user, change_id)
        assert reverted.persisted, reverted
    assert await table_state(system, user) == first


async def test_a_deleted_event_comes_back_with_its_id_uid_and_every_property(
    system: System, user: str
) -> None:
    result = await created(
        system,
        user,
        title="牙医",
        date="D+2",
        time="15:00",
        location="中山路 1 号",
        notes="带病历",
        reminder_minutes=30,
    )
    assert result.event is not None
    first = await table_state(system, user)
    gone = await changed(system, user, "delete", result.event.id, "this", None)
    assert gone.status == "deleted" and gone.change_id is not None
    assert await table_state(system, user) == []
    back = await undo(system, user, gone.change_id)
    assert back.status == "created" and back.undid is not None and back.undid.id == gone.change_id
    assert await table_state(system, user) == first
    logged = (await system.query(ListChanges(envelope=envelope(user)))).changes
    assert [c.kind for c in logged] == ["created", "deleted", "created"]
    assert logged[0].undoes == gone.change_id and logged[1].undone_by == logged[0].id
    assert logged[1].before is not None and logged[1].before.location == "中山路 1 号"
    assert logged[1].uid == f"{result.event.id}@calagent"


async def test_an_undo_of_a_change_whose_event_changed_since_writes_nothing(
    system: System, user: str
) -> None:
    result = await created(system, user, title="牙医", date="D+2", time="15:00")
    assert result.event is not None and result.change_id is not None
    moved = await changed(
        system,
        user,
        "update",
        result.event.id,
        "this",
        UpdateSchedule(event_id=result.event.id, time="17:00"),
    )
    assert moved.status == "updated"
    before = await table_state(system, user)
    refused = await undo(system, user, result.change_id)
    assert refused.status == "error" and refused.error is not None and refused.error.code == "changed_since"
    assert await table_state(system, user) == before


async def test_another_users_change_is_answered_like_an_unknown_one(system: System, user: str) -> None:
    result = await created(system, user, title="牙医", date="D+2", time="15:00")
    assert result.change_id is not None
    other = await undo(system, f"u-{uuid.uuid4().hex[:10]}", result.change_id)
    unknown = await undo(system, user, uuid.uuid4().hex)
    assert other.error is not None and unknown.error is not None
    assert other.error.code == unknown.error.code == "not_found"
    assert len(await table_state(system, user)) == 1


async def test_a_stale_confirmation_writes_nothing_and_offers_the_change_again(
    system: System, user: str
) -> None:
    result = await created(system, user, title="牙医", date="D+2", time="15:00")
    assert result.event is not None
    event_id = result.event.id
    prepared = await system.execute(
        PrepareChange(
            envelope=envelope(user),
            idempotency_key=key(),
            action="update",
            event_id=event_id,
            update=UpdateSchedule(event_id=event_id, time="17:00"),
        )
    )
    assert prepared.stub is not None
    async with system.db.begin() as conn:
        from sqlalchemy import text

        await conn.execute(
            text("UPDATE commands.events SET title = '牙医（改）' WHERE id = :i"), {"i": event_id}
        )
    state = await table_state(system, user)
    again = await system.execute(merge(user, prepared.stub.id, confirm=True))
    assert again.reoffered and again.status == "held" and again.stub is not None
    assert again.stub.id != prepared.stub.id
    assert again.stub.change is not None and again.stub.change.before.title == "牙医（改）"
    assert await table_state(system, user) == state
    done = await system.execute(merge(user, again.stub.id, confirm=True))
    assert done.status == "updated" and done.event is not None
    assert done.event.title == "牙医（改）" and done.event.start.hour == 17


async def test_a_confirmation_whose_write_fails_leaves_the_offer_held(system: System, user: str) -> None:
    """The offer is consumed only by the transaction that writes its change: a write the database
    refuses leaves the stub held, and the next "确认" runs it."""
    result = await created(system, user, title="牙医", date="D+2", time="15:00")
    assert result.event is not None
    event_id = result.event.id
    prepared = await system.execute(
        PrepareChange(
            envelope=envelope(user),
            idempotency_key=key(),
            action="update",
            event_id=event_id,
            update=UpdateSchedule(event_id=event_id, time="17:00"),
        )
    )
    assert prepared.stub is not None and prepared.status == "held"
    # The database refuses any write to this event (an input error: answered, not retried).
    trigger = f"refuse_{uuid.uuid4().hex[:8]}"
    async with system.db.begin() as conn:
        await conn.execute(
            text(
                f"CREATE FUNCTION commands.{trigger}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'refused' USING ERRCODE = '22023'; END $$"
            )
        )
        await conn.execute(
            text(
                f"CREATE TRIGGER {trigger} BEFORE UPDATE ON commands.events FOR EACH ROW "
                f"WHEN (OLD.id = '{event_id}') EXECUTE FUNCTION commands.{trigger}()"
            )
        )
    state = await table_state(system, user)
    try:
        failed = await system.execute(merge(user, prepared.stub.id, confirm=True))
        assert failed.status == "error"
        assert await table_state(system, user) == state
        status = await system.scalar("SELECT status FROM commands.stubs WHERE id = :i", i=prepared.stub.id)
        assert status == "held"
    finally:
        async with system.db.begin() as conn:
            await conn.execute(text(f"DROP TRIGGER {trigger} ON commands.events"))
            await conn.execute(text(f"DROP FUNCTION commands.{trigger}()"))
    done = await system.execute(merge(user, prepared.stub.id, confirm=True))
    assert done.status == "updated" and done.event is not None and done.event.start.hour == 17
