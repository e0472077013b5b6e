"""The one range limit every door asks (`limits.range_too_long`): 366 days on the wall clock of the
user's zone, so a DST change between the ends decides nothing (contract §6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from calagent.contracts.limits import range_too_long

pytestmark = pytest.mark.unit

SHANGHAI = ZoneInfo("Asia/Shanghai")
NEW_YORK = ZoneInfo("America/New_York")


@pytest.mark.parametrize(("days", "too_long"), [(365, False), (366, False), (367, True)])
def test_a_range_spans_at_most_366_days(days: int, too_long: bool) -> None:
    start = datetime(2027, 2, 10, 9, 0, tzinfo=SHANGHAI)
    assert range_too_long(start, start + timedelta(days=days), SHANGHAI) is too_long
    assert range_too_long(start, start + timedelta(days=days, minutes=1), SHANGHAI) is (days >= 366)


@pytest.mark.parametrize(("days", "too_long"), [(365, False), (366, False), (367, True)])
def test_a_dst_change_between_the_ends_does_not_move_the_boundary(days: int, too_long: bool) -> None:
    # 2026-03-09 is summer time (EDT) in New York, 2027-03-09/10/11 winter time (EST, until the
    # 14th): 366 days on the clock are 366 days and an hour of elapsed time.
    start = datetime(2026, 3, 9, tzinfo=NEW_YORK)
    end = datetime.combine(start.date() + timedelta(days=days), start.time(), tzinfo=NEW_YORK)
    assert end.astimezone(UTC) - start.astimezone(UTC) == timedelta(days=days, hours=1)
    assert range_too_long(start, end, NEW_YORK) is too_long
    # The same ends written in other offsets (as they may cross the wire) read the same.
    assert range_too_long(start.astimezone(UTC), end.astimezone(UTC), NEW_YORK) is too_long


def test_half_an_hour_past_366_clock_days_is_too_long_though_fewer_have_elapsed() -> None:
    # 2026-11-02 is winter time (EST), 2027-11-03 summer time (EDT, until the 7th).
    start = datetime(2026, 11, 2, tzinfo=NEW_YORK)
    end = datetime(2027, 11, 3, 0, 30, tzinfo=NEW_YORK)
    assert end.astimezone(UTC) - start.astimezone(UTC) == timedelta(days=366, minutes=-30)
    assert range_too_long(start, end, NEW_YORK)
