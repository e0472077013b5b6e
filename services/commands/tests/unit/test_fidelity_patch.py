"""An object from the user's calendar app is patched, not rebuilt (contract §14): pure code, no server.

Each test reads an object into rows (as the sync does), changes the rows (as a confirmed change
does), writes the object back and compares it property by property with the original.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icalendar import Calendar

from calagent.commands.domain.model import Event
from calagent.commands.ical.parse import parse_resource
from calagent.commands.ical.render import render_ics, render_resource
from calagent.devtools.testing.examples import examples
from calagent.devtools.testing.icalobjects import (
    STAMPS,
    alarm_lines,
    property_lines,
    rich_events,
    sequence,
    vevents,
)

pytestmark = pytest.mark.unit

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 24, 8, 0, tzinfo=UTC)

REVIEW = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Apple Inc.//macOS 15//EN\r\nCALSCALE:GREGORIAN\r\n"
    "BEGIN:VTIMEZONE\r\nTZID:China Standard Time\r\nBEGIN:STANDARD\r\nDTSTART:16010101T000000\r\n"
    "TZOFFSETFROM:+0800\r\nTZOFFSETTO:+0800\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n"
    "BEGIN:VEVENT\r\nUID:7C1A-review@example.com\r\nDTSTAMP:20260901T080000Z\r\n"
    "CREATED:20260801T080000Z\r\nLAST-MODIFIED:20260901T080000Z\r\nSEQUENCE:3\r\n"
    "DTSTART;TZID=China Standard Time:20260925T100000\r\nDURATION:PT1H30M\r\n"
    "SUMMARY;LANGUAGE=zh-CN:外部评审\r\nLOCATION:会议室 A\\, 3楼\r\n"
    "DESCRIPTION:议程：\\n1. 设计\\n2. 预算\r\nURL;VALUE=URI:https://meet.example.com/r/7c1a?x=1&y=2\r\n"
    "CLASS:CONFIDENTIAL\r\nTRANSP:OPAQUE\r\n"
    'ORGANIZER;CN="Li, Si":mailto:lisi@example.com\r\n'
    "ATTENDEE;CN=Zhang San;PARTSTAT=ACCEPTED:mailto:zhangsan@example.com\r\n"
    "ATTACH;FMTTYPE=application/pdf:https://files.example.com/agenda.pdf\r\n"
    'X-CUSTOM;X-PARAM="semi;colon":value\\, with\\; odd: chars\r\n'
    "BEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER:-PT15M\r\nDESCRIPTION:Reminder\r\nUID:A1\r\nEND:VALARM\r\n"
    "BEGIN:VALARM\r\nACTION:AUDIO\r\nTRIGGER;RELATED=END:PT0S\r\nEND:VALARM\r\n"
    "END:VEVENT\r\nEND:VCALENDAR\r\n"
)

SERIES = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Mozilla.org/NONSGML Mozilla Calendar V1.1//EN\r\n"
    "BEGIN:VEVENT\r\nUID:weekly-sync\r\nDTSTAMP:20260901T080000Z\r\nSEQUENCE:1\r\n"
    "DTSTART;TZID=Asia/Shanghai:20260925T100000\r\nDTEND;TZID=Asia/Shanghai:20260925T110000\r\n"
    "RRULE:FREQ=WEEKLY;COUNT=6\r\nSUMMARY:周会\r\nLOCATION:三楼\r\n"
    "ATTENDEE;CN=Zhang San:mailto:zhangsan@example.com\r\nX-MOZ-GENERATION:4\r\n"
    "BEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER:-PT10M\r\nDESCRIPTION:周会\r\nEND:VALARM\r\n"
    "END:VEVENT\r\n"
    "BEGIN:VEVENT\r\nUID:weekly-sync\r\nDTSTAMP:20260901T080000Z\r\nSEQUENCE:1\r\n"
    "RECURRENCE-ID;TZID=Asia/Shanghai:20261002T100000\r\n"
    "DTSTART;TZID=Asia/Shanghai:20261002T140000\r\nDTEND;TZID=Asia/Shanghai:20261002T150000\r\n"
    "SUMMARY:周会\r\nLOCATION:线上\r\nX-MOZ-GENERATION:4\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


def read(body: str, master_id: str = "m1") -> list[Event]:
    return parse_resource(body, master_id=master_id, user_id="u", calendar="Work", fallback_tz=SHANGHAI)


def test_a_move_and_a_rename_rewrite_only_start_and_title_in_the_objects_own_forms() -> None:
    [event] = read(REVIEW)
    assert (event.uid, event.location, event.url) == (
        "7C1A-review@example.com",
        "会议室 A, 3楼",
        "https://meet.example.com/r/7c1a?x=1&y=2",
    )
    assert event.notes == "议程：\n1. 设计\n2. 预算"
    moved = event.evolve(title="外部评审（改期）", start=event.start + timedelta(days=5, hours=6))
    moved = moved.evolve(end=moved.start + timedelta(minutes=90))
    body = render_resource([moved], "7C1A-review@example.com", NOW)
    assert body is not None
    before, after = vevents(REVIEW)[""], vevents(body)[""]
    touched = {"DTSTART", "SUMMARY", *STAMPS}
    assert property_lines(after, touched) == property_lines(before, touched)
    assert alarm_lines(after) == alarm_lines(before)
    # The start stays in the app's own zone name; the length stays a DURATION, untouched.
    assert property_lines(after)["DTSTART"] == ["DTSTART;TZID=China Standard Time:20260930T160000"]
    assert property_lines(after)["SUMMARY"] == ["SUMMARY;LANGUAGE=zh-CN:外部评审（改期）"]
    assert sequence(after) == 4
    assert after.decoded("LAST-MODIFIED") == NOW
    assert "CATEGORIES" not in after
    assert b"China Standard Time" in Calendar.from_ical(body).walk("VTIMEZONE")[0].to_ical()


def test_rows_that_say_what_the_object_says_give_back_the_object_byte_for_byte() -> None:
    rows = read(SERIES)
    assert render_resource(rows, "weekly-sync", NOW) == SERIES


def test_a_slot_both_excluded_and_cancelled_is_left_as_the_app_wrote_it() -> None:
    body = SERIES.replace(
        "RRULE:FREQ=WEEKLY;COUNT=6\r\n",
        "RRULE:FREQ=WEEKLY;COUNT=6\r\nEXDATE;TZID=Asia/Shanghai:20261016T100000\r\n",
    ).replace(
        "END:VCALENDAR",
        "BEGIN:VEVENT\r\nUID:weekly-sync\r\nDTSTAMP:20260901T080000Z\r\n"
        "RECURRENCE-ID;TZID=Asia/Shanghai:20261016T100000\r\nDTSTART;TZID=Asia/Shanghai:20261016T100000\r\n"
        "STATUS:CANCELLED\r\nEND:VEVENT\r\nEND:VCALENDAR",
    )
    assert render_resource(read(body), "weekly-sync", NOW) == body


def test_a_new_reminder_time_changes_that_alarm_and_leaves_the_other() -> None:
    [event] = read(REVIEW)
    assert event.reminder_minutes == 15
    body = render_resource([event.evolve(reminder_minutes=30)], "7C1A-review@example.com", NOW)
    assert body is not None
    before, after = vevents(REVIEW)[""], vevents(body)[""]
    assert property_lines(after, STAMPS) == property_lines(before, STAMPS)
    first, second = alarm_lines(after)
    assert first["TRIGGER"] == ["TRIGGER:-PT30M"]
    assert {k: v for k, v in first.items() if k != "TRIGGER"} == {
        k: v for k, v in alarm_lines(before)[0].items() if k != "TRIGGER"
    }
    assert second == alarm_lines(before)[1]


def test_a_place_and_notes_changed_are_rewritten_and_a_cleared_url_is_removed() -> None:
    [event] = read(REVIEW)
    body = render_resource(
        [event.evolve(location="会议室 B", notes="新议程", url=None)], "7C1A-review@example.com", NOW
    )
    assert body is not None
    after = vevents(body)[""]
    assert (str(after["LOCATION"]), str(after["DESCRIPTION"]), "URL" in after) == (
        "会议室 B",
        "新议程",
        False,
    )


def test_an_occurrence_changed_alone_adds_an_override_made_from_the_master_and_leaves_the_rest() -> None:
    master, moved = read(SERIES)
    slot = datetime(2026, 10, 9, 2, 0, tzinfo=UTC)
    override = Event(
        id="new-override",
        user_id="u",
        title="周会",
        start=slot + timedelta(hours=5),
        end=slot + timedelta(hours=6),
        calendar="Work",
        tz="Asia/Shanghai",
        series_id=master.id,
        recurrence_id=slot,
        location=master.location,
        reminder_minutes=master.reminder_minutes,
    )
    assert moved.recurrence_id is not None
    body = render_resource([master, moved, override], "weekly-sync", NOW)
    assert body is not None
    before, after = vevents(SERIES), vevents(body)
    assert property_lines(after[""]) == property_lines(before[""])
    assert property_lines(after[moved.recurrence_id.isoformat()]) == property_lines(
        before[moved.recurrence_id.isoformat()]
    )
    added = after[slot.isoformat()]
    assert property_lines(added)["RECURRENCE-ID"] == ["RECURRENCE-ID;TZID=Asia/Shanghai:20261009T100000"]
    assert property_lines(added)["DTSTART"] == ["DTSTART;TZID=Asia/Shanghai:20261009T150000"]
    kept = {"ATTENDEE", "X-MOZ-GENERATION", "LOCATION", "SUMMARY", "UID"}
    assert {k: v for k, v in property_lines(added).items() if k in kept} == {
        k: v for k, v in property_lines(before[""]).items() if k in kept
    }
    assert "RRULE" not in added and alarm_lines(added) == alarm_lines(before[""])


def test_a_series_split_off_another_is_a_new_event_with_its_own_uid() -> None:
    master, _ = read(SERIES)
    tail = master.evolve(id="tail", uid="tail@calagent", rrule="FREQ=WEEKLY;COUNT=2", start=master.start)
    body = render_resource([tail], "tail@calagent", NOW)
    assert body is not None
    after = vevents(body)
    assert list(after) == [""]  # the override stayed with the series it belongs to
    assert str(after[""]["UID"]) == "tail@calagent"
    assert property_lines(after[""], {"UID", "RRULE", *STAMPS}) == property_lines(
        vevents(SERIES)[""], {"UID", "RRULE", *STAMPS}
    )


def test_the_feed_carries_an_imported_event_under_its_own_uid_with_place_notes_and_url() -> None:
    [event] = read(REVIEW)
    feed = Calendar.from_ical(render_ics([event], SHANGHAI, NOW))
    [vevent] = feed.walk("VEVENT")
    assert str(vevent["UID"]) == "7C1A-review@example.com"
    assert (str(vevent["LOCATION"]), str(vevent["URL"])) == (
        "会议室 A, 3楼",
        "https://meet.example.com/r/7c1a?x=1&y=2",
    )
    assert [str(z["TZID"]) for z in feed.walk("VTIMEZONE")] == ["China Standard Time"]


def test_an_event_of_the_assistant_is_written_with_its_place_notes_and_uid() -> None:
    event = Event(
        id="e1",
        user_id="u",
        title="午饭",
        start=datetime(2026, 9, 25, 4, 0, tzinfo=UTC),
        end=datetime(2026, 9, 25, 5, 0, tzinfo=UTC),
        calendar="Personal",
        tz="Asia/Shanghai",
        uid="e1@calagent",
        location="食堂",
        notes="带饭卡",
    )
    body = render_resource([event], "e1@calagent", NOW)
    assert body is not None
    [back] = read(body, "e1")
    assert (back.uid, back.location, back.notes) == ("e1@calagent", "食堂", "带饭卡")


FUZZ_EXAMPLES = int(os.environ.get("CALAGENT_FIDELITY_FUZZ_EXAMPLES", "200"))


@settings(max_examples=examples(FUZZ_EXAMPLES), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=rich_events(uid="fuzz@example.com"), shift=st.integers(min_value=-3, max_value=3))
def test_a_moved_event_keeps_every_property_nobody_asked_to_change(body: str, shift: int) -> None:
    [event] = read(body)
    moved = event.evolve(
        start=event.start + timedelta(hours=shift or 1), end=event.end + timedelta(hours=shift or 1)
    )
    written = render_resource([moved], "fuzz@example.com", NOW)
    assert written is not None
    before, after = vevents(body)[""], vevents(written)[""]
    touched = {"DTSTART", "DTEND", *STAMPS}
    assert property_lines(after, touched) == property_lines(before, touched)
    assert alarm_lines(after) == alarm_lines(before)
    assert sequence(after) == sequence(before) + 1
    [back] = read(written)
    assert (back.start, back.end, back.title, back.location, back.notes, back.url) == (
        moved.start,
        moved.end,
        event.title,
        event.location,
        event.notes,
        event.url,
    )
