"""A series created on a day its rule does not give (a Thursday with BYDAY=MO): the engine's first
occurrence is the next Monday (dateutil does not count DTSTART off the rule; the feed writes that
Monday as DTSTART). The series is therefore stored from that Monday, and the id the create answers
with names a real occurrence."""

from __future__ import annotations

from typing import Any

import pytest

from calagent.contracts.commands import MergeStub, PrepareChange, PrepareOrCreate
from calagent.contracts.envelope import Envelope
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import PrepareOrCreateSchedule

from .conftest import NOW

pytestmark = pytest.mark.unit


def env() -> Envelope:
    return Envelope(turn_id="t", user_id="alice", conversation_id="c", occurred_at=NOW, tz="Asia/Shanghai")


async def test_the_id_a_series_create_answers_with_can_be_changed(harness: Any) -> None:
    held = await harness.service.execute(
        PrepareOrCreate(
            envelope=env(),
            idempotency_key="k1",
            args=PrepareOrCreateSchedule(
                title="sync", date="2026-10-22", time="09:00", recurrence="FREQ=WEEKLY;BYDAY=MO"
            ),
        )
    )
    assert held.stub is not None
    created = await harness.service.execute(
        MergeStub(
            envelope=env(), idempotency_key="k2", command_id=held.stub.id, patch=SlotPatch(), confirm=True
        )
    )
    assert created.status == "created"
    assert created.event is not None
    change = await harness.service.execute(
        PrepareChange(
            envelope=env(), idempotency_key="k3", action="delete", event_id=created.event.id, scope="all"
        )
    )
    assert change.error is None, change.error
    assert change.status == "held"
