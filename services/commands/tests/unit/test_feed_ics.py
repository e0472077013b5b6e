"""The RFC 5545 feed (`ical.render.render_ics`) against the series engine (`series.expand`): a calendar
app that expands the feed (here `recurring_ical_events`, a third-party RFC 5545 expander) must see
the occurrences the queries see. Plus the feed queries on the in-memory store."""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import recurring_ical_events  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icalendar import Calendar

from calagent.commands.domain.model import Event
from calagent.commands.domain.series import expand, until_before
from calagent.commands.ical.render import render_ics
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import ExportIcs, FeedCalendar, RotateFeed
from calagent.devtools.testing.examples import examples

from .conftest import NOW, Harness

pytestmark = pytest.mark.unit

NY = ZoneInfo("America/New_York")
STAMP = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)

Seen = set[tuple[str, datetime, datetime]]


def event(**fields: Any) -> Event:
    start = fields.pop("start", datetime(2026, 10, 19, 9, 0, tzinfo=NY))
    values: dict[str, Any] = {
        "id": "m1",
        "user_id": "u",
        "title": "Standup",
        "start": start.astimezone(UTC),
        "end": (start + fields.pop("length", timedelta(minutes=30))).astimezone(UTC),
        "calendar": "work",
        "tz": "America/New_York",
    }
    values.update(fields)
    return Event(**values)


def day_event(first: date, days: int, zone: ZoneInfo = NY, **fields: Any) -> Event:
    start = datetime.combine(first, time(0), tzinfo=zone)
    end = datetime.combine(first + timedelta(days=days), time(0), tzinfo=zone)
    fields.setdefault("tz", zone.key)
    return event(start=start, length=end - start, all_day=True, **fields)


def instant(value: datetime | date, tz: ZoneInfo) -> datetime:
    if not isinstance(value, datetime):
        value = datetime.combine(value, time(0), tzinfo=tz)
    return value.astimezone(UTC)


def by_engine(events: list[Event], start: datetime, end: datetime) -> Seen:
    return {(e.title, e.start.astimezone(UTC), e.end.astimezone(UTC)) for e in expand(events, start, end)}


def by_feed(ics: str, start: datetime, end: datetime, tz: ZoneInfo) -> Seen:
    cal = Calendar.from_ical(ics)
    return {
        (str(i["SUMMARY"]), instant(i.decoded("DTSTART"), tz), instant(i.decoded("DTEND"), tz))
        for i in recurring_ical_events.of(cal).between(start, end)
    }


def agree(events: list[Event], start: datetime, end: datetime, tz: ZoneInfo = NY) -> Seen:
    """Both expansions over a wider window, compared on what starts inside [start, end)."""
    ics = render_ics(events, tz, STAMP)
    wide = (start - timedelta(days=40), end + timedelta(days=40))
    engine = {s for s in by_engine(events, *wide) if start <= s[1] < end}
    feed = {s for s in by_feed(ics, *wide, tz) if start <= s[1] < end}
    assert feed == engine
    return engine


def vevents(events: list[Event], tz: ZoneInfo = NY) -> list[Any]:
    return list(Calendar.from_ical(render_ics(events, tz, STAMP)).walk("VEVENT"))


WINDOW = (datetime(2026, 10, 1, tzinfo=NY), datetime(2027, 10, 1, tzinfo=NY))


# ---- the shapes ---------------------------------------------------------------------------------


def test_a_series_keeps_its_wall_clock_across_dst() -> None:
    seen = agree([event(rrule="FREQ=WEEKLY;BYDAY=MO")], *WINDOW)
    hours = {s.astimezone(NY).hour for _, s, _ in seen}
    assert hours == {9}
    assert {s.astimezone(UTC).hour for _, s, _ in seen} == {13, 14}
    [item] = vevents([event(rrule="FREQ=WEEKLY;BYDAY=MO")])
    assert item["DTSTART"].params["TZID"] == "America/New_York"


def test_a_start_off_the_rule_is_not_an_occurrence() -> None:
    # Created on a Thursday with BYDAY=MO: the engine's first occurrence is the next Monday; an
    # RFC 5545 reader would count DTSTART itself, so DTSTART is the rule's first start.
    thursday = datetime(2026, 10, 22, 9, 0, tzinfo=NY)
    series = event(start=thursday, rrule="FREQ=WEEKLY;BYDAY=MO;COUNT=3")
    seen = agree([series], *WINDOW)
    assert sorted(s.astimezone(NY).day for _, s, _ in seen) == [2, 9, 26]
    [item] = vevents([series])
    assert item.decoded("DTSTART") == datetime(2026, 10, 26, 9, 0, tzinfo=NY)
    assert str(item["UID"]) == "m1@calagent"


@pytest.mark.parametrize(
    "rule",
    [
        "FREQ=DAILY;UNTIL=20261105",  # a bare date: its last second on the wall clock
        "FREQ=DAILY;UNTIL=20261105T090000Z",  # the engine reads even a Z value on the wall clock
        until_before("FREQ=DAILY", datetime(2026, 11, 5, 9, 0, tzinfo=NY), NY),  # a split
        "FREQ=DAILY;COUNT=20",
        "FREQ=MONTHLY;BYMONTHDAY=31",
        "FREQ=MONTHLY;BYDAY=-1FR;INTERVAL=2",
        "FREQ=YEARLY",
    ],
)
def test_rule_ends_and_shapes(rule: str) -> None:
    series = event(rrule=rule)
    assert agree([series], *WINDOW)
    [item] = vevents([series])
    until = item["RRULE"].get("UNTIL")
    if until:
        assert until[0].tzinfo is not None  # UTC next to a TZID start (RFC 5545 3.3.10)


def test_exdates_and_overrides() -> None:
    series = event(
        rrule="FREQ=WEEKLY;BYDAY=MO",
        exdates=(datetime(2026, 11, 2, 14, 0, tzinfo=UTC),),
    )
    moved = event(
        id="o1",
        title="Standup (moved)",
        start=datetime(2026, 11, 10, 15, 0, tzinfo=NY),
        series_id="m1",
        recurrence_id=datetime(2026, 11, 9, 14, 0, tzinfo=UTC),
    )
    seen = agree([series, moved], *WINDOW)
    assert (
        "Standup (moved)",
        datetime(2026, 11, 10, 20, tzinfo=UTC),
        datetime(2026, 11, 10, 20, 30, tzinfo=UTC),
    ) in seen
    assert not any(s == datetime(2026, 11, 2, 14, tzinfo=UTC) for _, s, _ in seen)
    master, override = vevents([series, moved])
    assert override["UID"] == master["UID"] == "m1@calagent"
    assert override.decoded("RECURRENCE-ID") == datetime(2026, 11, 9, 9, 0, tzinfo=NY)


def test_an_override_of_a_slot_the_rule_no_longer_gives_stands_alone() -> None:
    # The series moved to 10:00 (scope all) after this override was made, or its slot is excluded:
    # the engine shows it as an event of its own, so the feed does too.
    series = event(
        start=datetime(2026, 10, 19, 10, 0, tzinfo=NY),
        rrule="FREQ=WEEKLY;BYDAY=MO",
        exdates=(datetime(2026, 11, 16, 15, 0, tzinfo=UTC),),
    )
    stale = event(
        id="o1",
        title="stale",
        start=datetime(2026, 11, 10, 15, 0, tzinfo=NY),
        series_id="m1",
        recurrence_id=datetime(2026, 11, 9, 14, 0, tzinfo=UTC),
    )
    excluded = event(
        id="o2",
        title="excluded",
        start=datetime(2026, 11, 17, 15, 0, tzinfo=NY),
        series_id="m1",
        recurrence_id=datetime(2026, 11, 16, 15, 0, tzinfo=UTC),
    )
    seen = agree([series, stale, excluded], *WINDOW)
    assert {t for t, _, _ in seen} == {"Standup", "stale", "excluded"}
    uids = {str(i["SUMMARY"]): str(i["UID"]) for i in vevents([series, stale, excluded])}
    assert uids == {"Standup": "m1@calagent", "stale": "o1@calagent", "excluded": "o2@calagent"}


def test_all_day_events_are_dates() -> None:
    # Three days across the end of DST (1 November 2026 has 25 hours in New York).
    retreat = day_event(date(2026, 10, 30), 3, id="r1", title="Retreat")
    legacy = day_event(date(2026, 12, 24), 1, id="l1", title="Legacy", tz=None)
    [item, old] = vevents([retreat, legacy])
    assert (item.decoded("DTSTART"), item.decoded("DTEND")) == (date(2026, 10, 30), date(2026, 11, 2))
    # A row that does not know its zone is read in the feed's zone.
    assert (old.decoded("DTSTART"), old.decoded("DTEND")) == (date(2026, 12, 24), date(2026, 12, 25))
    series = day_event(date(2026, 10, 5), 1, id="s1", title="Payday", rrule="FREQ=WEEKLY;UNTIL=20261130")
    agree([series, retreat], *WINDOW)
    [payday] = vevents([series])
    assert payday["RRULE"]["UNTIL"] == [date(2026, 11, 30)]


def test_an_all_day_series_first_made_on_a_dst_day_keeps_whole_days() -> None:
    series = day_event(date(2026, 11, 1), 1, rrule="FREQ=WEEKLY")
    [second] = expand([series], datetime(2026, 11, 7, tzinfo=NY), datetime(2026, 11, 10, tzinfo=NY))
    assert second.end.astimezone(NY) == datetime(2026, 11, 9, 0, 0, tzinfo=NY)


def test_a_wall_time_in_the_dst_gap() -> None:
    # 02:30 does not exist on 14 March 2027 in New York: RFC 5545 reads it with the offset before
    # the gap (07:30 UTC, 03:30 EDT), as the engine does; the feed says 02:30 and lets the reader
    # resolve it. Starts agree; recurring_ical_events 3.8 ends that one occurrence at 03:00 EDT,
    # before its start, so only starts are compared on that day.
    series = event(start=datetime(2027, 3, 10, 2, 30, tzinfo=NY), rrule="FREQ=DAILY;COUNT=7")
    window = (datetime(2027, 3, 1, tzinfo=NY), datetime(2027, 3, 31, tzinfo=NY))
    engine = by_engine([series], *window)
    feed = by_feed(render_ics([series], NY, STAMP), *window, NY)
    assert {s for _, s, _ in engine} == {s for _, s, _ in feed}
    gap_day = datetime(2027, 3, 14, 7, 30, tzinfo=UTC)
    assert (series.title, gap_day, gap_day + timedelta(minutes=30)) in engine


def test_reminders_are_alarms() -> None:
    [item] = vevents([event(reminder_minutes=10)])
    [alarm] = item.walk("VALARM")
    assert str(alarm["ACTION"]) == "DISPLAY"
    assert alarm.decoded("TRIGGER") == timedelta(minutes=-10)
    assert str(alarm["DESCRIPTION"]) == "Standup"
    [plain] = vevents([event()])
    assert not plain.walk("VALARM")


def test_an_empty_calendar_is_still_a_calendar() -> None:
    cal = Calendar.from_ical(render_ics([], NY, STAMP))
    assert str(cal["VERSION"]) == "2.0"
    assert not cal.walk("VEVENT")


# ---- any series: the feed expands to the engine's occurrences ---------------------------------------

ZONES = ["America/New_York", "Europe/Berlin", "Australia/Sydney", "Asia/Shanghai", "America/Sao_Paulo"]
DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


@st.composite
def rules(draw: st.DrawFn) -> str:
    freq = draw(st.sampled_from(["DAILY", "WEEKLY", "MONTHLY", "YEARLY"]))
    parts = [f"FREQ={freq}"]
    if draw(st.booleans()):
        parts.append(f"INTERVAL={draw(st.integers(1, 3))}")
    if freq == "WEEKLY" and draw(st.booleans()):
        days = draw(st.lists(st.sampled_from(DAYS), min_size=1, max_size=3, unique=True))
        parts.append("BYDAY=" + ",".join(days))
    if freq == "MONTHLY":
        shape = draw(st.sampled_from(["day", "nth", "plain"]))
        if shape == "day":
            parts.append(f"BYMONTHDAY={draw(st.sampled_from([1, 15, 28, 30, 31, -1]))}")
        elif shape == "nth":
            parts.append(f"BYDAY={draw(st.sampled_from(['1', '2', '-1']))}{draw(st.sampled_from(DAYS))}")
    end = draw(st.sampled_from(["none", "count", "until_date", "until_time"]))
    if end == "count":
        parts.append(f"COUNT={draw(st.integers(1, 30))}")
    elif end == "until_date":
        parts.append(f"UNTIL={draw(st.dates(date(2026, 10, 1), date(2027, 6, 1))):%Y%m%d}")
    elif end == "until_time":
        parts.append(f"UNTIL={draw(st.dates(date(2026, 10, 1), date(2027, 6, 1))):%Y%m%d}T083000")
    return ";".join(parts)


@st.composite
def calendars(draw: st.DrawFn) -> tuple[list[Event], ZoneInfo]:
    tz = ZoneInfo(draw(st.sampled_from(ZONES)))
    first = draw(st.dates(date(2026, 9, 1), date(2027, 3, 1)))
    all_day = draw(st.booleans())
    rule = draw(rules())
    if all_day:
        series = day_event(first, draw(st.integers(1, 3)), tz, rrule=rule)
    else:
        # 01:30 happens twice in New York on the day DST ends (the engine and RFC 5545 take the
        # first). A wall time that does not exist (02:30 on the day DST starts) is left
        # out: recurring_ical_events 3.8 adds the length on the wall clock there and ends such an
        # occurrence before it starts (see test_a_wall_time_in_the_dst_gap).
        clock = draw(st.sampled_from([time(0, 0), time(1, 30), time(9, 0), time(12, 15), time(23, 30)]))
        start = datetime.combine(first, clock, tzinfo=tz)
        series = event(
            start=start, length=timedelta(minutes=draw(st.integers(15, 600))), tz=tz.key, rrule=rule
        )
    occurrences = expand([series], datetime(2026, 8, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC))
    chosen = (
        draw(st.lists(st.sampled_from(occurrences), max_size=3, unique_by=lambda e: e.id))
        if occurrences
        else []
    )
    events = [series]
    excluded: list[datetime] = []
    for n, occ in enumerate(chosen):
        assert occ.occurrence_start is not None
        if n % 2 == 0:
            excluded.append(occ.occurrence_start.astimezone(UTC))
        else:
            # A moved all-day occurrence stays on local midnights (occurrences are local times,
            # so adding days is wall-clock arithmetic).
            step = timedelta(days=1) if all_day else timedelta(hours=1)
            shift = step * draw(st.integers(-30, 30))
            events.append(
                occ.evolve(
                    id=f"o{n}",
                    title=f"moved {n}",
                    start=(occ.start + shift).astimezone(UTC),
                    end=(occ.end + shift).astimezone(UTC),
                    rrule=None,
                    recurrence_id=occ.occurrence_start.astimezone(UTC),
                    occurrence_start=None,
                )
            )
    events[0] = series.evolve(exdates=tuple(excluded))
    return events, tz


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calendars())
def test_any_series_expands_the_same_in_the_feed(found: tuple[list[Event], ZoneInfo]) -> None:
    events, tz = found
    agree(events, datetime(2026, 9, 1, tzinfo=UTC), datetime(2027, 9, 1, tzinfo=UTC), tz)


# ---- the feed queries --------------------------------------------------------------------------------


def envelope(user: str = "alice", tz: str = "America/New_York") -> Envelope:
    return Envelope(turn_id="t1", user_id=user, conversation_id="c", occurred_at=NOW, tz=tz)


async def test_rotate_stores_a_hash_and_serves_the_export(harness: Harness) -> None:
    harness.state.events["m1"] = (event(user_id="alice", rrule="FREQ=WEEKLY;BYDAY=MO"), None)
    harness.state.events["x1"] = (event(id="x1", user_id="bob", title="Bob's"), None)
    rotated = await harness.service.query(RotateFeed(envelope=envelope()))
    secret = rotated.feed_secret
    assert secret is not None
    assert rotated.error is None
    assert harness.state.feeds == {"alice": (hashlib.sha256(secret.encode()).hexdigest(), "America/New_York")}
    served = await harness.service.query(FeedCalendar(secret=secret))
    exported = await harness.service.query(ExportIcs(envelope=envelope()))
    assert served.ics is not None
    assert served.ics == exported.ics
    assert "Bob's" not in served.ics
    assert "alice" not in served.ics


async def test_a_rotation_replaces_the_secret(harness: Harness) -> None:
    first = (await harness.service.query(RotateFeed(envelope=envelope()))).feed_secret
    second = (await harness.service.query(RotateFeed(envelope=envelope(tz="Europe/Berlin")))).feed_secret
    assert first is not None
    assert second is not None
    assert first != second
    gone = await harness.service.query(FeedCalendar(secret=first))
    assert gone.ics is None
    assert gone.error is not None
    assert gone.error.code == "not_found"
    assert harness.state.feeds["alice"][1] == "Europe/Berlin"
    assert (await harness.service.query(FeedCalendar(secret=second))).ics is not None


async def test_the_feed_is_served_in_the_zone_saved_with_the_secret(harness: Harness) -> None:
    # A row that does not know its own zone is shown in the feed's zone: 23:30 UTC on 24 Dec is
    # still the 24th in New York but the 25th in Shanghai.
    legacy = day_event(date(2026, 12, 24), 1, ZoneInfo("UTC"), user_id="alice", title="Legacy", tz=None)
    legacy = legacy.evolve(
        start=legacy.start + timedelta(hours=23, minutes=30), end=legacy.end + timedelta(hours=23, minutes=30)
    )
    harness.state.events["l1"] = (legacy, None)
    secret = (await harness.service.query(RotateFeed(envelope=envelope(tz="Asia/Shanghai")))).feed_secret
    assert secret is not None
    ics = (await harness.service.query(FeedCalendar(secret=secret))).ics
    assert ics is not None
    [item] = Calendar.from_ical(ics).walk("VEVENT")
    assert item.decoded("DTSTART") == date(2026, 12, 25)


async def test_an_unknown_secret_is_not_found(harness: Harness) -> None:
    answer = await harness.service.query(FeedCalendar(secret="A" * 43))
    assert answer.ics is None
    assert answer.error is not None
    assert answer.error.code == "not_found"
