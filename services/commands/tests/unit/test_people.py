"""People, pure: names resolved against contacts (contract §16), and attendees written into the
user's object as a modeled value — only when they change, keeping every parameter of the
attendees nobody touched (contract §14)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from icalendar import Calendar, Component

from calagent.commands.domain.model import Event
from calagent.commands.domain.people import (
    Contact,
    Told,
    Unresolved,
    keep_answers,
    next_sequence,
    resolve_attendees,
)
from calagent.commands.ical.parse import parse_resource
from calagent.commands.ical.render import render_resource
from calagent.contracts.people import Attendee
from calagent.devtools.testing.icalobjects import property_lines, sequence

pytestmark = pytest.mark.unit

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 24, 8, 0, tzinfo=UTC)
CONTACTS = [
    Contact("c1", "张伟", "zhangwei1@example.com", ("小张",)),
    Contact("c2", "张伟", "zhangwei2@example.com"),
    Contact("c3", "Fang Wang", "fang@example.com", ("Wang Fang",)),
]

MEETING = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Apple Inc.//macOS 15//EN\r\n"
    "BEGIN:VEVENT\r\nUID:meeting-1\r\nDTSTAMP:20260901T080000Z\r\nSEQUENCE:2\r\n"
    "DTSTART;TZID=Asia/Shanghai:20260925T100000\r\nDTEND;TZID=Asia/Shanghai:20260925T110000\r\n"
    "SUMMARY:评审\r\nORGANIZER;CN=Me;X-ORG=1:mailto:me@mail.test\r\n"
    "ATTENDEE;CN=Zhang San;PARTSTAT=ACCEPTED;ROLE=CHAIR;X-NUM-GUESTS=0:mailto:zhangsan@example.com\r\n"
    'ATTENDEE;CN="Li, Si";PARTSTAT=TENTATIVE;DELEGATED-FROM="mailto:boss@example.com":mailto:lisi@example.com\r\n'
    "X-CUSTOM:kept\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


def read(body: str) -> Event:
    [event] = parse_resource(body, master_id="m1", user_id="u", calendar="Work", fallback_tz=SHANGHAI)
    return event


def vevent(body: str) -> Component:
    [component] = Calendar.from_ical(body).walk("VEVENT")
    return component


def attendee_lines(body: str) -> dict[str, str]:
    lines = property_lines(vevent(body))["ATTENDEE"]
    return {line[line.lower().rindex("mailto:") :].lower(): line for line in lines}


# ---- resolving names --------------------------------------------------------------------------------


def test_a_name_or_alias_matches_regardless_of_case_and_spaces() -> None:
    assert resolve_attendees([" wang  FANG "], CONTACTS) == (
        Attendee(name="Fang Wang", email="fang@example.com"),
    )
    assert resolve_attendees(["小张"], CONTACTS) == (Attendee(name="张伟", email="zhangwei1@example.com"),)


def test_a_name_of_two_contacts_waits_with_both_as_candidates() -> None:
    found = resolve_attendees(["小张", "张伟"], CONTACTS)
    assert isinstance(found, Unresolved)
    assert found.query == "张伟"
    assert [c.email for c in found.candidates] == ["zhangwei1@example.com", "zhangwei2@example.com"]


def test_an_unknown_name_waits_with_near_names_and_an_address_is_taken_as_written() -> None:
    near = resolve_attendees(["张"], CONTACTS)
    assert isinstance(near, Unresolved) and {c.email for c in near.candidates} == {
        "zhangwei1@example.com",
        "zhangwei2@example.com",
    }
    nobody = resolve_attendees(["赵六"], CONTACTS)
    assert isinstance(nobody, Unresolved) and nobody.candidates == ()
    assert resolve_attendees(["New.Person@Example.org", "FANG@example.com"], CONTACTS) == (
        Attendee(email="New.Person@Example.org"),
        Attendee(name="Fang Wang", email="fang@example.com"),
    )


def test_an_updated_list_keeps_the_answers_already_given() -> None:
    current = (Attendee(name="A", email="a@x.com", status="ACCEPTED"),)
    assert keep_answers((Attendee(email="A@x.com"), Attendee(email="b@x.com")), current) == (
        Attendee(name="A", email="A@x.com", status="ACCEPTED"),
        Attendee(email="b@x.com"),
    )


# ---- attendees in the object ------------------------------------------------------------------------


def test_the_next_message_is_above_everything_the_people_were_sent() -> None:
    assert next_sequence(0, None) == 0  # the first invitation
    assert next_sequence(1, Told(0, cancelled=False)) == 1  # a change after it
    # The object was kept at 0, and a CANCEL at 1 went out when the event was removed.
    assert next_sequence(0, Told(1, cancelled=True)) == 2
    assert next_sequence(5, Told(2, cancelled=False)) == 5


def test_only_a_cancellation_above_the_kept_object_withdrew_the_event() -> None:
    removed = Told(1, cancelled=True)
    assert removed.withdrawn_after(0)
    # A CANCEL of some occurrences or of some people keeps its object at its own sequence.
    assert not removed.withdrawn_after(1)
    assert not Told(3, cancelled=False).withdrawn_after(0)


def test_the_people_of_an_object_are_read_with_their_answers_and_the_organizer() -> None:
    event = read(MEETING)
    assert event.organizer == "me@mail.test"
    assert event.attendees == (
        Attendee(name="Zhang San", email="zhangsan@example.com", status="ACCEPTED"),
        Attendee(name="Li, Si", email="lisi@example.com", status="TENTATIVE"),
    )


def test_nothing_changed_gives_the_object_back_byte_for_byte() -> None:
    assert render_resource([read(MEETING)], "meeting-1", NOW) == MEETING


def test_adding_an_attendee_keeps_every_other_attendee_and_the_organizer_as_written() -> None:
    event = read(MEETING)
    added = event.evolve(attendees=(*event.attendees, Attendee(name="王五", email="wangwu@example.com")))
    body = render_resource([added], "meeting-1", NOW)
    assert body is not None
    before, after = attendee_lines(MEETING), attendee_lines(body)
    for address in ("mailto:zhangsan@example.com", "mailto:lisi@example.com"):
        assert after[address] == before[address]
    new = after["mailto:wangwu@example.com"]
    assert "PARTSTAT=NEEDS-ACTION" in new and "RSVP=TRUE" in new and "CN=王五" in new
    untouched = ("ORGANIZER", "X-CUSTOM", "SUMMARY", "DTSTART", "DTEND")
    assert {k: v for k, v in property_lines(vevent(body)).items() if k in untouched} == {
        k: v for k, v in property_lines(vevent(MEETING)).items() if k in untouched
    }
    assert sequence(vevent(body)) == 3
    assert read(body).attendees == added.attendees


def test_one_changed_answer_or_a_removal_leaves_the_other_attendee_byte_equal() -> None:
    event = read(MEETING)
    zhang, li = event.attendees
    declined = event.evolve(attendees=(zhang.model_copy(update={"status": "DECLINED"}), li))
    body = render_resource([declined], "meeting-1", NOW)
    assert body is not None
    before, after = attendee_lines(MEETING), attendee_lines(body)
    assert after["mailto:lisi@example.com"] == before["mailto:lisi@example.com"]
    changed = after["mailto:zhangsan@example.com"]
    assert "PARTSTAT=DECLINED" in changed and "ROLE=CHAIR" in changed and "X-NUM-GUESTS=0" in changed
    removed = render_resource([event.evolve(attendees=(li,))], "meeting-1", NOW)
    assert removed is not None
    assert attendee_lines(removed) == {"mailto:lisi@example.com": before["mailto:lisi@example.com"]}


def test_a_fresh_event_with_people_is_written_with_organizer_and_attendees() -> None:
    start = datetime(2026, 9, 25, 7, 0, tzinfo=UTC)
    event = Event(
        id="e1",
        user_id="u",
        title="周会",
        start=start,
        end=start.replace(hour=8),
        calendar="工作",
        tz="Asia/Shanghai",
        attendees=(Attendee(name="张三", email="zs@example.com"),),
        organizer="me@mail.test",
    )
    body = render_resource([event], "e1@calagent", NOW)
    assert body is not None
    assert read(body).attendees == event.attendees and read(body).organizer == "me@mail.test"
