"""Series expansion (RFC 5545 via dateutil): wall-clock time across DST, EXDATE, overrides,
occurrence ids, and cutting a rule for `scope=following`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from calagent.commands.domain.model import Event
from calagent.commands.domain.series import (
    InexpressibleChangeError,
    InvalidRecurrenceError,
    expand,
    live_count,
    move_rule,
    next_starts,
    occurrence_count,
    occurrence_id,
    remaining_rule,
    split_occurrence_id,
    until_before,
    validate_rule,
)

pytestmark = pytest.mark.unit

NY = ZoneInfo("America/New_York")


def master(rule: str = "FREQ=WEEKLY;BYDAY=MO", **fields: object) -> Event:
    start = datetime(2026, 10, 26, 9, 0, tzinfo=NY)
    values: dict[str, object] = {
        "id": "m1",
        "user_id": "u",
        "title": "Standup",
        "start": start,
        "end": start + timedelta(minutes=30),
        "calendar": "work",
        "tz": "America/New_York",
        "rrule": rule,
    }
    values.update(fields)
    return Event(**values)  # type: ignore[arg-type]


def local(found: list[Event]) -> list[str]:
    return [e.start.astimezone(NY).isoformat() for e in found]


def test_occurrences_keep_their_wall_clock_time_across_dst() -> None:
    found = expand([master()], datetime(2026, 10, 20, tzinfo=NY), datetime(2026, 11, 10, tzinfo=NY))
    assert local(found) == [
        "2026-10-26T09:00:00-04:00",
        "2026-11-02T09:00:00-05:00",
        "2026-11-09T09:00:00-05:00",
    ]
    assert all(e.series_id == "m1" and e.end - e.start == timedelta(minutes=30) for e in found)


def test_exdates_and_overrides_replace_their_slots() -> None:
    second = datetime(2026, 11, 2, 14, 0, tzinfo=UTC)
    third = datetime(2026, 11, 9, 14, 0, tzinfo=UTC)
    moved = Event(
        id="o1",
        user_id="u",
        title="Standup (late)",
        start=third + timedelta(hours=2),
        end=third + timedelta(hours=2, minutes=30),
        calendar="work",
        series_id="m1",
        recurrence_id=third,
    )
    found = expand(
        [master(exdates=(second,)), moved],
        datetime(2026, 10, 20, tzinfo=NY),
        datetime(2026, 11, 10, tzinfo=NY),
    )
    assert [(e.title, e.start.astimezone(NY).strftime("%m-%d %H:%M")) for e in found] == [
        ("Standup", "10-26 09:00"),
        ("Standup (late)", "11-09 11:00"),
    ]


def test_occurrence_ids_round_trip() -> None:
    start = datetime(2026, 11, 2, 9, 0, tzinfo=NY)
    value = occurrence_id("m1", start)
    assert value == "m1:20261102T140000Z"
    assert split_occurrence_id(value) == ("m1", start.astimezone(UTC))
    assert split_occurrence_id("plainid") is None
    assert split_occurrence_id("m1:not-a-stamp") is None


def test_a_rule_is_cut_before_an_occurrence_and_its_tail_keeps_the_remaining_count() -> None:
    rule = "FREQ=WEEKLY;BYDAY=MO;COUNT=4"
    first = master(rule).start
    cut = datetime(2026, 11, 9, 9, 0, tzinfo=NY)
    assert until_before(rule, cut, NY) == "FREQ=WEEKLY;BYDAY=MO;UNTIL=20261109T085959"
    assert remaining_rule(rule, first, NY, cut) == "FREQ=WEEKLY;BYDAY=MO;COUNT=2"
    assert occurrence_count(rule, first, NY, first) == 4
    assert occurrence_count("FREQ=DAILY", first, NY, first) is None


def test_next_starts_and_validation() -> None:
    first = master().start
    assert [s.day for s in next_starts("FREQ=DAILY;COUNT=5", first, NY, first, 3)] == [26, 27, 28]
    with pytest.raises(InvalidRecurrenceError):
        validate_rule("FREQ=WEEKLY;BYDAY=XX", first, NY)
    with pytest.raises(InvalidRecurrenceError):
        validate_rule("FREQ=DAILY;UNTIL=20200101", first, NY)


def test_moving_a_rule_rewrites_its_day_and_moves_until_with_the_starts() -> None:
    first = datetime(2026, 10, 28, 14, 0, tzinfo=NY)  # a Wednesday
    moved = move_rule("FREQ=WEEKLY;BYDAY=WE;UNTIL=20261118", first, NY, timedelta(days=1, hours=-4))
    assert moved.rule == "FREQ=WEEKLY;BYDAY=TH;UNTIL=20261119T100000"
    # Across the DST change the slot keeps its wall-clock time.
    assert moved.slot(datetime(2026, 11, 4, 14, 0, tzinfo=NY)) == datetime(2026, 11, 5, 10, 0, tzinfo=NY)
    monthly = move_rule("FREQ=MONTHLY;BYMONTHDAY=15;COUNT=6", first.replace(day=15), NY, timedelta(days=5))
    assert monthly.rule == "FREQ=MONTHLY;BYMONTHDAY=20;COUNT=6"
    # UNTIL follows the last start, not its own value: 12/1 moved to 11/30 with an UNTIL of 12/31
    # moved to 12/30 would add a start on 12/30.
    last = datetime(2026, 12, 1, 17, 30, tzinfo=NY)
    cut = move_rule("FREQ=MONTHLY;UNTIL=20261231T175959", last, NY, timedelta(days=-1))
    assert cut.rule == "FREQ=MONTHLY;UNTIL=20261130T173000"


@pytest.mark.parametrize(
    ("rule", "day", "delta"),
    [
        ("FREQ=WEEKLY;BYDAY=MO,WE", 26, timedelta(days=1)),  # one weekday of several
        ("FREQ=MONTHLY;BYMONTHDAY=28", 28, timedelta(days=3)),  # the 31st: most months lack it
        ("FREQ=MONTHLY", 28, timedelta(days=5)),  # across a month end
    ],
)
def test_a_move_the_rule_cannot_say_is_refused(rule: str, day: int, delta: timedelta) -> None:
    with pytest.raises(InexpressibleChangeError):
        move_rule(rule, datetime(2026, 10, day, 9, 0, tzinfo=NY), NY, delta)


def test_the_live_count_leaves_out_what_is_excluded() -> None:
    series = master("FREQ=WEEKLY;BYDAY=MO;COUNT=4", exdates=(datetime(2026, 11, 2, 14, 0, tzinfo=UTC),))
    assert live_count(series, series.start) == 3
    assert live_count(master(), series.start) is None
