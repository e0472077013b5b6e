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


def test_what_the_step_after_a_write_reacts_to_is_recorded_by_the_writes_themselves() -> None:
    effects = Effects()
    block = PLAIN.evolve(id="block", task_id="task")
    effects.event_written(block)
    # A block written (placed, or moved by a re-plan) leaves TRANSP to decide but lands nothing.
    assert (effects.landed_of("alice"), effects.unsettled) == ((), {"alice"})
    effects.blocks_settled("alice")
    effects.event_written(PLAIN)
    effects.event_written(PLAIN.evolve(title="again"))  # the last version written counts, once
    assert effects.landed_of("alice") == (PLAIN.evolve(title="again"),) and effects.unsettled == {"alice"}
    effects.row_deleted("alice", "plain", None, None, None)
    assert effects.landed_of("alice") == ()
    # What a sync wrote by its own statements; a task written; a stub ended.
    effects.synced("bob", [PLAIN.evolve(user_id="bob"), block.evolve(user_id="bob")])
    effects.task_written("carol", "t1")
    effects.stub_ended("dave")
    assert effects.landed_of("bob") == (PLAIN.evolve(user_id="bob"),)
    assert effects.unsettled == {"alice", "bob", "carol"} and effects.stubs_ended == {"dave"}
