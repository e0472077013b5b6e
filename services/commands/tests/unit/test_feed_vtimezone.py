"""The feed's VTIMEZONEs list every transition in the years its events span: a zone's offset on
a day outside the listed years is unknown to a client that reads only the feed."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from icalendar import Calendar

from calagent.commands.domain.model import Event
from calagent.commands.ical.render import render_ics

pytestmark = pytest.mark.unit

NY = ZoneInfo("America/New_York")
STAMP = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)


def event(start: datetime, rrule: str | None = None) -> Event:
    return Event(
        id="e1",
        user_id="u",
        title="Standup",
        start=start.astimezone(UTC),
        end=(start + timedelta(minutes=30)).astimezone(UTC),
        calendar="work",
        tz="America/New_York",
        rrule=rrule,
    )


def transition_years(feed: str) -> set[int]:
    [zone] = Calendar.from_ical(feed).walk("VTIMEZONE")
    years: set[int] = set()
    for part in zone.subcomponents:
        years.add(part.decoded("DTSTART").year)
        for rdate in part.get("RDATE", []) if isinstance(part.get("RDATE"), list) else [part.get("RDATE")]:
            if rdate is not None:
                years.update(d.dt.year for d in rdate.dts)
    return years


@pytest.mark.parametrize(
    ("start", "rrule", "covered"),
    [
        (datetime(2026, 10, 19, 9, 0, tzinfo=NY), "FREQ=YEARLY;UNTIL=20701231T000000Z", {2026, 2050, 2070}),
        (datetime(2026, 10, 19, 9, 0, tzinfo=NY), "FREQ=YEARLY;COUNT=40", {2026, 2065}),
        (datetime(1999, 3, 1, 9, 0, tzinfo=NY), None, {1999}),
        (datetime(2026, 10, 19, 9, 0, tzinfo=NY), "FREQ=WEEKLY", {2026, 2046}),
    ],
)
def test_the_zones_transitions_cover_every_year_the_events_span(
    start: datetime, rrule: str | None, covered: set[int]
) -> None:
    years = transition_years(render_ics([event(start, rrule)], NY, STAMP))
    assert covered <= years


def test_a_feed_of_one_day_does_not_list_decades_of_transitions() -> None:
    years = transition_years(render_ics([event(datetime(2026, 10, 19, 9, 0, tzinfo=NY))], NY, STAMP))
    assert max(years) <= date(2028, 1, 1).year
