"""The recorder's handlers as wired on the bus, on FastStream's in-memory broker (no server, no
database): a record reaches the repository and is acked; a repository failure is nacked for
redelivery, not terminated. The same paths against real NATS and PostgreSQL are in
`test_evalrec_recording.py`."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from faststream.nats.message import NatsMessage

from calagent.contracts import wire
from calagent.contracts.evalrec import Timeline, TimelineRequest
from calagent.contracts.turns import TurnRecord
from calagent.evalrec.app import create_app
from calagent.evalrec.domain.report import TurnFacts
from calagent.evalrec.domain.usage import UsageFact
from calagent.runtime.bus import Bus
from calagent.runtime.clock import FrozenClock
from calagent.runtime.settings import Settings

from .conftest import make_record

pytestmark = pytest.mark.unit

NOW = datetime(2026, 9, 24, 3, 0, tzinfo=UTC)


class FakeRepository:
    def __init__(self, *, down: bool = False) -> None:
        self.down = down
        self.turns: list[TurnRecord] = []

    async def save_turn(self, record: TurnRecord, recorded_at: datetime) -> bool:
        if self.down:
            raise OSError("database unreachable")
        self.turns.append(record)
        return True

    async def timeline(self, turn_id: str, user_id: str | None = None) -> Timeline | None:
        if turn_id != "known":
            return None
        return Timeline(turn_id=turn_id, total_ms=12.0, segments=())

    async def recent_turns(self, max_turns: int) -> list[TurnFacts]:
        return []

    async def usage(self, since: date, user_id: str | None) -> list[UsageFact]:
        return []


def wired(repository: FakeRepository) -> Bus:
    app = create_app(Settings(), FrozenClock(NOW))
    app.repository = repository
    bus = Bus("nats://unused", app.name)
    app.wire(bus)
    return bus


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    async def ack(self: NatsMessage) -> None:
        calls.append("ack")

    async def nack(self: NatsMessage, delay: float | None = None) -> None:
        calls.append(f"nack {delay}")

    async def reject(self: NatsMessage) -> None:
        calls.append("term")

    monkeypatch.setattr(NatsMessage, "ack", ack)
    monkeypatch.setattr(NatsMessage, "nack", nack)
    monkeypatch.setattr(NatsMessage, "reject", reject)
    return calls


async def test_a_record_is_saved_and_acked(settled: list[str]) -> None:
    repository = FakeRepository()
    bus = wired(repository)
    async with bus.in_memory():
        await bus.js_publish(wire.TURN_RECORDED, make_record("h-1"))
    assert [r.envelope.turn_id for r in repository.turns] == ["h-1"]
    assert settled == ["ack"]


async def test_a_database_failure_is_nacked_for_redelivery(settled: list[str]) -> None:
    bus = wired(FakeRepository(down=True))
    async with bus.in_memory():
        await bus.js_publish(wire.TURN_RECORDED, make_record("h-2"))
    assert settled == ["nack 0.5"]  # the first step of the backoff; JetStream redelivers


async def test_the_timeline_endpoint_answers_typed(settled: list[str]) -> None:
    bus = wired(FakeRepository())
    async with bus.in_memory():
        known = await bus.request(wire.EVALREC_TIMELINE, TimelineRequest(turn_id="known"))
        unknown = await bus.request(wire.EVALREC_TIMELINE, TimelineRequest(turn_id="other"))
    assert known.timeline is not None
    assert known.timeline.total_ms == 12.0
    assert unknown.timeline is None
