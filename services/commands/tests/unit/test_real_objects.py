"""Objects real clients write, read one at a time (issue 44): what no reader can take is named and
skipped alone, what can be read in part is shown as far as it goes, and a listing full of broken
objects still brings every good one (a Hypothesis property over the planning of a listing)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
import recurring_ical_events  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st
from icalendar import Calendar

from calagent.commands.caldav import remote, rows
from calagent.commands.caldav.addresses import AddressRule, Guard
from calagent.commands.caldav.listing import Known, Listing, Plan, SyncStats, take_changed
from calagent.commands.caldav.notes import uid_in
from calagent.commands.domain.model import Event
from calagent.commands.domain.overlap import in_window, keeps_time
from calagent.commands.domain.series import expand
from calagent.commands.ical.parse import UnreadableObject, parse_resource, read_resource
from calagent.commands.ical.patch import patch_object
from calagent.commands.people import imip

pytestmark = pytest.mark.unit

SHANGHAI = ZoneInfo("Asia/Shanghai")
YEAR = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))


def vcalendar(*lines: str) -> str:
    return "\r\n".join(
        ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//test//real//EN", *lines, "END:VCALENDAR", ""]
    )


def vevent(uid: str, *lines: str) -> list[str]:
    return ["BEGIN:VEVENT", f"UID:{uid}", "DTSTAMP:20260101T000000Z", *lines, "END:VEVENT"]


GOOD = ("DTSTART:20260305T090000Z", "DTEND:20260305T100000Z", "SUMMARY:fine")
# Each defect of issue 44 item 2 as a client wrote it.
DEFECTS = {
    "two DTSTARTs": vevent("d1", "DTSTART:20260305T090000Z", "DTSTART:20260306T090000Z", "SUMMARY:x"),
    "a DTSTART that is text": vevent("d2", "DTSTART:tomorrow", "SUMMARY:x"),
    "an invalid DURATION": vevent("d3", "DTSTART:20260305T090000Z", "DURATION:1 hour", "SUMMARY:x"),
    "a VALARM with a bad TRIGGER": [
        *vevent("d4", *GOOD)[:-1],
        "BEGIN:VALARM",
        "ACTION:DISPLAY",
        "TRIGGER:soon",
        "END:VALARM",
        "END:VEVENT",
    ],
    "two VEVENTs of one UID without RECURRENCE-ID": [
        *vevent("d5", *GOOD),
        *vevent("d5", "DTSTART:20260306T090000Z", "SUMMARY:again"),
    ],
    "no DTSTART": vevent("d6", "SUMMARY:x"),
    "one occurrence changed twice": [
        *vevent("d7", *GOOD, "RRULE:FREQ=DAILY;COUNT=3"),
        *vevent("d7", "RECURRENCE-ID:20260306T090000Z", "DTSTART:20260306T110000Z", "SUMMARY:a"),
        *vevent("d7", "RECURRENCE-ID:20260306T090000Z", "DTSTART:20260306T120000Z", "SUMMARY:b"),
    ],
}


def read(body: str) -> list[object]:
    return list(parse_resource(body, master_id="m", user_id="u", calendar="c", fallback_tz=SHANGHAI))


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_an_object_no_reader_takes_is_unreadable_with_what_is_wrong(defect: str) -> None:
    """Each raised a TypeError, an AttributeError or (two masters) a primary key violation at
    write time; now each is an UnreadableObject whose message is shown to the user."""
    with pytest.raises(UnreadableObject) as caught:
        read(vcalendar(*DEFECTS[defect]))
    assert str(caught.value)


def test_an_object_with_two_rrules_is_read_by_its_first_and_says_so() -> None:
    body = vcalendar(*vevent("r2", *GOOD, "RRULE:FREQ=WEEKLY;COUNT=3", "RRULE:FREQ=DAILY;COUNT=2"))
    reading = read_resource(body, master_id="m", user_id="u", calendar="c", fallback_tz=SHANGHAI)
    assert [r.rrule for r in reading.rows] == ["FREQ=WEEKLY;COUNT=3"]
    assert len(reading.notes) == 1
    starts = [e.start for e in expand(reading.rows, *YEAR)]
    assert starts == [datetime(2026, 3, d, 9, tzinfo=UTC) for d in (5, 12, 19)]


@pytest.mark.parametrize(
    "rule",
    ["RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=FORWARD", "FREQ=FORTNIGHTLY;COUNT=3"],
)
def test_a_series_the_expander_cannot_follow_shows_its_first_occurrence_and_is_noted(rule: str) -> None:
    """GET /v1/events answered 422 for every range such a series touched."""
    body = vcalendar(*vevent("rs", *GOOD, f"RRULE:{rule}"))
    reading = read_resource(body, master_id="m", user_id="u", calendar="c", fallback_tz=SHANGHAI)
    assert len(reading.notes) == 1
    shown = expand(reading.rows, *YEAR)
    assert [(e.start, e.end) for e in shown] == [
        (datetime(2026, 3, 5, 9, tzinfo=UTC), datetime(2026, 3, 5, 10, tzinfo=UTC))
    ]


def test_the_uid_of_an_object_no_parser_takes_is_read_off_its_lines() -> None:
    assert uid_in(vcalendar(*DEFECTS["a DTSTART that is text"])) == "d2"
    assert uid_in("garbage") is None


# ---- a listing of good and broken objects ---------------------------------------------------------


def good_object(n: int) -> remote.RemoteObject:
    start = datetime(2026, 3, 1, 9, tzinfo=UTC) + timedelta(days=n)
    body = vcalendar(
        *vevent(
            f"good-{n}",
            f"DTSTART:{start:%Y%m%dT%H%M%SZ}",
            f"DTEND:{start + timedelta(hours=1):%Y%m%dT%H%M%SZ}",
            f"SUMMARY:good {n}",
        )
    )
    return remote.RemoteObject(f"/cal/good-{n}.ics", f'"g{n}"', body)


# Ways a client breaks an object: a defect above, or a line of a good object garbled.
MUTATIONS = st.one_of(
    st.sampled_from(sorted(DEFECTS)).map(lambda d: vcalendar(*DEFECTS[d])),
    st.tuples(
        st.integers(min_value=0, max_value=8),
        st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=40),
    ).map(lambda cut: _garbled(*cut)),
    st.binary(max_size=200).map(lambda raw: raw.decode("utf-8", errors="replace")),
)


def _garbled(line: int, text: str) -> str:
    lines = vcalendar(*vevent("bad", *GOOD)).split("\r\n")
    lines[3 + line % 6] = text
    return "\r\n".join(lines)


def plan_of(objects: list[remote.RemoteObject]) -> Plan:
    login = remote.Login("https://dav.example/", "u", "pw", Guard(AddressRule()))
    listing = Listing(
        rows.Account("a", "u", login),
        rows.Place("https://dav.example/cal/", "Personal", True),
        remote.Changes(changed=objects, deleted=[], token=None, complete=True),
        SyncStats(),
        datetime(2026, 3, 1, tzinfo=UTC),
        SHANGHAI,
    )
    plan = Plan()
    take_changed(listing, Known({}, set(), set(), {}), plan)
    return plan


@settings(max_examples=200, deadline=None)
@given(
    goods=st.integers(min_value=1, max_value=6),
    broken=st.lists(MUTATIONS, min_size=1, max_size=6),
    order=st.randoms(use_true_random=False),
)
def test_broken_objects_never_keep_the_rest_of_a_calendar_out(
    goods: int, broken: list[str], order: object
) -> None:
    good = [good_object(n) for n in range(goods)]
    bad = [remote.RemoteObject(f"/cal/bad-{i}.ics", f'"b{i}"', body) for i, body in enumerate(broken)]
    objects = [*good, *bad]
    order.shuffle(objects)  # type: ignore[attr-defined]
    plan = plan_of(objects)
    # Every good object arrives whole, whatever stands beside it.
    titles = {e.title for e in plan.fresh}
    assert {f"good {n}" for n in range(goods)} <= titles
    # Every broken one either arrived (it was readable after all) or is named as skipped.
    arrived = {r["href"] for r in plan.resources}
    named = {n.href for n in plan.object_notes if n.skipped}
    assert {o.href for o in bad} <= arrived | named
    assert not arrived & named
    # Rows the sync writes carry distinct ids (two masters of one UID broke the primary key).
    ids = [e.id for e in plan.fresh]
    assert len(ids) == len(set(ids))


# ---- zones as Outlook and custom VTIMEZONEs write them -------------------------------------------

US_PACIFIC_RULES = [
    "BEGIN:STANDARD",
    "DTSTART:16010101T020000",
    "TZOFFSETFROM:-0700",
    "TZOFFSETTO:-0800",
    "RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=1SU;BYMONTH=11",
    "END:STANDARD",
    "BEGIN:DAYLIGHT",
    "DTSTART:16010101T020000",
    "TZOFFSETFROM:-0800",
    "TZOFFSETTO:-0700",
    "RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=2SU;BYMONTH=3",
    "END:DAYLIGHT",
]


@pytest.mark.parametrize("tzid", ["Pacific Standard Time", "Custom Pacific"])
def test_a_weekly_series_in_a_windows_or_custom_zone_keeps_its_wall_clock_across_dst(tzid: str) -> None:
    """Outlook's `TZID=Pacific Standard Time` (with its own VTIMEZONE) was read as UTC: an hour
    off after the March change, and the last occurrence lost to UNTIL. The occurrences are the
    ones recurring-ical-events reads from the same object."""
    body = vcalendar(
        "BEGIN:VTIMEZONE",
        f"TZID:{tzid}",
        *US_PACIFIC_RULES,
        "END:VTIMEZONE",
        *vevent(
            "outlook",
            f"DTSTART;TZID={tzid}:20260305T090000",
            f"DTEND;TZID={tzid}:20260305T100000",
            "RRULE:FREQ=WEEKLY;UNTIL=20260319T160000Z",
            "SUMMARY:weekly",
        ),
    )
    ours = [(e.start, e.end) for e in expand(parse_resource_rows(body), *YEAR)]
    theirs = [
        (e.decoded("DTSTART").astimezone(UTC), e.decoded("DTEND").astimezone(UTC))
        for e in recurring_ical_events.of(Calendar.from_ical(body)).between(*YEAR)
    ]
    assert ours == theirs
    assert [s.astimezone(UTC).hour for s, _ in ours] == [17, 16, 16]


def parse_resource_rows(body: str) -> list[Event]:
    return parse_resource(body, master_id="m", user_id="u", calendar="c", fallback_tz=SHANGHAI)


def test_a_timed_event_without_dtend_or_duration_ends_when_it_starts_and_keeps_no_time() -> None:
    [row] = parse_resource_rows(vcalendar(*vevent("t", "DTSTART:20260305T090000Z", "SUMMARY:ping")))
    assert row.end == row.start
    assert not keeps_time(row)
    at = row.start
    assert in_window(at, at, at, at + timedelta(hours=1))
    assert not in_window(at, at, at - timedelta(hours=1), at)
    [day] = parse_resource_rows(vcalendar(*vevent("d", "DTSTART;VALUE=DATE:20260305", "SUMMARY:day")))
    assert day.end - day.start == timedelta(days=1)


# ---- occurrences an object names besides its rule, compared with an RFC 5545 reading -------------


def rfc_reading(body: str) -> list[tuple[str, datetime, datetime]]:
    """What recurring-ical-events (an independent RFC 5545 reading) shows of an object in 2026."""
    shown = []
    for c in recurring_ical_events.of(Calendar.from_ical(body)).between(*YEAR):
        start = c.decoded("DTSTART")
        end = c.decoded("DTEND") if "DTEND" in c else start + c.decoded("DURATION", timedelta(0))
        shown.append((str(c["SUMMARY"]), instant(start), instant(end)))
    return sorted(shown)


def instant(value: object) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    assert isinstance(value, date)
    return datetime.combine(value, time(), tzinfo=SHANGHAI).astimezone(UTC)


def ours(body: str) -> list[tuple[str, datetime, datetime]]:
    return sorted(
        (e.title, e.start.astimezone(UTC), e.end.astimezone(UTC))
        for e in expand(parse_resource_rows(body), *YEAR)
    )


RDATES = {
    # A podcast feed's way: a first episode, later ones by date-time.
    "date-time": vevent(
        "episodes",
        "DTSTART:20260105T170000Z",
        "DTEND:20260105T180000Z",
        "RDATE:20260112T170000Z,20260126T170000Z",
        "RDATE:20260209T170000Z",
        "SUMMARY:episode",
    ),
    # RFC 5545 §3.8.5.2's PERIOD example: each occurrence its own span.
    "period": vevent(
        "periods",
        "DTSTART:20260102T140000Z",
        "DTEND:20260102T150000Z",
        "RDATE;VALUE=PERIOD:20260103T180000Z/20260103T190000Z,20260104T070000Z/PT3H",
        "SUMMARY:period",
    ),
    "date": vevent(
        "days",
        "DTSTART;VALUE=DATE:20260101",
        "DTEND;VALUE=DATE:20260102",
        "RDATE;VALUE=DATE:20260120,20260217",
        "EXDATE;VALUE=DATE:20260217",
        "SUMMARY:holiday",
    ),
    "with a rule": vevent(
        "rule-and-dates",
        "DTSTART:20260302T010000Z",
        "DTEND:20260302T020000Z",
        "RRULE:FREQ=WEEKLY;COUNT=3",
        "RDATE:20260305T010000Z,20260309T010000Z",
        "SUMMARY:mixed",
    ),
}


@pytest.mark.parametrize("form", sorted(RDATES))
def test_rdates_show_every_occurrence_the_rfc_reading_does(form: str) -> None:
    """RDATE was never read: a podcast feed showed 1 of its 12 episodes, RFC 5545's own PERIOD
    example 1 of 3."""
    body = vcalendar(*RDATES[form])
    assert ours(body) == rfc_reading(body)
    assert len(ours(body)) > 1


THIS_AND_FUTURE = vcalendar(
    *vevent(
        "tf",
        "DTSTART:20260302T010000Z",
        "DTEND:20260302T020000Z",
        "RRULE:FREQ=WEEKLY;COUNT=5",
        "SUMMARY:sync",
    ),
    *vevent(
        "tf",
        "RECURRENCE-ID;RANGE=THISANDFUTURE:20260316T010000Z",
        "DTSTART:20260316T030000Z",
        "DTEND:20260316T033000Z",
        "SUMMARY:sync (moved)",
    ),
)


def test_a_this_and_future_change_reaches_every_later_occurrence() -> None:
    """RECURRENCE-ID;RANGE=THISANDFUTURE was ignored: the edited tail kept the old times."""
    assert ours(THIS_AND_FUTURE) == rfc_reading(THIS_AND_FUTURE)
    assert [t for t, _, _ in ours(THIS_AND_FUTURE)].count("sync (moved)") == 3


def test_an_occurrence_whose_master_is_not_in_the_object_is_the_event_it_is() -> None:
    """Google sends one occurrence of a series to someone invited to it alone: it was dropped."""
    body = vcalendar(
        *vevent(
            "g",
            "RECURRENCE-ID:20260310T010000Z",
            "DTSTART:20260310T020000Z",
            "DTEND:20260310T030000Z",
            "SUMMARY:one",
        ),
        *vevent(
            "g",
            "RECURRENCE-ID:20260317T010000Z",
            "DTSTART:20260317T010000Z",
            "DTEND:20260317T020000Z",
            "SUMMARY:two",
        ),
    )
    assert ours(body) == [
        ("one", datetime(2026, 3, 10, 2, tzinfo=UTC), datetime(2026, 3, 10, 3, tzinfo=UTC)),
        ("two", datetime(2026, 3, 17, 1, tzinfo=UTC), datetime(2026, 3, 17, 2, tzinfo=UTC)),
    ]


@pytest.mark.parametrize("body", [vcalendar(*RDATES["with a rule"]), THIS_AND_FUTURE], ids=["rdate", "range"])
def test_a_change_to_the_series_writes_no_component_for_the_occurrences_the_object_names(body: str) -> None:
    """The occurrences read from RDATE or a RANGE=THISANDFUTURE change are rows of their own; a
    change of the master's title rewrites the title and adds no override for them (contract §14)."""
    rows = parse_resource_rows(body)
    renamed = [rows[0].evolve(title="renamed"), *rows[1:]]
    patched = patch_object(body, renamed, rows[0].uid or "", datetime(2026, 3, 1, tzinfo=UTC))
    before = Calendar.from_ical(body).walk("VEVENT")
    after = patched.calendar.walk("VEVENT")
    assert len(after) == len(before)
    assert str(after[0]["SUMMARY"]) == "renamed"
    assert [c.get("RDATE") is not None for c in after] == [c.get("RDATE") is not None for c in before]


def test_one_sequence_of_for_the_stored_object_and_the_scheduling_message() -> None:
    """Issue 43 item 5: imip's `sequence_of` raised on a SEQUENCE that is not a number where the
    invitation check's read it as 0; both are now the one in ical/components.py."""
    body = vcalendar(*vevent("s", *GOOD, "SEQUENCE:two"))
    assert imip.sequence_of(Calendar.from_ical(body)) == 0
    only_override = vcalendar(*vevent("o", "RECURRENCE-ID:20260310T010000Z", *GOOD, "SEQUENCE:3"))
    assert imip.sequence_of(Calendar.from_ical(only_override)) == 3
