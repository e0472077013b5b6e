"""What a transaction's writes record for their commit (`domain/effects.py`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from calagent.commands.domain.effects import Effects
from calagent.commands.domain.model import Event
from calagent.contracts.people import Attendee

pytestmark = pytest.mark.unit

START = datetime(2026, 9, 24, 9, tzinfo=UTC)


PLAIN = Event(
    id="plain", user_id="alice", title="t", start=START, end=START + timedelta(hours=1), calendar="c"
)


def test_a_write_touches_its_resource_and_only_a_meeting_may_invite() -> None:
    effects = Effects()
    effects.event_written(PLAIN)
    effects.event_written(PLAIN.evolve(id="meeting", attendees=(Attendee(email="bob@example.com"),)))
    effects.event_written(PLAIN.evolve(id="override", series_id="series"))
    assert effects.touched == {"alice": {"plain", "meeting", "series"}}
    assert effects.invited == {"alice": {"meeting", "series"}}


def test_a_deleted_organized_object_is_kept_for_its_cancel() -> None:
    effects = Effects()
    effects.row_deleted("alice", "ev", None, "alice@example.com", "BEGIN:VCALENDAR")
    effects.row_deleted("alice", "ov", "ev", "alice@example.com", None)
    effects.row_deleted("alice", "solo", None, None, None)
    assert effects.touched == {"alice": {"ev", "solo"}}
    assert effects.invited == {"alice": {"ev"}}
    assert effects.deleted_objects == {"ev": ("alice@example.com", "BEGIN:VCALENDAR")}


def test_whom_to_wake_names_each_user_once_deliveries_first() -> None:
    effects = Effects()
    effects.mail_queued("bob")
    effects.mail_queued("alice")
    effects.mail_queued("bob")
    effects.deliveries_queued(("alice", "carol"))
    assert effects.to_wake() == ("alice", "carol", "bob")
