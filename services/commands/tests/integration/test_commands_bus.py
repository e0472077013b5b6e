"""The command service over the bus, against real PostgreSQL: facts are checked in the tables."""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import nats
import pytest
from alembic.script import ScriptDirectory
from icalendar import Calendar
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from calagent.commands.adapters.store import SqlStore
from calagent.commands.app import MIGRATIONS_DIR
from calagent.commands.handlers import ConstraintDefect, broken_constraint, transient_failures
from calagent.contracts import subjects
from calagent.contracts.bus import DeadLetter
from calagent.contracts.commands import CancelStub, CommandResult, MergeStub, PrepareOrCreate
from calagent.contracts.queries import (
    ExportIcs,
    GetActiveStub,
    ListCalendars,
    QueryRange,
    SuggestFree,
    TurnContext,
)
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import PrepareOrCreateSchedule
from calagent.runtime.bus import BusRequestError, TransientError
from calagent.runtime.db import make_engine, upgrade_async

from .conftest import NOW, System, envelope

pytestmark = pytest.mark.integration

_keys = itertools.count()


def key() -> str:
    return f"k-{uuid.uuid4().hex[:8]}-{next(_keys)}"


def create(
    user: str,
    *,
    active: str | None = None,
    patch: SlotPatch | None = None,
    hold: Any = None,
    idem: str | None = None,
    at: datetime = NOW,
    words: str | None = None,
    **args: Any,
) -> PrepareOrCreate:
    args.setdefault("title", "会议")
    return PrepareOrCreate(
        envelope=envelope(user, at),
        idempotency_key=idem or key(),
        args=PrepareOrCreateSchedule(**args),
        active_command_id=active,
        patch=patch,
        hold=hold,
        words=words,
    )


def merge(user: str, stub_id: str, *, confirm: bool = False, **patch: Any) -> MergeStub:
    return MergeStub(
        envelope=envelope(user),
        idempotency_key=key(),
        command_id=stub_id,
        patch=SlotPatch(**patch),
        confirm=confirm,
    )


async def event_rows(system: System, user: str) -> list[Any]:
    return await system.rows(
        "SELECT id, title, start_at, end_at, all_day, calendar, created_by_key FROM commands.events"
        " WHERE user_id = :u ORDER BY start_at",
        u=user,
    )


async def stub_status(system: System, stub_id: str) -> str | None:
    value: str | None = await system.scalar("SELECT status FROM commands.stubs WHERE id = :i", i=stub_id)
    return value


# ---- schema ----------------------------------------------------------------------------------------


async def test_migrations_live_in_their_own_schema_and_rerun_cleanly(system: System) -> None:
    await upgrade_async(system.database_url, MIGRATIONS_DIR, "commands")
    tables = {
        row[0]
        for row in await system.rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'commands'"
        )
    }
    assert {"alembic_version", "calendars", "events", "stubs", "idempotency", "inbound_mail"} <= tables
    # The newest migration, read from the scripts (a literal went stale with every migration added).
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert head is not None
    assert await system.scalar("SELECT version_num FROM commands.alembic_version") == head


# ---- create and every stub status ------------------------------------------------------------------


async def test_create_is_persisted_before_the_reply(system: System, user: str) -> None:
    result = await system.execute(create(user, title="和张三开会", date="W3+1", time="15:00"))
    assert (result.status, result.persisted, result.replayed) == ("created", True, False)
    assert result.db_ms > 0
    assert result.event is not None
    assert result.event.start.isoformat() == "2026-09-30T15:00:00+08:00"
    assert (result.event.weekday, result.event.tz) == (3, "Asia/Shanghai")
    rows = await event_rows(system, user)
    assert len(rows) == 1
    assert rows[0].id == result.event.id
    assert rows[0].start_at == datetime.fromisoformat("2026-09-30T07:00:00+00:00")
    assert rows[0].end_at - rows[0].start_at == timedelta(hours=1)
    assert rows[0].calendar == "工作"


async def test_weekend_needs_a_date_and_a_short_reply_creates_it(system: System, user: str) -> None:
    first = await system.execute(create(user, title="修汽车轮毂", date="WE"))
    assert first.status == "needs_date"
    assert first.stub is not None
    assert first.stub.candidates == (date(2026, 9, 26), date(2026, 9, 27))
    assert await stub_status(system, first.stub.id) == "needs_date"
    assert await event_rows(system, user) == []
    done = await system.execute(merge(user, first.stub.id, weekday=7, time="14:00"))
    assert done.status == "created"
    assert done.persisted
    assert done.event is not None
    assert done.event.start.isoformat() == "2026-09-27T14:00:00+08:00"
    assert await stub_status(system, first.stub.id) == "created"
    rows = await event_rows(system, user)
    assert [r.title for r in rows] == ["修汽车轮毂"]


async def test_needs_time_then_model_reply_with_patch_over_model(system: System, user: str) -> None:
    first = await system.execute(create(user, title="看牙", date="D+1"))
    assert first.status == "needs_time"
    assert first.stub is not None
    done = await system.execute(
        create(
            user, active=first.stub.id, title="看牙", date="D+1", time="09:00", patch=SlotPatch(time="14:30")
        )
    )
    assert done.status == "created"
    assert done.event is not None
    assert done.event.start.isoformat() == "2026-09-25T14:30:00+08:00"
    assert await stub_status(system, first.stub.id) == "created"


async def test_all_day_event_is_the_local_day(system: System, user: str) -> None:
    result = await system.execute(create(user, title="休假", date="2026-09-29", all_day=True))
    assert result.status == "created"
    row = (await event_rows(system, user))[0]
    assert row.all_day
    assert row.start_at == datetime.fromisoformat("2026-09-29T00:00:00+08:00")
    assert row.end_at == datetime.fromisoformat("2026-09-30T00:00:00+08:00")


async def test_resolver_error_returns_to_the_model_and_writes_nothing(system: System, user: str) -> None:
    result = await system.execute(create(user, date="2026-02-30", time="10:00"))
    assert result.status == "error"
    assert result.error is not None
    assert result.error.code == "invalid_symbol"
    for table in ("events", "stubs", "idempotency", "calendars"):
        assert await system.scalar(f"SELECT count(*) FROM commands.{table} WHERE user_id = :u", u=user) == 0


# ---- conflicts -----------------------------------------------------------------------------------


async def test_allow_conflict_is_ignored_first_round_and_honoured_after_a_conflict(
    system: System, user: str
) -> None:
    await system.execute(create(user, title="休假", date="2026-09-29", all_day=True))
    first = await system.execute(
        create(user, title="去体育公园", date="2026-09-29", time="10:00", allow_conflict=True)
    )
    assert first.status == "conflict"
    assert first.stub is not None
    assert [e.title for e in first.stub.conflicts_with] == ["休假"]
    assert len(await event_rows(system, user)) == 1
    done = await system.execute(
        create(
            user,
            active=first.stub.id,
            title="去体育公园",
            date="2026-09-29",
            time="10:00",
            allow_conflict=True,
        )
    )
    assert (done.status, done.persisted) == ("created", True)
    assert await stub_status(system, first.stub.id) == "created"
    assert [r.title for r in await event_rows(system, user)] == ["休假", "去体育公园"]


@pytest.mark.parametrize(
    ("existing", "proposed", "status"),
    [
        # touching ranges do not conflict
        ({"date": "D+1", "time": "09:00"}, {"date": "D+1", "time": "10:00"}, "created"),
        ({"date": "D+1", "time": "11:00"}, {"date": "D+1", "time": "10:00"}, "created"),
        # one minute of overlap does
        (
            {"date": "D+1", "time": "09:00", "duration_minutes": 61},
            {"date": "D+1", "time": "10:00"},
            "conflict",
        ),
        # an event crossing midnight blocks the early hours of the next day
        (
            {"date": "D+1", "time": "23:00", "duration_minutes": 120},
            {"date": "D+2", "time": "00:30"},
            "conflict",
        ),
        (
            {"date": "D+1", "time": "23:00", "duration_minutes": 120},
            {"date": "D+2", "time": "01:00"},
            "created",
        ),
        # an all-day event blocks its whole day, and only that day
        ({"date": "D+1", "all_day": True}, {"date": "D+1", "time": "23:00"}, "conflict"),
        ({"date": "D+1", "all_day": True}, {"date": "D+2", "time": "00:00"}, "created"),
        ({"date": "D+1", "all_day": True}, {"date": "D", "time": "23:00"}, "created"),
    ],
)
async def test_overlap_edges(
    system: System, user: str, existing: dict[str, Any], proposed: dict[str, Any], status: str
) -> None:
    first = await system.execute(create(user, title="existing", **existing))
    assert first.status == "created"
    second = await system.execute(create(user, title="proposed", **proposed))
    assert second.status == status
    assert len(await event_rows(system, user)) == (2 if status == "created" else 1)


async def test_completed_events_do_not_conflict(system: System, user: str) -> None:
    await system.execute(create(user, title="done", date="D+1", time="10:00"))
    async with system.db.begin() as conn:
        await conn.execute(
            text("UPDATE commands.events SET completed = true WHERE user_id = :u"), {"u": user}
        )
    again = await system.execute(create(user, title="again", date="D+1", time="10:00"))
    assert again.status == "created"


# ---- held ----------------------------------------------------------------------------------------


async def test_past_start_is_held_until_the_user_confirms(system: System, user: str) -> None:
    held = await system.execute(create(user, title="开会", date="D-1", time="15:00"))
    assert held.status == "held"
    assert held.stub is not None
    assert held.stub.hold_reason == "past_start"
    assert await event_rows(system, user) == []
    done = await system.execute(merge(user, held.stub.id, confirm=True))
    assert (done.status, done.persisted) == ("created", True)
    assert len(await event_rows(system, user)) == 1


async def test_third_party_content_is_held(system: System, user: str) -> None:
    held = await system.execute(
        create(user, title="转发的会议", date="D+1", time="10:00", hold="third_party_content")
    )
    assert held.status == "held"
    assert held.stub is not None
    assert held.stub.hold_reason == "third_party_content"
    assert await event_rows(system, user) == []
    still = await system.execute(merge(user, held.stub.id, time="11:00"))
    assert still.status == "held"
    done = await system.execute(merge(user, held.stub.id, confirm=True))
    assert done.status == "created"
    assert done.event is not None
    assert done.event.start.isoformat() == "2026-09-25T11:00:00+08:00"


async def test_words_that_ask_for_a_repetition_hold_a_one_off_create(system: System, user: str) -> None:
    # The rule of contract §9 lives here: the time service reads the words with the create's
    # symbols, and a write without `recurrence` is held until the user's word.
    held = await system.execute(
        create(user, title="开会", date="W1+1", time="10:00", words="每周一上午十点开会")
    )
    assert held.status == "held"
    assert held.stub is not None
    assert held.stub.hold_reason == "recurrence_unclear"
    assert await event_rows(system, user) == []
    done = await system.execute(merge(user, held.stub.id, confirm=True))
    assert (done.status, done.persisted) == ("created", True)
    assert len(await event_rows(system, user)) == 1


async def test_a_create_whose_words_carry_no_marker_or_that_has_its_rule_is_not_held_as_unclear(
    system: System, user: str
) -> None:
    plain = await system.execute(
        create(user, title="吃药", date="D+1", time="08:00", words="明天早上八点吃药")
    )
    assert plain.status == "created"
    series = await system.execute(
        create(
            user,
            title="开会",
            date="W1+1",
            time="10:00",
            recurrence="FREQ=WEEKLY;BYDAY=MO",
            words="每周一上午十点开会",
        )
    )
    assert series.status == "held"
    assert series.stub is not None
    assert series.stub.hold_reason == "recurrence_plan"


async def test_the_turn_context_reads_the_words_only_for_an_active_stub(system: System, user: str) -> None:
    # No stub: no reading (a create needs none; its words are read with its resolution).
    alone = await system.query(TurnContext(envelope=envelope(user), text="晚上七点"))
    assert (alone.stub, alone.parsed) == (None, None)
    asked = await system.execute(create(user, title="和老李吃饭", date="D+1"))
    assert asked.status == "needs_time"
    reply = await system.query(TurnContext(envelope=envelope(user), text="晚上七点"))
    assert reply.stub is not None and reply.parsed is not None
    assert (reply.parsed.patch, reply.parsed.complete) == (SlotPatch(time="19:00"), True)
    # Without words (a direct call) there is nothing to read.
    direct = await system.query(TurnContext(envelope=envelope(user)))
    assert direct.stub is not None and direct.parsed is None


async def test_a_stub_walks_needs_date_needs_time_conflict_held_then_cancelled(
    system: System, user: str
) -> None:
    await system.execute(create(user, title="已有", date="2026-09-27", time="14:00"))
    first = await system.execute(create(user, title="修车", date="WE"))
    assert first.stub is not None
    stub_id = first.stub.id
    seen = [first.status]
    seen.append((await system.execute(merge(user, stub_id, weekday=7))).status)
    conflict = await system.execute(merge(user, stub_id, time="14:30"))
    seen.append(conflict.status)
    assert conflict.stub is not None
    assert [e.title for e in conflict.stub.conflicts_with] == ["已有"]
    row = (
        await system.rows("SELECT conflict_event_ids, slots FROM commands.stubs WHERE id = :i", i=stub_id)
    )[0]
    assert len(row.conflict_event_ids) == 1
    assert row.slots["date"] == "2026-09-27"
    seen.append((await system.execute(merge(user, stub_id, date="D-1", time="08:00"))).status)
    cancel = await system.execute(
        CancelStub(envelope=envelope(user), idempotency_key=key(), command_id=stub_id)
    )
    seen.append(cancel.status)
    assert seen == ["needs_date", "needs_time", "conflict", "held", "cancelled"]
    assert await stub_status(system, stub_id) == "cancelled"
    assert len(await event_rows(system, user)) == 1


# ---- expiry, cancel, supersede -------------------------------------------------------------------


async def test_expired_stub_is_never_merged(system: System, user: str) -> None:
    first = await system.execute(create(user, title="修车", date="WE"))
    assert first.stub is not None
    system.clock.advance(timedelta(minutes=31))
    active = await system.query(GetActiveStub(envelope=envelope(user)))
    assert active.stub is None
    late = await system.execute(merge(user, first.stub.id, weekday=7, time="14:00"))
    assert late.status == "expired"
    assert await stub_status(system, first.stub.id) == "expired"
    assert await event_rows(system, user) == []
    again = await system.execute(merge(user, first.stub.id, weekday=7, time="14:00"))
    assert again.status == "error"


async def test_cancel_and_supersede(system: System, user: str) -> None:
    none = await system.execute(CancelStub(envelope=envelope(user), idempotency_key=key()))
    assert none.error is not None
    assert none.error.code == "no_active_command"
    first = await system.execute(create(user, date="WE"))
    second = await system.execute(create(user, date="D+3"))
    assert first.stub is not None
    assert second.stub is not None
    # The database accepts the final status `superseded` (migration 0002).
    assert await stub_status(system, first.stub.id) == "superseded"
    assert await stub_status(system, second.stub.id) == "needs_time"
    active = await system.query(GetActiveStub(envelope=envelope(user)))
    assert active.stub is not None
    assert active.stub.id == second.stub.id
    cancelled = await system.execute(CancelStub(envelope=envelope(user), idempotency_key=key()))
    assert cancelled.status == "cancelled"
    assert await stub_status(system, second.stub.id) == "cancelled"
    assert (await system.query(GetActiveStub(envelope=envelope(user)))).stub is None
    active_count = await system.scalar(
        "SELECT count(*) FROM commands.stubs WHERE user_id = :u AND status IN "
        "('needs_date', 'needs_time', 'conflict', 'held')",
        u=user,
    )
    assert active_count == 0


# ---- idempotency ---------------------------------------------------------------------------------


async def test_concurrent_duplicates_write_exactly_once(system: System, user: str) -> None:
    command = create(user, title="并发", date="D+2", time="16:00", idem="dup-key")
    results = await asyncio.gather(*(system.execute(command) for _ in range(24)))
    assert {r.status for r in results} == {"created"}
    assert len({r.event.id for r in results if r.event}) == 1
    assert sum(not r.replayed for r in results) == 1
    assert await system.scalar("SELECT count(*) FROM commands.events WHERE user_id = :u", u=user) == 1
    assert await system.scalar("SELECT count(*) FROM commands.idempotency WHERE user_id = :u", u=user) == 1
    later = await system.execute(command)
    assert later.replayed
    assert later.event == results[0].event


async def test_same_key_of_another_user_is_another_command(system: System, user: str) -> None:
    other = f"{user}-b"
    a = await system.execute(create(user, date="D+2", time="16:00", idem="shared"))
    b = await system.execute(create(other, date="D+2", time="16:00", idem="shared"))
    assert (a.replayed, b.replayed) == (False, False)
    assert a.event is not None
    assert b.event is not None
    assert a.event.id != b.event.id


# ---- queries -------------------------------------------------------------------------------------


async def _insert(
    system: System, user: str, title: str, start: str, end: str, *, completed: bool = False
) -> None:
    async with system.db.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO commands.events (id, user_id, title, start_at, end_at, calendar, completed)"
                " VALUES (:i, :u, :t, :s, :e, '工作', :c)"
            ),
            {
                "i": uuid.uuid4().hex,
                "u": user,
                "t": title,
                "s": datetime.fromisoformat(start),
                "e": datetime.fromisoformat(end),
                "c": completed,
            },
        )


async def test_month_query_is_a_half_open_overlap(system: System, user: str) -> None:
    await _insert(system, user, "crosses-in", "2026-08-31T23:30:00+08:00", "2026-09-01T00:30:00+08:00")
    await _insert(system, user, "ends-at-start", "2026-08-31T23:00:00+08:00", "2026-09-01T00:00:00+08:00")
    await _insert(
        system, user, "mid", "2026-09-15T10:00:00+08:00", "2026-09-15T11:00:00+08:00", completed=True
    )
    await _insert(system, user, "crosses-out", "2026-09-30T23:00:00+08:00", "2026-10-01T01:00:00+08:00")
    await _insert(system, user, "starts-at-end", "2026-10-01T00:00:00+08:00", "2026-10-01T01:00:00+08:00")
    await _insert(
        system,
        f"{user}-other",
        "someone-else",
        "2026-09-10T10:00:00+08:00",
        "2026-09-10T11:00:00+08:00",
    )
    month = await system.query(QueryRange(envelope=envelope(user), start_symbol="M+0", end_symbol="M+1"))
    assert month.error is None
    assert [e.title for e in month.events] == ["crosses-in", "mid", "crosses-out"]
    assert month.range_start is not None
    assert month.range_end is not None
    assert (month.range_start.isoformat(), month.range_end.isoformat()) == (
        "2026-09-01T00:00:00+08:00",
        "2026-10-01T00:00:00+08:00",
    )
    open_only = await system.query(
        QueryRange(envelope=envelope(user), start_symbol="M+0", end_symbol="M+1", incomplete_only=True)
    )
    assert [e.title for e in open_only.events] == ["crosses-in", "crosses-out"]
    absolute = await system.query(
        QueryRange(
            envelope=envelope(user),
            start_at=datetime.fromisoformat("2026-10-01T00:00:00+08:00"),
            end_at=datetime.fromisoformat("2026-10-02T00:00:00+08:00"),
        )
    )
    assert [e.title for e in absolute.events] == ["crosses-out", "starts-at-end"]


async def test_bad_ranges_are_refused(system: System, user: str) -> None:
    backwards = await system.query(QueryRange(envelope=envelope(user), start_symbol="M+1", end_symbol="M+0"))
    assert backwards.error is not None
    assert backwards.error.code == "invalid_range"
    too_long = await system.query(QueryRange(envelope=envelope(user), start_symbol="M+0", end_symbol="M+13"))
    assert too_long.error is not None
    assert too_long.error.code == "invalid_range"
    missing = await system.query(QueryRange(envelope=envelope(user), start_symbol="M+0"))
    assert missing.error is not None
    assert missing.error.code == "invalid_range"


async def test_a_year_the_time_service_resolves_across_a_dst_change_is_taken(
    system: System, user: str
) -> None:
    # In New York 2026-03-09 is summer time and 2027-03-10 winter time: D..D+366 is 366 days on the
    # clock, as the time service counts them, and 366 days and an hour elapsed.
    ny = envelope(user, datetime(2026, 3, 9, 16, 0, tzinfo=UTC), tz="America/New_York")
    year = await system.query(QueryRange(envelope=ny, start_symbol="D", end_symbol="D+366"))
    assert year.error is None
    longer = await system.query(QueryRange(envelope=ny, start_symbol="D", end_symbol="D+367"))
    assert longer.error is not None
    assert longer.error.code == "invalid_range"


async def test_suggest_free_time(system: System, user: str) -> None:
    await system.execute(create(user, title="busy", date="D+1", time="09:00", end_time="17:30"))
    result = await system.query(
        SuggestFree(envelope=envelope(user), start_symbol="D", end_symbol="D+3", duration_minutes=60)
    )
    assert result.error is None
    # The 25th is busy past 17:30; the 26th is a Saturday, outside the default working week.
    assert [(s.start.isoformat(), s.weekday) for s in result.free_slots] == [("2026-09-24T10:00:00+08:00", 4)]


async def test_a_suggestion_ranks_by_confidence_keeps_the_buffer_and_skips_time_marked_free(
    system: System, user: str
) -> None:
    """Friday the 25th, 09:00-18:00: a tentative focus block 09:00-12:00, a meeting 13:00-14:00
    with 30 minutes kept either side, and an all-day event marked free (contract §20)."""
    focus = await system.execute(create(user, title="focus", date="D+1", time="09:00", end_time="12:00"))
    meeting = await system.execute(create(user, title="meeting", date="D+1", time="13:00", end_time="14:00"))
    first = await system.execute(create(user, title="holiday", date="D+1", all_day=True, allow_conflict=True))
    assert first.stub is not None
    holiday = await system.execute(
        create(user, active=first.stub.id, title="holiday", date="D+1", all_day=True, allow_conflict=True)
    )
    assert focus.event and meeting.event and holiday.event
    async with system.db.begin() as conn:
        # As a connected calendar's objects say them (STATUS:TENTATIVE, TRANSP:TRANSPARENT).
        await conn.execute(
            text("UPDATE commands.events SET tentative = true WHERE id = :i"), {"i": focus.event.id}
        )
        await conn.execute(
            text("UPDATE commands.events SET transparent = true WHERE id = :i"), {"i": holiday.event.id}
        )
        await conn.execute(
            text(
                "INSERT INTO commands.user_settings (user_id, buffer_minutes, updated_at) VALUES (:u, 30, now())"
            ),
            {"u": user},
        )

    async def suggest() -> Any:
        query = SuggestFree(
            envelope=envelope(user), start_symbol="D+1", end_symbol="D+2", duration_minutes=60
        )
        return await system.query(query)

    found = await suggest()
    assert found.error is None and found.empty_reason is None
    # 14:30 (after the meeting and its buffer) is surer than 09:00, which the focus block may take;
    # 12:00-12:30 is the meeting's buffer, so the morning's stretch ends at 12:30.
    assert [
        (s.start.isoformat(), s.confidence, s.reason, [(a.who, a.availability) for a in s.attendees])
        for s in found.free_slots
    ] == [
        ("2026-09-25T14:30:00+08:00", 100.0, "all_free", [(user, "free")]),
        ("2026-09-25T09:00:00+08:00", 50.0, "tentative", [(user, "tentative")]),
    ]

    # Marked busy, the all-day event keeps the whole day: nothing fits, and the answer says whose
    # time is the reason.
    async with system.db.begin() as conn:
        await conn.execute(
            text("UPDATE commands.events SET transparent = false WHERE id = :i"), {"i": holiday.event.id}
        )
    busy = await suggest()
    assert (busy.free_slots, busy.empty_reason) == ((), "organizer_unavailable")


async def test_calendars_and_fallback(system: System, user: str) -> None:
    listed = await system.query(ListCalendars(envelope=envelope(user)))
    assert listed.calendars == ("工作", "家庭", "个人")
    chosen = await system.execute(create(user, title="陪家人", date="D+1", time="19:00", calendar="家庭"))
    assert chosen.event is not None
    assert (chosen.event.calendar, chosen.calendar_fallback) == ("家庭", None)
    fallback = await system.execute(create(user, title="跑步", date="D+2", time="07:00", calendar="运动"))
    assert fallback.event is not None
    assert fallback.event.calendar == "工作"
    assert fallback.calendar_fallback is not None
    assert (fallback.calendar_fallback.requested, fallback.calendar_fallback.used) == ("运动", "工作")
    omitted = await system.execute(create(user, title="随便", date="D+3", time="07:00"))
    assert omitted.calendar_fallback is None
    rows = await system.rows(
        "SELECT name FROM commands.calendars WHERE user_id = :u ORDER BY position", u=user
    )
    assert [r.name for r in rows] == ["工作", "家庭", "个人"]


async def test_ics_feed_parses_back(system: System, user: str) -> None:
    await system.execute(create(user, title="开会", date="D+1", time="15:00", calendar="工作"))
    await system.execute(create(user, title="休假", date="D+5", all_day=True, calendar="个人"))
    result = await system.query(ExportIcs(envelope=envelope(user)))
    assert result.ics is not None
    cal = Calendar.from_ical(result.ics)
    assert str(cal["VERSION"]) == "2.0"
    assert "PRODID" in cal
    items = list(cal.walk("VEVENT"))
    assert [str(item["SUMMARY"]) for item in items] == ["开会", "休假"]
    timed, all_day = items
    assert timed.decoded("DTSTART") == datetime.fromisoformat("2026-09-25T15:00:00+08:00")
    assert timed.decoded("DTEND") == datetime.fromisoformat("2026-09-25T16:00:00+08:00")
    assert all_day.decoded("DTSTART") == date(2026, 9, 29)
    assert all_day.decoded("DTEND") == date(2026, 9, 30)
    assert "个人" in all_day.to_ical().decode()
    assert all(item.get("UID") and item.get("DTSTAMP") for item in items)


# ---- identity ------------------------------------------------------------------------------------


async def test_users_are_isolated_even_with_each_others_ids(system: System, user: str) -> None:
    bob = f"{user}-bob"
    created = await system.execute(create(user, title="alice-secret", date="D+1", time="10:00"))
    stub = await system.execute(create(user, title="alice-pending", date="WE"))
    assert created.event is not None
    assert stub.stub is not None
    seen = await system.query(QueryRange(envelope=envelope(bob), start_symbol="M+0", end_symbol="M+1"))
    assert seen.events == ()
    assert (await system.query(GetActiveStub(envelope=envelope(bob)))).stub is None
    assert (await system.query(ExportIcs(envelope=envelope(bob)))).ics is not None
    assert "alice" not in str((await system.query(ExportIcs(envelope=envelope(bob)))).ics)
    merged = await system.execute(merge(bob, stub.stub.id, weekday=7, time="14:00"))
    assert merged.error is not None
    assert merged.error.code == "no_active_command"
    cancelled = await system.execute(
        CancelStub(envelope=envelope(bob), idempotency_key=key(), command_id=stub.stub.id)
    )
    assert cancelled.error is not None
    assert cancelled.error.code == "no_active_command"
    # Naming Alice's stub as his active command only makes Bob a first-round request of his own.
    own = await system.execute(create(bob, active=stub.stub.id, title="bob", date="D+1", time="10:00"))
    assert own.status == "created"
    assert await stub_status(system, stub.stub.id) == "needs_date"
    assert [r.title for r in await event_rows(system, user)] == ["alice-secret"]
    # Bob's write met no conflict with Alice's event at the same time.
    assert [r.title for r in await event_rows(system, bob)] == ["bob"]


# ---- failures ------------------------------------------------------------------------------------


async def test_database_failure_is_transient_and_the_retry_writes_once(system: System, user: str) -> None:
    assert system.app.service is not None
    healthy = system.app.service.writes.store
    dead = make_engine("postgresql+asyncpg://nobody:nothing@127.0.0.1:1/nowhere")
    system.app.service.writes.store = SqlStore(dead)
    command = create(user, title="重试", date="D+1", time="10:00", idem="retry-me")
    try:
        with pytest.raises(BusRequestError) as failure:
            await system.execute(command)
        assert failure.value.code == "transient"
    finally:
        system.app.service.writes.store = healthy
        await dead.dispose()
    first = await system.execute(command)
    second = await system.execute(command)
    assert (first.status, first.replayed, second.replayed) == ("created", False, True)
    assert await system.scalar("SELECT count(*) FROM commands.events WHERE user_id = :u", u=user) == 1


async def test_a_write_that_breaks_a_constraint_is_an_answered_error_not_a_retry(
    system: System, user: str
) -> None:
    # An event already carries the command's key (its idempotency row is gone): the create's
    # insert breaks uq_events_user_key, and no retry can get past that.
    async with system.db.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO commands.events (id, user_id, title, start_at, end_at, calendar, created_by_key)"
                " VALUES (:i, :u, '旧的', :s, :e, '工作', 'kept-key')"
            ),
            {
                "i": uuid.uuid4().hex,
                "u": user,
                "s": NOW + timedelta(days=3),
                "e": NOW + timedelta(days=3, hours=1),
            },
        )
    result = await system.execute(create(user, title="新的", date="D+1", time="10:00", idem="kept-key"))
    assert result.status == "error"
    assert result.error is not None and result.error.code == "internal_error"
    assert "uq_events_user_key" in result.error.message
    # Nothing of it is written, not even its key: the transaction is rolled back.
    assert await system.scalar("SELECT count(*) FROM commands.events WHERE user_id = :u", u=user) == 1
    assert await system.scalar("SELECT count(*) FROM commands.idempotency WHERE user_id = :u", u=user) == 0


# Statements that break each kind of constraint, with what the handler makes of the violation.
VIOLATIONS = {
    # A claim raced past its ON CONFLICT by a concurrent writer of the same key: retried.
    "pk_idempotency": ("INSERT INTO commands.idempotency (user_id, key) VALUES (:u, 'k')", TransientError),
    "uq_inbound_mail_message": (
        "INSERT INTO commands.inbound_mail (user_id, received_at, sender, message_id, verdict)"
        " VALUES (:u, now(), 'a@example.com', '<m@example.com>', 'received')",
        TransientError,
    ),
    # The code should have kept these: defects, answered at once.
    "uq_events_user_key": (
        "INSERT INTO commands.events (id, user_id, title, start_at, end_at, calendar, created_by_key)"
        " VALUES (md5(random()::text), :u, 't', now(), now() + interval '1 hour', '工作', 'k')",
        ConstraintDefect,
    ),
    "ck_events_end_not_before_start": (
        "INSERT INTO commands.events (id, user_id, title, start_at, end_at, calendar)"
        " VALUES (md5(random()::text), :u, 't', now(), now() - interval '1 hour', '工作')",
        ConstraintDefect,
    ),
    "change_rows_change_id_fkey": (
        "INSERT INTO commands.change_rows (change_id, event_id) VALUES ('no-such-change', 'e')",
        ConstraintDefect,
    ),
}


async def _violation(system: System, statement: str, user: str) -> IntegrityError:
    """What the database raises for the statement run twice (a unique key: the second breaks it)."""
    try:
        async with system.db.begin() as conn:
            for _ in range(2):
                await conn.execute(text(statement), {"u": user})
    except IntegrityError as exc:
        return exc
    raise AssertionError(f"no violation: {statement}")


@pytest.mark.parametrize("constraint", list(VIOLATIONS))
async def test_only_a_race_for_a_claim_is_a_transient_violation(
    system: System, user: str, constraint: str
) -> None:
    statement, raised = VIOLATIONS[constraint]
    violation = await _violation(system, statement, user)
    assert broken_constraint(violation) == constraint
    with pytest.raises(raised), transient_failures("merge"):
        raise violation


@pytest.mark.parametrize(
    ("day", "clock"), [("9999-12-31", "23:30"), ("2200-01-01", "10:00"), ("1899-12-31", "10:00")]
)
async def test_a_date_outside_the_supported_years_is_an_answered_error_not_a_retry(
    system: System, user: str, day: str, clock: str
) -> None:
    result = await system.execute(create(user, title="极端", date=day, time=clock))
    assert result.status == "error"
    assert result.error is not None and result.error.code == "invalid_time"
    assert await system.scalar("SELECT count(*) FROM commands.events WHERE user_id = :u", u=user) == 0


@pytest.mark.parametrize(
    "edge", [datetime(9999, 12, 31, 12, 0, tzinfo=NOW.tzinfo), datetime(1, 1, 3, 0, 0, tzinfo=NOW.tzinfo)]
)
async def test_a_range_at_the_ends_of_time_is_an_answered_error_not_a_retry(
    system: System, user: str, edge: datetime
) -> None:
    result = await system.query(
        QueryRange(envelope=envelope(user), start_at=edge - timedelta(days=1), end_at=edge)
    )
    assert result.error is not None and result.error.code == "invalid_range"


async def test_malformed_command_is_dead_lettered_and_writes_nothing(
    system: System, user: str, nats_url: str
) -> None:
    before = await system.scalar("SELECT count(*) FROM commands.events")
    marker = uuid.uuid4().hex
    # A plain connection: what no typed call can send.
    raw = await nats.connect(nats_url)
    try:
        reply = await raw.request(
            subjects.COMMAND_EXECUTE, f"not json at all {marker} \xff".encode("latin-1"), timeout=10
        )
        assert json.loads(reply.data)["bus_error"]["code"] == "malformed"
        half = {"command": {"kind": "prepare_or_create", "envelope": envelope(user).model_dump(mode="json")}}
        reply = await raw.request(subjects.COMMAND_EXECUTE, json.dumps(half).encode(), timeout=10)
        assert json.loads(reply.data)["bus_error"]["code"] == "malformed"
        last = await raw.jetstream().get_last_msg(subjects.DEADLETTER_STREAM, subjects.deadletter("commands"))
    finally:
        await raw.close()
    letter = DeadLetter.model_validate_json(last.data or b"")
    assert (letter.service, letter.subject, letter.reason) == (
        "commands",
        subjects.COMMAND_EXECUTE,
        "malformed",
    )
    assert user in letter.payload
    assert await system.scalar("SELECT count(*) FROM commands.events") == before
    assert await system.scalar("SELECT count(*) FROM commands.stubs WHERE user_id = :u", u=user) == 0


async def test_invalid_zone_is_an_error(system: System, user: str) -> None:
    bad = PrepareOrCreate(
        envelope=envelope(user, tz="Mars/Olympus_Mons"),
        idempotency_key=key(),
        args=PrepareOrCreateSchedule(title="x", date="D+1", time="10:00"),
    )
    result: CommandResult = await system.execute(bad)
    assert result.error is not None
    assert result.error.code == "invalid_zone"


async def test_migrations_match_the_table_definitions(system: System) -> None:
    """What the code reads and writes (`tables.py`, `tables_people.py`) is what the migrations made:
    a column declared only in code fails every statement naming its table, far from the change that
    caused it."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy.engine import Connection

    from calagent.commands.adapters import tables_people  # noqa: F401  (its tables join `metadata`)
    from calagent.commands.adapters.tables import metadata

    def only_commands(name: str | None, type_: str, _parent: object) -> bool:
        if type_ == "schema":
            return name == "commands"
        return not (type_ == "table" and name == "alembic_version")

    def diff(connection: Connection) -> list[object]:
        context = MigrationContext.configure(
            connection, opts={"include_schemas": True, "include_name": only_commands}
        )
        return list(compare_metadata(context, metadata))

    engine = make_engine(system.database_url)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(diff) == []
    finally:
        await engine.dispose()
