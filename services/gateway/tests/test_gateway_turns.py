"""The in-process pieces of the turn runner: stable ids for keyed turns, per-user locks, answer cache."""

from __future__ import annotations

import asyncio

import pytest

from calagent.contracts.turns import TurnAnswer
from calagent.gateway.turns import AnswerCache, UserLocks, turn_id_for

pytestmark = pytest.mark.unit


def test_keyed_turn_ids_are_stable_per_user_and_key() -> None:
    assert turn_id_for("alice", "m1") == turn_id_for("alice", "m1")
    assert turn_id_for("alice", "m1") != turn_id_for("bob", "m1")
    assert turn_id_for("alice", "m1") != turn_id_for("alice", "m2")
    # No key: every turn is new.
    assert turn_id_for("alice", None) != turn_id_for("alice", None)
    assert len(turn_id_for("alice", "m1")) == 32


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
        cache.put(("u", key), answer)
    assert cache.get(("u", "a")) is None  # the oldest went first
    assert cache.get(("u", "c")) == answer
    expired = AnswerCache(ttl_s=-1)
    expired.put(("u", "a"), answer)
    assert expired.get(("u", "a")) is None
