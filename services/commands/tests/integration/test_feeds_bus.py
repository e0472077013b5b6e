"""Private calendar feeds over the bus, against real PostgreSQL (contract §10).

A user's calendar is built through commands as a user would build it (a weekly series across a DST
change with one occurrence moved and one deleted, a reminder, a single event, a multi-day all-day
event); the feed behind a rotated secret is then parsed with `icalendar`, expanded by a third party
(`recurring_ical_events`) and compared with what `QueryRange` shows for the same year.
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import recurring_ical_events  # type: ignore[import-untyped]
from icalendar import Calendar

from calagent.contracts.commands import CommandResult, MergeStub, PrepareChange, PrepareOrCreate
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import ExportIcs, FeedCalendar, QueryRange, QueryResult, RotateFeed
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import PrepareOrCreateSchedule, UpdateSchedule

from .conftest import NOW, System

pytestmark = pytest.mark.integration

NY = ZoneInfo("America/New_York")
YEAR_START = datetime(2026, 9, 1, tzinfo=NY)
YEAR_END = datetime(2027, 9, 1, tzinfo=NY)
_keys = itertools.count()

Seen = set[tuple[str, datetime, datetime]]


def envelope(user: str, tz: str = "America/New_York") -> Envelope:
    return Envelope(turn_id=uuid.uuid4().hex[:16], user_id=user, conversation_id="c", occurred_at=NOW, tz=tz)


def key() -> str:
    return f"feed-{uuid.uuid4().hex[:8]}-{next(_keys)}"


async def confirm(system: System, user: str, held: CommandResult) -> CommandResult:
    assert held.status == "held", held
    assert held.stub is not None
    return await system.execute(
        MergeStub(
            envelope=envelope(user),
            idempotency_key=key(),
            command_id=held.stub.id,
            patch=SlotPatch(),
            confirm=True,
        )
    )


async def create(system: System, user: str, **args: Any) -> CommandResult:
    result = await system.execute(
        PrepareOrCreate(envelope=envelope(user), idempotency_key=key(), args=PrepareOrCreateSchedule(**args))
    )
    if args.get("recurrence"):
        # A repeating create is held as a plan; the user's word creates the series.
        result = await confirm(system, user, result)
    assert (result.status, result.persisted) == ("created", True), result
    return result


async def change(system: System, user: str, action: str, event_id: str, **update: Any) -> CommandResult:
    held = await system.execute(
        PrepareChange(
            envelope=envelope(user),
            idempotency_key=key(),
            action=action,
            event_id=event_id,
            update=UpdateSchedule(event_id=event_id, **update) if action == "update" else None,
            scope="this",
        )
    )
    done = await confirm(system, user, held)
    assert (done.status, done.persisted) == ("updated" if action == "update" else "deleted", True), done
    return done


async def year(system: System, user: str) -> QueryResult:
    result = await system.query(QueryRange(envelope=envelope(user), start_at=YEAR_START, end_at=YEAR_END))
    assert result.error is None, result.error
    return result


def instant(value: datetime | date) -> datetime:
    """A DATE (all-day) is the user's local midnight, as the commands service stores it."""
    if not isinstance(value, datetime):
        value = datetime.combine(value, time(0), tzinfo=NY)
    return value.astimezone(UTC)


def queried(result: QueryResult) -> Seen:
    return {(e.title, instant(e.start), instant(e.end)) for e in result.events}


def expanded(ics: str) -> Seen:
    cal = Calendar.from_ical(ics)
    return {
        (str(item["SUMMARY"]), instant(item.decoded("DTSTART")), instant(item.decoded("DTEND")))
        for item in recurring_ical_events.of(cal).between(YEAR_START, YEAR_END)
    }


async def build_calendar(system: System, user: str) -> None:
    await create(
        system,
        user,
        title="Weekly sync",
        date="2026-10-19",
        time="09:00",
        duration_minutes=45,
        recurrence="FREQ=WEEKLY;BYDAY=MO",
        reminder_minutes=15,
    )
    await create(system, user, title="Dentist", date="2026-10-21", time="15:00", reminder_minutes=60)
    await create(system, user, title="Retreat", date="2026-10-30", end_date="2026-11-01", all_day=True)
    occurrences = {e.start.date(): e for e in (await year(system, user)).events if e.title == "Weekly sync"}
    moved, dropped = occurrences[date(2026, 11, 9)], occurrences[date(2026, 11, 16)]
    assert moved.series_id is not None
    assert moved.series_id == dropped.series_id
    await change(system, user, "update", moved.id, date="2026-11-10", time="14:00")
    await change(system, user, "delete", dropped.id)


async def test_the_feed_expands_to_what_the_queries_show(system: System, user: str) -> None:
    await build_calendar(system, user)
    shown = await year(system, user)
    seen = queried(shown)
    # The calendar the queries see: the series keeps 09:00 New York time across the DST change
    # (13:00 UTC before 1 November, 14:00 after), one Monday moved to Tuesday, one gone.
    weekly = sorted(s for t, s, _ in seen if t == "Weekly sync")
    assert weekly[:4] == [
        datetime(2026, 10, 19, 13, tzinfo=UTC),
        datetime(2026, 10, 26, 13, tzinfo=UTC),
        datetime(2026, 11, 2, 14, tzinfo=UTC),
        datetime(2026, 11, 10, 19, tzinfo=UTC),
    ]
    assert weekly[4] == datetime(2026, 11, 23, 14, tzinfo=UTC)
    assert ("Retreat", datetime(2026, 10, 30, 4, tzinfo=UTC), datetime(2026, 11, 2, 5, tzinfo=UTC)) in seen
    assert len(seen) == len(shown.events) > 40

    secret = (await system.query(RotateFeed(envelope=envelope(user)))).feed_secret
    assert secret is not None
    served = await system.query(FeedCalendar(secret=secret))
    assert served.error is None
    assert served.ics is not None
    assert expanded(served.ics) == seen

    # The same bytes as the signed-in export in the zone saved with the secret.
    export = await system.query(ExportIcs(envelope=envelope(user)))
    assert served.ics == export.ics


async def test_the_feed_speaks_rfc_5545_series(system: System, user: str) -> None:
    await build_calendar(system, user)
    secret = (await system.query(RotateFeed(envelope=envelope(user)))).feed_secret
    assert secret is not None
    ics = (await system.query(FeedCalendar(secret=secret))).ics
    assert ics is not None
    cal = Calendar.from_ical(ics)
    assert [str(tz["TZID"]) for tz in cal.walk("VTIMEZONE")] == ["America/New_York"]
    items = {(str(i["SUMMARY"]), "RECURRENCE-ID" in i): i for i in cal.walk("VEVENT")}
    assert len(items) == 4
    master, override = items[("Weekly sync", False)], items[("Weekly sync", True)]
    assert master["DTSTART"].to_ical() == b"20261019T090000"
    assert master["DTSTART"].params["TZID"] == "America/New_York"
    assert master["RRULE"].to_ical() == b"FREQ=WEEKLY;BYDAY=MO"
    exdates = [d.dt for prop in _list(master["EXDATE"]) for d in prop.dts]
    assert exdates == [datetime(2026, 11, 16, 9, tzinfo=NY)]
    assert override["UID"] == master["UID"]
    assert str(master["UID"]).endswith("@calagent")
    assert override.decoded("RECURRENCE-ID") == datetime(2026, 11, 9, 9, tzinfo=NY)
    assert override.decoded("DTSTART") == datetime(2026, 11, 10, 14, tzinfo=NY)
    [alarm] = master.walk("VALARM")
    assert (str(alarm["ACTION"]), alarm.decoded("TRIGGER")) == ("DISPLAY", timedelta(minutes=-15))
    assert str(alarm["DESCRIPTION"]) == "Weekly sync"
    [dentist_alarm] = items[("Dentist", False)].walk("VALARM")
    assert dentist_alarm.decoded("TRIGGER") == timedelta(minutes=-60)
    retreat = items[("Retreat", False)]
    assert (retreat.decoded("DTSTART"), retreat.decoded("DTEND")) == (date(2026, 10, 30), date(2026, 11, 2))
    assert "VALUE=DATE" in retreat.to_ical().decode()
    assert not retreat.walk("VALARM")
    assert user not in ics  # the body names events, never their owner


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


async def test_rotation_kills_the_old_secret(system: System, user: str) -> None:
    await create(system, user, title="Dentist", date="2026-10-21", time="15:00")
    first = (await system.query(RotateFeed(envelope=envelope(user)))).feed_secret
    second = (await system.query(RotateFeed(envelope=envelope(user)))).feed_secret
    assert first is not None
    assert second is not None
    assert first != second
    assert len(second) >= 43
    old = await system.query(FeedCalendar(secret=first))
    assert old.ics is None
    assert old.error is not None
    assert old.error.code == "not_found"
    new = await system.query(FeedCalendar(secret=second))
    assert new.ics is not None
    assert "Dentist" in new.ics
    # Only the hash is kept, one row per user.
    rows = await system.rows("SELECT secret_hash, tz FROM commands.feeds WHERE user_id = :u", u=user)
    assert [(r.secret_hash, r.tz) for r in rows] == [
        (hashlib.sha256(second.encode()).hexdigest(), "America/New_York")
    ]


async def test_unknown_secrets_and_other_users(system: System, user: str) -> None:
    other = f"{user}-other"
    await create(system, user, title="Mine", date="2026-10-21", time="15:00")
    await create(system, other, title="Theirs", date="2026-10-21", time="15:00")
    mine = (await system.query(RotateFeed(envelope=envelope(user)))).feed_secret
    theirs = (await system.query(RotateFeed(envelope=envelope(other, "Europe/Berlin")))).feed_secret
    assert mine is not None
    assert theirs is not None
    unknown = await system.query(FeedCalendar(secret="x" * 43))
    assert (unknown.ics, unknown.error and unknown.error.code) == (None, "not_found")
    own = await system.query(FeedCalendar(secret=mine))
    assert own.ics is not None
    assert "Mine" in own.ics
    assert "Theirs" not in own.ics
    served = await system.query(FeedCalendar(secret=theirs))
    assert served.ics is not None
    assert "Theirs" in served.ics
    assert "Mine" not in served.ics
    # Each feed in the zone saved with its secret.
    assert "TZID=America/New_York" in own.ics
    assert served.ics == (await system.query(ExportIcs(envelope=envelope(other, "Europe/Berlin")))).ics
