"""A pending command's payload at the storage boundary: each kind round-trips, rows written before
a key existed read as they always did, and a payload its kind does not have is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from calagent.commands.domain.changes import asked_of, master_values, own_values
from calagent.commands.domain.model import Event
from calagent.commands.domain.payloads import (
    ChangeAfter,
    ChangeRequest,
    HeldChange,
    HeldInvitation,
    HeldPlan,
    PayloadKindError,
    payload_json,
    payload_of,
)
from calagent.commands.views import event_out
from calagent.contracts.commands import ChangeOut, PlanOut
from calagent.contracts.people import Attendee, InvitationOut
from calagent.contracts.tools import UpdateSchedule

pytestmark = pytest.mark.unit

SHANGHAI = ZoneInfo("Asia/Shanghai")
START = datetime(2026, 9, 25, 6, 0, tzinfo=UTC)
END = datetime(2026, 9, 25, 7, 0, tzinfo=UTC)


def _event(**changes: Any) -> Event:
    return Event(id="e1", user_id="alice", title="牙医", start=START, end=END, calendar="personal").evolve(
        **changes
    )


def _view() -> ChangeOut:
    before = event_out(_event(), SHANGHAI)
    after = event_out(_event(start=START.replace(hour=8), end=END.replace(hour=9)), SHANGHAI)
    return ChangeOut(action="update", scope="this", before=before, after=after)


def _change() -> HeldChange:
    moved = _event(
        start=START.replace(hour=8),
        end=END.replace(hour=9),
        attendees=(Attendee(name="Bob", email="bob@example.com"),),
        organizer="me@example.com",
    )
    return HeldChange(
        view=_view(),
        action="update",
        scope="following",
        row_id="m1",
        master_id="m1",
        occurrence_start=START,
        after=ChangeAfter.of(moved, {"time", "attendees", "organizer"}),
    )


def test_a_held_change_round_trips_with_its_moments_as_iso_text() -> None:
    change = _change().model_copy(
        update={
            "version": "v1",
            "request": ChangeRequest(
                action="update", event_id="m1", update=UpdateSchedule(event_id="m1", time="16:00")
            ),
        }
    )
    stored = payload_json("change", change)
    assert stored is not None
    assert stored["occurrence_start"] == "2026-09-25T06:00:00+00:00"
    assert stored["after"]["start"] == "2026-09-25T08:00:00+00:00"
    assert stored["after"]["asked"] == ["attendees", "organizer", "time"]
    assert stored["version"] == "v1" and stored["request"]["update"]["time"] == "16:00"
    back = payload_of("change", stored)
    assert back == change
    assert isinstance(back, HeldChange) and back.bound
    assert back.after is not None and back.after.attendees[0].email == "bob@example.com"


def test_a_plan_and_an_invitation_round_trip() -> None:
    plan = HeldPlan(
        plan=PlanOut(id="p1", trigger="每周一", steps=("提醒我",), status="offered", created_at=START)
    )
    invitation = HeldInvitation(
        invitation=InvitationOut(
            method="REQUEST",
            uid="u1@example.com",
            sequence=2,
            organizer="carol@example.com",
            title="Review",
            start=START,
            end=END,
        ),
        ical="BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n",
        attendee="alice@example.com",
    )
    assert payload_of("plan", payload_json("plan", plan)) == plan
    assert payload_of("invitation", payload_json("invitation", invitation)) == invitation
    assert payload_of("create", payload_json("create", None)) is None
    assert payload_of("change", None) is None  # a change stub still asking who to invite


# A change as rows held before the offer was bound and before place, address, people and what was
# asked were recorded: the keys as that writer stored them.
OLD_CHANGE: dict[str, Any] = {
    "view": _view().model_dump(mode="json"),
    "action": "update",
    "scope": "all",
    "row_id": "m1",
    "master_id": "m1",
    "occurrence_start": "2026-09-25T06:00:00+00:00",
    "after": {
        "title": "牙医（改）",
        "start": "2026-09-25T08:00:00+00:00",
        "end": "2026-09-25T10:00:00+00:00",
        "all_day": False,
        "calendar": "personal",
        "reminder_minutes": None,
    },
}


def test_an_old_change_row_reads_as_it_always_did_and_is_written_back_as_it_was() -> None:
    change = payload_of("change", OLD_CHANGE)
    assert isinstance(change, HeldChange)
    assert not change.bound and change.request is None
    assert change.after is not None
    assert change.after.start == datetime(2026, 9, 25, 8, tzinfo=UTC)
    # What it lacks is left as the event has it; what it shows is applied in full.
    assert own_values(change.after) == {
        "title": "牙医（改）",
        "all_day": False,
        "calendar": "personal",
        "reminder_minutes": None,
    }
    assert "duration" in asked_of(change.after)
    assert master_values(_event(), change.after)["duration"] == change.after.end - change.after.start
    assert payload_json("change", change) == OLD_CHANGE


def test_a_sync_conflict_leaves_people_alone_but_clears_a_place_it_removed() -> None:
    after = {**OLD_CHANGE["after"], "location": None, "url": None}
    change = payload_of("change", {**OLD_CHANGE, "after": after})
    assert isinstance(change, HeldChange) and change.after is not None
    values = own_values(change.after)
    assert values["location"] is None and "attendees" not in values and "organizer" not in values


@pytest.mark.parametrize(
    ("kind", "stored"),
    [
        ("change", {**OLD_CHANGE, "scope": "sometimes"}),
        ("change", {**OLD_CHANGE, "scpoe": "all"}),
        ("change", {**OLD_CHANGE, "after": {**OLD_CHANGE["after"], "start": "next tuesday"}}),
        ("change", {**OLD_CHANGE, "after": {**OLD_CHANGE["after"], "start": "2026-09-25T08:00:00"}}),
        ("change", {**OLD_CHANGE, "after": {**OLD_CHANGE["after"], "asked": ["titel"]}}),
        ("change", {**OLD_CHANGE, "after": None}),  # an update without the event after it
        ("change", {k: v for k, v in OLD_CHANGE.items() if k != "row_id"}),
        ("plan", {"plan": {"id": "p1"}}),
        ("plan", OLD_CHANGE),
        ("invitation", {"ical": "BEGIN:VCALENDAR", "attendee": "a@example.com"}),
    ],
)
def test_a_misspelt_missing_or_mistyped_key_is_refused(kind: str, stored: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        payload_of(kind, stored)


def test_a_kind_without_that_payload_is_refused_both_ways() -> None:
    with pytest.raises(PayloadKindError):
        payload_of("reminder", OLD_CHANGE)
    with pytest.raises(PayloadKindError):
        payload_of("create", OLD_CHANGE)
    with pytest.raises(PayloadKindError):
        payload_json("plan", _change())
