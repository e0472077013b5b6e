"""What one gateway process keeps between requests: one lock per user (one user's turns never
interleave through this process) and the answers it already gave (a retry to the same process is
answered without asking anyone). Neither is shared with other replicas; `turns.KeyClaims` and the
agent's own claims are what hold across them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator

from calagent.contracts.turns import TurnAnswer

ANSWER_CACHE_TTL_S = 600.0  # JetStream's duplicate window on the turns stream
ANSWER_CACHE_SIZE = 10_000


class _UserLock:
    __slots__ = ("holders", "lock")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.holders = 0


class UserLocks:
    """One FIFO lock per user, dropped again once nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, _UserLock] = {}

    @contextlib.asynccontextmanager
    async def hold(self, user_id: str, wait_s: float) -> AsyncIterator[None]:
        entry = self._locks.get(user_id)
        if entry is None:
            entry = self._locks[user_id] = _UserLock()
        entry.holders += 1
        try:
            async with asyncio.timeout(max(wait_s, 0.0)):
                await entry.lock.acquire()
            try:
                yield
            finally:
                entry.lock.release()
        finally:
            entry.holders -= 1
            if entry.holders == 0:
                self._locks.pop(user_id, None)

    def __len__(self) -> int:
        return len(self._locks)


class AnswerCache:
    """Answers already given under a turn key (`turn_key`), for retries to the same process."""

    def __init__(self, ttl_s: float = ANSWER_CACHE_TTL_S, size: int = ANSWER_CACHE_SIZE) -> None:
        self._ttl = ttl_s
        self._size = size
        self._items: OrderedDict[str, tuple[float, TurnAnswer]] = OrderedDict()

    def get(self, key: str) -> TurnAnswer | None:
        item = self._items.get(key)
        if item is None:
            return None
        expires, answer = item
        if expires < time.monotonic():
            del self._items[key]
            return None
        return answer

    def put(self, key: str, answer: TurnAnswer) -> None:
        self._items[key] = (time.monotonic() + self._ttl, answer)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)
