"""Calendar objects as the sync sends and reads them, and passwords at rest: pure code, no server."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from cryptography.fernet import Fernet

from calagent.commands.caldav.credentials import CredentialsError, Vault, load_key
from calagent.commands.domain.model import Event
from calagent.commands.ical.parse import fingerprint, override_id, parse_resource
from calagent.commands.ical.render import render_resource

pytestmark = pytest.mark.unit

SHANGHAI = ZoneInfo("Asia/Shanghai")
STAMP = datetime(2026, 9, 24, tzinfo=UTC)


def series() -> list[Event]:
    master = Event(
        id="m1",
        user_id="u",
        title="站会",
        start=datetime(2026, 9, 28, 1, 0, tzinfo=UTC),
        end=datetime(2026, 9, 28, 1, 30, tzinfo=UTC),
        calendar="工作",
        tz="Asia/Shanghai",
        rrule="FREQ=WEEKLY;BYDAY=MO;COUNT=5",
        exdates=(datetime(2026, 10, 5, 1, 0, tzinfo=UTC),),
        reminder_minutes=10,
    )
    moved = Event(
        id="o1",
        user_id="u",
        title="站会（推迟）",
        start=datetime(2026, 10, 12, 2, 0, tzinfo=UTC),
        end=datetime(2026, 10, 12, 2, 30, tzinfo=UTC),
        calendar="工作",
        tz="Asia/Shanghai",
        series_id="m1",
        recurrence_id=datetime(2026, 10, 12, 1, 0, tzinfo=UTC),
    )
    return [master, moved]


def test_a_series_with_an_exception_and_an_override_reads_back_as_it_was_written() -> None:
    body = render_resource(series(), "m1@calagent", STAMP)
    assert body is not None
    assert body.count("UID:m1@calagent") == 2  # master and override share one UID
    back = parse_resource(body, master_id="m1", user_id="u", calendar="工作", fallback_tz=SHANGHAI)
    master, override = back
    assert (master.id, master.tz, master.reminder_minutes) == ("m1", "Asia/Shanghai", 10)
    assert master.exdates == (datetime(2026, 10, 5, 1, 0, tzinfo=UTC),)
    assert (override.series_id, override.recurrence_id) == ("m1", datetime(2026, 10, 12, 1, 0, tzinfo=UTC))
    assert override.id == override_id("m1", datetime(2026, 10, 12, 1, 0, tzinfo=UTC))
    again = render_resource(back, "m1@calagent", STAMP)
    assert again is not None
    assert fingerprint(
        parse_resource(again, master_id="m1", user_id="u", calendar="工作", fallback_tz=SHANGHAI)
    ) == fingerprint(back)


def test_a_resource_keeps_the_uid_the_calendar_app_gave_it() -> None:
    body = render_resource(series()[:1], "ABC-123-from-the-phone", STAMP)
    assert body is not None
    assert "UID:ABC-123-from-the-phone" in body
    assert "@calagent" not in body


def test_nothing_is_rendered_for_a_resource_without_rows() -> None:
    assert render_resource([], "x@calagent", STAMP) is None


def test_a_utc_until_is_read_on_the_series_wall_clock_and_floating_times_in_the_fallback_zone() -> None:
    body = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//app//EN\r\nBEGIN:VEVENT\r\nUID:x\r\n"
        "DTSTAMP:20260924T000000Z\r\nDTSTART:20260928T090000\r\nDTEND:20260928T100000\r\n"
        "RRULE:FREQ=DAILY;UNTIL=20261001T010000Z\r\nSUMMARY:floating\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    [master] = parse_resource(body, master_id="m", user_id="u", calendar="c", fallback_tz=SHANGHAI)
    assert master.start == datetime(2026, 9, 28, 1, 0, tzinfo=UTC)
    assert master.rrule == "FREQ=DAILY;UNTIL=20261001T090000"


def test_a_cancelled_override_is_an_excluded_occurrence() -> None:
    body = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//app//EN\r\n"
        "BEGIN:VEVENT\r\nUID:x\r\nDTSTAMP:20260924T000000Z\r\nDTSTART:20260928T010000Z\r\n"
        "DTEND:20260928T020000Z\r\nRRULE:FREQ=DAILY;COUNT=3\r\nSUMMARY:s\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nUID:x\r\nDTSTAMP:20260924T000000Z\r\nRECURRENCE-ID:20260929T010000Z\r\n"
        "DTSTART:20260929T010000Z\r\nDTEND:20260929T020000Z\r\nSTATUS:CANCELLED\r\nSUMMARY:s\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    rows = parse_resource(body, master_id="m", user_id="u", calendar="c", fallback_tz=SHANGHAI)
    assert len(rows) == 1
    assert rows[0].exdates == (datetime(2026, 9, 29, 1, 0, tzinfo=UTC),)


def test_an_event_says_whether_it_holds_time_each_occurrence_for_itself() -> None:
    """TRANSP:TRANSPARENT is an event marked free (RFC 5545 §3.8.2.7; absent: OPAQUE, all-day
    events too); STATUS:TENTATIVE one not yet certain. An override says so for itself."""
    body = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//app//EN\r\n"
        "BEGIN:VEVENT\r\nUID:x\r\nDTSTAMP:20260924T000000Z\r\nDTSTART;VALUE=DATE:20260928\r\n"
        "RRULE:FREQ=DAILY;COUNT=3\r\nTRANSP:TRANSPARENT\r\nSUMMARY:s\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nUID:x\r\nDTSTAMP:20260924T000000Z\r\nRECURRENCE-ID;VALUE=DATE:20260929\r\n"
        "DTSTART;VALUE=DATE:20260929\r\nSTATUS:TENTATIVE\r\nSUMMARY:s\r\nEND:VEVENT\r\n"
        "END:VCALENDAR\r\n"
    )
    master, override = parse_resource(body, master_id="m", user_id="u", calendar="c", fallback_tz=SHANGHAI)
    assert (master.all_day, master.transparent, master.tentative) == (True, True, False)
    assert (override.all_day, override.transparent, override.tentative) == (True, False, True)
    plain = body.replace("TRANSP:TRANSPARENT\r\n", "").replace("STATUS:TENTATIVE\r\n", "")
    assert [
        (r.transparent, r.tentative)
        for r in parse_resource(plain, master_id="m", user_id="u", calendar="c", fallback_tz=SHANGHAI)
    ] == [(False, False), (False, False)]


def test_a_sealed_password_opens_only_with_its_key() -> None:
    vault = Vault(Fernet.generate_key())
    token = vault.seal("app-password-1234")
    assert b"app-password-1234" not in token
    assert vault.open(token) == "app-password-1234"
    with pytest.raises(CredentialsError):
        Vault(Fernet.generate_key()).open(token)


def test_without_a_configured_key_one_is_made_in_the_data_dir_readable_by_its_owner_only(
    tmp_path: Path,
) -> None:
    key = load_key(None, tmp_path)
    path = tmp_path / "credentials.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(None, tmp_path) == key  # the same key next time
    assert load_key("configured", tmp_path) == b"configured"


def test_an_object_written_back_says_the_busy_or_free_its_row_says_now() -> None:
    """A block turned free or busy (contract §21) after its object reached the server: the kept
    object is patched, and TRANSP follows the row (absent again when busy, as first written)."""
    [master] = series()[:1]
    busy = render_resource([master], "m1@calagent", STAMP)
    assert busy is not None and "TRANSP" not in busy

    def read(body: str) -> Event:
        [row] = parse_resource(body, master_id="m1", user_id="u", calendar="工作", fallback_tz=SHANGHAI)
        return row

    freed = render_resource([read(busy).evolve(ical=busy, transparent=True)], "m1@calagent", STAMP)
    assert freed is not None and read(freed).transparent is True
    again = render_resource([read(freed).evolve(ical=freed, transparent=False)], "m1@calagent", STAMP)
    assert again is not None and read(again).transparent is False and "TRANSP" not in again
