"""The client's views are the contracts' types: `EventView` and `StubView` show what `EventOut` and
`StubOut` say, field for field with the same types, so no mapper copies a field the view declares
weaker (a stub status as any string) or forgets one (a new event property never reaching a client)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from pydantic import BaseModel

from calagent.contracts.commands import EventOut, StubOut, StubSlots
from calagent.contracts.people import Attendee
from calagent.contracts.turns import EventView, StubView, event_view, stub_view

pytestmark = pytest.mark.unit

START = datetime(2026, 9, 25, 7, 0, tzinfo=UTC)


@pytest.mark.parametrize(("view", "source"), [(EventView, EventOut), (StubView, StubOut)])
def test_a_view_declares_no_field_the_service_types_differently(
    view: type[BaseModel], source: type[BaseModel]
) -> None:
    shared = set(view.model_fields) & set(source.model_fields)
    assert shared, "the view shares no field with the service's type"
    for name in shared:
        assert view.model_fields[name].annotation == source.model_fields[name].annotation, name


def test_an_event_view_carries_every_shown_field_and_nothing_internal() -> None:
    event = EventOut(
        id="e1",
        title="Review",
        start=START,
        end=START.replace(hour=8),
        calendar="Work",
        weekday=5,
        tz="Asia/Shanghai",
        series_id="s1",
        occurrence_start=START,
        recurrence="FREQ=WEEKLY",
        reminder_minutes=10,
        sync_state="rejected",
        uid="u@example.com",
        location="Room 1",
        notes="agenda",
        url="https://example.com/r",
        attendees=(Attendee(email="zhang@example.com", name="Zhang", status="ACCEPTED"),),
        organizer="me@example.com",
        kind="task_block",
        task_id="t1",
    )
    shown = event_view(event).model_dump(mode="json")
    internal = set(EventOut.model_fields) - set(EventView.model_fields)
    # `foreign_calendar`, `outside_text` and `organized_by_user` are whose words the event is
    # (contract §19), for the agent's marks.
    assert internal == {
        "weekday",
        "tz",
        "occurrence_start",
        "foreign_calendar",
        "outside_text",
        "organized_by_user",
    }
    assert set(shown) == set(EventView.model_fields)
    assert shown == event.model_dump(mode="json", exclude=internal)


def test_a_stub_view_shows_the_rule_of_a_repeating_create() -> None:
    stub = StubOut(
        id="s1",
        status="held",
        title="Standup",
        slots=StubSlots(recurrence="FREQ=DAILY"),
        candidates=(date(2026, 9, 25),),
        expires_at=START,
        hold_reason="recurrence_plan",
        next_occurrences=(START,),
    )
    shown = stub_view(stub).model_dump(mode="json")
    assert shown["recurrence"] == "FREQ=DAILY"
    assert shown["status"] == "held" and shown["hold_reason"] == "recurrence_plan"
    assert "slots" not in shown and "conflicts_with" not in shown
