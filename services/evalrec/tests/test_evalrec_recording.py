"""Records in through real JetStream, rows out of real PostgreSQL, timelines over request-reply."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime

import pytest
from nats.aio.msg import Msg
from sqlalchemy import event, text

from calagent.contracts import subjects, wire
from calagent.contracts.bus import DeadLetter
from calagent.contracts.evalrec import TimelineRequest, TimelineResult
from calagent.contracts.turns import ModelUsage, Segment, ToolCallOut

from .conftest import RECORDED_AT, Recorder, make_record

pytestmark = pytest.mark.integration

AGENT_SEGMENTS = (
    Segment(name="gateway.receive", start_ms=0.0, ms=4.0),
    Segment(name="bus.wait", start_ms=12.0, ms=8.0),
    Segment(name="context.build", start_ms=20.0, ms=30.0),
    Segment(name="model.request", start_ms=50.0, ms=700.0),
    Segment(name="model.ttft", start_ms=50.0, ms=400.0),
    Segment(name="tool.prepare_or_create_schedule", start_ms=760.0, ms=90.0),
    Segment(name="receipt", start_ms=850.0, ms=2.0),
)


async def test_records_a_turn_with_its_facts_and_segments(recorder: Recorder) -> None:
    record = make_record(
        "rec-1",
        flags=("fast_path",),
        cold_start=True,
        segments=AGENT_SEGMENTS,
        tool_calls=(
            ToolCallOut(name="prepare_or_create_schedule", arguments={"title": "开会"}, result="created"),
        ),
    )
    await recorder.client.js_publish(wire.TURN_RECORDED, record)
    await recorder.drained()

    assert await recorder.scalar("SELECT outcome FROM evalrec.turns WHERE turn_id = 'rec-1'") == "created"
    assert await recorder.scalar("SELECT flags FROM evalrec.turns WHERE turn_id = 'rec-1'") == ["fast_path"]
    assert await recorder.scalar("SELECT cold_start FROM evalrec.turns WHERE turn_id = 'rec-1'") is True
    assert await recorder.scalar("SELECT tool_calls FROM evalrec.turns WHERE turn_id = 'rec-1'") == [
        {"name": "prepare_or_create_schedule", "arguments": {"title": "开会"}, "result": "created"}
    ]
    assert (
        await recorder.scalar("SELECT recorded_at FROM evalrec.turns WHERE turn_id = 'rec-1'") == RECORDED_AT
    )
    segments = await recorder.scalar(
        "SELECT count(*) FROM evalrec.segments WHERE turn_id = 'rec-1' AND source = 'agent'"
    )
    assert segments == len(AGENT_SEGMENTS)


async def test_a_redelivered_record_changes_nothing(recorder: Recorder) -> None:
    record = make_record("rec-dup", segments=AGENT_SEGMENTS)
    # No message id: JetStream keeps both copies, as after a producer retry outside the dedup window.
    await recorder.client.js_publish(wire.TURN_RECORDED, record)
    await recorder.client.js_publish(wire.TURN_RECORDED, record)
    await recorder.drained()
    # A later record with the same turn id but other content is a replay, not a correction.
    await recorder.client.js_publish(wire.TURN_RECORDED, make_record("rec-dup", outcome="held"))
    await recorder.drained()

    assert await recorder.scalar("SELECT count(*) FROM evalrec.turns WHERE turn_id = 'rec-dup'") == 1
    assert await recorder.scalar("SELECT outcome FROM evalrec.turns WHERE turn_id = 'rec-dup'") == "created"
    assert await recorder.scalar("SELECT count(*) FROM evalrec.segments WHERE turn_id = 'rec-dup'") == len(
        AGENT_SEGMENTS
    )


async def timeline(recorder: Recorder, turn_id: str, user_id: str | None = None) -> TimelineResult:
    return await recorder.client.request(
        wire.EVALREC_TIMELINE, TimelineRequest(turn_id=turn_id, user_id=user_id)
    )


async def test_timeline_is_sorted_and_scoped_to_its_user(recorder: Recorder) -> None:
    await recorder.client.js_publish(
        wire.TURN_RECORDED,
        make_record("rec-tl", user_id="alice", total_ms=900.0, segments=tuple(reversed(AGENT_SEGMENTS))),
    )
    await recorder.drained()

    found = (await timeline(recorder, "rec-tl", "alice")).timeline
    assert found is not None
    assert found.turn_id == "rec-tl"
    assert found.total_ms == 900.0  # the record's: from the gateway's receipt of the request
    starts = [s.start_ms for s in found.segments]
    assert starts == sorted(starts)
    assert [s.name for s in found.segments][:3] == ["gateway.receive", "bus.wait", "context.build"]

    assert (await timeline(recorder, "rec-tl", "mallory")).timeline is None
    assert (await timeline(recorder, "rec-tl")).timeline is not None  # operators see every turn
    assert (await timeline(recorder, "no-such-turn")).timeline is None


async def test_a_malformed_record_is_dead_lettered_and_stores_nothing(recorder: Recorder) -> None:
    letters: asyncio.Queue[DeadLetter] = asyncio.Queue()

    async def on_letter(msg: Msg) -> None:
        await letters.put(DeadLetter.model_validate_json(msg.data))

    sub = await recorder.raw.subscribe(subjects.deadletter("evalrec"), cb=on_letter)
    try:
        before = await recorder.scalar("SELECT count(*) FROM evalrec.turns")
        await recorder.raw.jetstream().publish(
            subjects.TURN_RECORDED, b'{"envelope": {"turn_id": "rec-bad"}, "outcome": "exploded"}'
        )
        letter = await asyncio.wait_for(letters.get(), timeout=20)
        await recorder.drained()
    finally:
        await sub.unsubscribe()

    assert letter.reason == "malformed"
    assert letter.subject == subjects.TURN_RECORDED
    assert "rec-bad" in letter.payload
    assert await recorder.scalar("SELECT count(*) FROM evalrec.turns") == before
    assert await recorder.scalar("SELECT count(*) FROM evalrec.segments WHERE turn_id = 'rec-bad'") == 0


async def test_migrations_match_the_table_definitions(recorder: Recorder) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy.engine import Connection

    from calagent.evalrec.adapters.models import SCHEMA, metadata

    def only_evalrec(name: str | None, type_: str, _parent: object) -> bool:
        if type_ == "schema":
            return name == SCHEMA
        return not (type_ == "table" and name == "alembic_version")

    def diff(connection: Connection) -> list[object]:
        context = MigrationContext.configure(
            connection, opts={"include_schemas": True, "include_name": only_evalrec}
        )
        return list(compare_metadata(context, metadata))

    async with recorder.engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_a_record_is_stored_in_one_statement_with_its_model_calls(recorder: Recorder) -> None:
    engine = recorder.app._engine
    assert engine is not None
    statements: list[str] = []

    def on_statement(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    usage = (
        ModelUsage(model="m1", prompt_tokens=100, completion_tokens=20, cached_tokens=64),
        ModelUsage(model="m2", reported=False),
    )
    # 23:30 UTC is the next morning in Shanghai: a model call is counted on the user's day.
    late = datetime(2026, 9, 24, 23, 30, tzinfo=UTC)
    record = make_record(
        "rec-usage", user_id="u-usage", occurred_at=late, segments=AGENT_SEGMENTS, model_usage=usage
    )
    event.listen(engine.sync_engine, "before_cursor_execute", on_statement)
    try:
        await recorder.client.js_publish(wire.TURN_RECORDED, record)
        await recorder.client.js_publish(wire.TURN_RECORDED, record)
        await recorder.drained()
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", on_statement)

    assert len(statements) == 2  # one per delivery: the turn, its segments and its model calls
    async with recorder.engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT seq, user_id, day, model, prompt_tokens, completion_tokens, cached_tokens,"
                    " reported FROM evalrec.model_usage WHERE turn_id = 'rec-usage' ORDER BY seq"
                )
            )
        ).all()
    assert [tuple(r) for r in rows] == [
        (0, "u-usage", date(2026, 9, 25), "m1", 100, 20, 64, True),
        (1, "u-usage", date(2026, 9, 25), "m2", 0, 0, 0, False),
    ]
    assert await recorder.scalar("SELECT count(*) FROM evalrec.turns WHERE turn_id = 'rec-usage'") == 1
    assert await recorder.scalar("SELECT count(*) FROM evalrec.segments WHERE turn_id = 'rec-usage'") == len(
        AGENT_SEGMENTS
    )
