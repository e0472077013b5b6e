"""The receiver's basic checks on a message (`read_mail`, pure): one From equal to the envelope's
MAIL FROM, a Message-ID, a parseable calendar where one is claimed."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from calagent.gateway.mailbox import parse_listen, read_mail

pytestmark = pytest.mark.unit

BOSS = "boss@example.com"
CALENDAR = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\nMETHOD:REQUEST\r\nBEGIN:VEVENT\r\n"
    "UID:1@example.com\r\nDTSTAMP:20260924T010000Z\r\nDTSTART:20260928T060000Z\r\n"
    "SUMMARY:Review\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


def mail(
    *, sender: str | None = BOSS, message_id: str | None = "<m1@example.com>", calendar: str | None = None
) -> EmailMessage:
    message = EmailMessage()
    if sender is not None:
        message["From"] = sender
    message["To"] = "me@mail.test"
    message["Subject"] = "Fwd: lunch"
    if message_id is not None:
        message["Message-ID"] = message_id
    message.set_content("lunch on friday at noon\n")
    if calendar is not None:
        message.add_alternative(calendar, subtype="calendar", params={"method": "REQUEST"})
    return message


def test_a_well_formed_message_passes_with_its_calendar_and_its_words() -> None:
    facts = read_mail(bytes(mail(calendar=CALENDAR)), BOSS)
    assert facts.defect is None
    assert facts.from_address == BOSS and facts.message_id == "<m1@example.com>"
    assert facts.calendar is not None and "UID:1@example.com" in facts.calendar
    assert "Fwd: lunch" in facts.text and "lunch on friday" in facts.text


def test_a_from_that_is_not_the_envelope_sender_fails() -> None:
    assert read_mail(bytes(mail()), "mallory@example.com").defect == "from_not_envelope_sender"
    assert read_mail(bytes(mail(sender="Boss <BOSS@example.com>")), BOSS).defect is None


def test_no_from_or_two_froms_fail() -> None:
    assert read_mail(bytes(mail(sender=None)), BOSS).defect == "no_single_from"
    two = bytes(mail()).replace(b"From: boss@example.com", b"From: boss@example.com\nFrom: other@example.com")
    assert read_mail(two, BOSS).defect == "no_single_from"


def test_a_message_without_an_id_fails_and_is_still_named_the_same_each_time() -> None:
    raw = bytes(mail(message_id=None))
    first, again = read_mail(raw, BOSS), read_mail(raw, BOSS)
    assert first.defect == "no_message_id"
    assert first.message_id == again.message_id


def test_a_calendar_part_that_does_not_parse_fails() -> None:
    facts = read_mail(bytes(mail(calendar="BEGIN:VCALENDAR\r\nthis is not iCalendar\r\n")), BOSS)
    assert facts.defect == "unparseable_calendar" and facts.calendar is None


def test_the_listen_setting_is_host_and_port() -> None:
    assert parse_listen("127.0.0.1:2525") == ("127.0.0.1", 2525)
    assert parse_listen("[::1]:25") == ("::1", 25)
    with pytest.raises(ValueError):
        parse_listen("2525")
