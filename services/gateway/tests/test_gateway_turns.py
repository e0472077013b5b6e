"""The in-process pieces of the turn runner: stable ids for keyed turns, per-user locks, answer
cache, and handing a turn to a stream that does not answer for a while."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

import pytest
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import PubAck

from calagent.contracts import subjects
from calagent.contracts.transport import Unwrapped
from calagent.contracts.turns import TurnAnswer, TurnRequested, turn_key
from calagent.gateway import turns
from calagent.gateway.auth import Principal
from calagent.gateway.inprocess import AnswerCache, UserLocks
from calagent.gateway.turns import (
    AgentUnreachableError,
    ChatTurn,
    TurnRunner,
)
from calagent.runtime.bus import Bus, StreamPublisher
from calagent.runtime.clock import FrozenClock
from calagent.runtime.settings import Settings

NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")

pytestmark = pytest.mark.unit


def test_keyed_turn_ids_are_stable_per_user_and_key() -> None:
    assert turn_key("alice", "m1") == turn_key("alice", "m1")
    assert turn_key("alice", "m1") != turn_key("bob", "m1")
    assert turn_key("alice", "m1") != turn_key("alice", "m2")
    # No key: every turn is new.
    assert turn_key("alice", None) != turn_key("alice", None)
    assert len(turn_key("alice", "m1")) == 32


async def test_user_locks_serialise_one_user_and_are_dropped_when_idle() -> None:
    locks = UserLocks()
    order: list[str] = []

    async def turn(user: str, name: str) -> None:
        async with locks.hold(user, 5):
            order.append(f"{name}+")
            await asyncio.sleep(0.02)
            order.append(f"{name}-")

    await asyncio.gather(turn("u", "a"), turn("u", "b"), turn("v", "c"))
    assert order.index("a-") < order.index("b+")
    assert order.index("c+") < order.index("a-")  # another user is not held up
    assert len(locks) == 0


async def test_user_lock_wait_is_bounded() -> None:
    locks = UserLocks()
    async with locks.hold("u", 1):
        with pytest.raises(TimeoutError):
            async with locks.hold("u", 0.05):
                pass
    assert len(locks) == 0


def test_answer_cache_expires_and_is_bounded() -> None:
    answer = TurnAnswer(
        turn_id="t", conversation_id="c", outcome="answered", reply="r", intent="general.chat"
    )
    cache = AnswerCache(ttl_s=60, size=2)
    for key in ("a", "b", "c"):
        cache.put(key, answer)
    assert cache.get("a") is None  # the oldest went first
    assert cache.get("c") == answer
    expired = AnswerCache(ttl_s=-1)
    expired.put("a", answer)
    assert expired.get("a") is None


@dataclass
class LeaderlessStream:
    """A turns stream whose leader is gone for its first `unanswered` attempts: JetStream answers
    a publish to it with nothing, so each of those attempts runs out its timeout."""

    unanswered: int
    attempts: list[tuple[str | None, float]] = field(default_factory=list)

    async def publish(
        self, message: TurnRequested, *, msg_id: str | None = None, timeout: float = 10.0
    ) -> PubAck:
        self.attempts.append((msg_id, timeout))
        if len(self.attempts) <= self.unanswered:
            await asyncio.sleep(timeout)
            raise NatsTimeoutError
        return PubAck(stream=subjects.TURNS_STREAM, seq=len(self.attempts))


def _runner(stream: LeaderlessStream) -> TurnRunner:
    runner = TurnRunner(Bus("nats://127.0.0.1:1", "gateway"), Settings(), FrozenClock(NOW))
    runner.turns = cast("StreamPublisher[TurnRequested]", stream)
    return runner


def _turn() -> ChatTurn:
    return ChatTurn(
        principal=Principal("alice", "Asia/Shanghai"),
        raw_text="明天下午三点开会",
        unwrapped=Unwrapped("明天下午三点开会"),
        conversation_id="c",
        channel="web",
        client_message_id="key-1",
        active_command_id=None,
        received_ms=0.0,
    )


async def test_a_publish_nobody_answers_is_asked_again_under_the_same_dedup_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turns, "PUBLISH_ATTEMPT_S", 0.1)
    stream = LeaderlessStream(unanswered=3)
    turn = _turn()
    loop = asyncio.get_running_loop()
    began = loop.time()
    duplicate = await _runner(stream)._publish(turn, loop.time() + 30, turn.turn_id, stream=False)
    # Handed over on the first attempt after the stream answers again, long before the budget.
    assert not duplicate
    assert [msg_id for msg_id, _ in stream.attempts] == [turn.turn_id] * 4
    assert all(timeout <= 0.1 for _, timeout in stream.attempts)
    assert loop.time() - began < turns.PUBLISH_TIMEOUT_S


async def test_a_stream_that_never_answers_is_unreachable_once_the_budget_is_spent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turns, "PUBLISH_ATTEMPT_S", 0.1)
    monkeypatch.setattr(turns, "PUBLISH_TIMEOUT_S", 0.5)
    stream = LeaderlessStream(unanswered=1000)
    turn = _turn()
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(AgentUnreachableError):
        await _runner(stream)._publish(turn, loop.time() + 30, turn.turn_id, stream=False)
    # Given up within an attempt of the budget, never before its last attempt.
    assert 0.4 <= loop.time() - began < 1.5
    assert len(stream.attempts) >= 3
