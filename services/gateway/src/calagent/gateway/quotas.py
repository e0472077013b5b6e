"""Per-user budgets and rates (contract §17), checked before a turn is published.

Turns a minute (`CALAGENT_USER_TURNS_PER_MINUTE`) and model tokens a day
(`CALAGENT_USER_DAILY_TOKENS`) are counters in a JetStream KV bucket, so every gateway replica
sees the same numbers: a count moves only by compare-and-set on the entry's revision (`kv.create`
for the first, `kv.update(last=revision)` after), so two replicas admitting the same user's turns
at once cannot both take the last slot. Keys carry a digest of the user id (KV keys allow few
characters) and the window they count.

The rate check is one round trip: each process remembers the (revision, count) it last saw of
this minute's counters and sets the next count against that revision directly; only when another
replica moved the counter since is it read, and the set tried again. A count only grows within
its minute, so one already at the limit is refused from memory.

The minute window is wall time (operational, like latency stamps: a frozen business clock must not
freeze the rate); the day is the user's calendar day by the injected clock. Tokens are charged when
the turn's answer arrives, from what the agent measured, so a turn that starts under the budget may
end a little over it; the next one is refused.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from calagent.contracts import subjects
from calagent.contracts.settings import user_key
from calagent.runtime.bus import Bus
from calagent.runtime.clock import Clock
from calagent.runtime.settings import Settings

log = logging.getLogger("calagent.gateway.quotas")
# How long a turn waits for its rate counter before it is let through unchecked.
RATE_CHECK_S = 1.0

BUCKET = subjects.GATEWAY_QUOTAS_BUCKET
# Long enough for a day's token count in any zone; a minute's count expires with it.
BUCKET_TTL_S = 2 * 24 * 3600.0
CAS_ATTEMPTS = 20


class QuotaExceededError(Exception):
    def __init__(self, code: str, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s


class QuotaUnavailableError(Exception):
    """The shared counters cannot be read: the turn is not admitted unchecked."""


class Quotas:
    def __init__(
        self, bus: Bus, settings: Settings, clock: Clock, wall: Callable[[], float] = time.time
    ) -> None:
        self._bus = bus
        self.daily_tokens = settings.user_daily_tokens
        self.turns_per_minute = settings.user_turns_per_minute
        self._clock = clock
        self._wall = wall
        # The minute's counters as this process last saw them: key -> (revision, count).
        self._seen: dict[str, tuple[int, int]] = {}
        self._seen_minute = -1

    @property
    def enabled(self) -> bool:
        return self.daily_tokens is not None or self.turns_per_minute > 0

    async def _bucket(self) -> KeyValue:
        return await self._bus.key_value(
            BUCKET,
            ttl=BUCKET_TTL_S,
            description="gateway: turns per user and minute, tokens per user and day",
        )

    def _day(self, tz: str) -> tuple[str, float]:
        """The user's day by the clock, and the seconds until it ends."""
        now = self._clock.now().astimezone(ZoneInfo(tz))
        midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), tzinfo=now.tzinfo)
        return now.date().strftime("%Y%m%d"), max((midnight - now).total_seconds(), 1.0)

    async def admit(self, user_id: str, tz: str) -> None:
        """Raise `QuotaExceededError` when the user is over the day's tokens or the minute's turns;
        else count this turn."""
        if not self.enabled:
            return
        digest = user_key(user_id)
        if self.daily_tokens is not None:
            try:
                day, until_midnight = self._day(tz)
                used = await _read(await self._bucket(), f"tokens.{digest}.{day}")
            except Exception as exc:
                # A budget is a promise about cost: unchecked, the turn is not run.
                raise QuotaUnavailableError(f"could not check the user's quota: {exc!r}") from exc
            if used >= self.daily_tokens:
                raise QuotaExceededError(
                    "budget_exceeded",
                    "today's model budget for this account is used up; it renews at midnight "
                    "(今天的模型额度已用完，零点后恢复)",
                    until_midnight,
                )
        if self.turns_per_minute > 0:
            now = self._wall()
            minute = int(now // 60)
            if minute != self._seen_minute:
                # A past minute's counter is never set again.
                self._seen.clear()
                self._seen_minute = minute
            try:
                allowed = await asyncio.wait_for(
                    _increment_below(
                        await self._bucket(), f"turns.{digest}.{minute}", self.turns_per_minute, self._seen
                    ),
                    RATE_CHECK_S,
                )
            except Exception as exc:
                # A rate only smooths load: while its counter is unreachable (the bucket's leader
                # lost with a node, until the cluster elects another) the turn is let through,
                # rather than turning the loss of one node into refusing everyone.
                log.warning("a turn was admitted without its rate check: %r", exc)
                return
            if not allowed:
                raise QuotaExceededError(
                    "rate_limited",
                    f"more than {self.turns_per_minute} messages a minute; wait a moment "
                    "(消息太频繁，请稍候再发)",
                    max(60.0 - now % 60, 1.0),
                )

    async def charge(self, user_id: str, tz: str, tokens: int) -> None:
        """Add a finished turn's tokens to the user's day (only when a daily budget is set)."""
        if self.daily_tokens is None or tokens <= 0:
            return
        try:
            kv = await self._bucket()
            day, _ = self._day(tz)
            await _add(kv, f"tokens.{user_key(user_id)}.{day}", tokens)
        except Exception:
            log.exception("could not charge %d tokens to a user's day", tokens)


async def _read(kv: KeyValue, key: str) -> int:
    try:
        entry = await kv.get(key)
    except KeyNotFoundError:
        return 0
    return int(entry.value or b"0")


async def _increment_below(kv: KeyValue, key: str, limit: int, seen: dict[str, tuple[int, int]]) -> bool:
    """Add one unless the count already reached `limit`; False (nothing added) when it had.

    The compare-and-set goes against `seen[key]`, what this process last saw (nothing yet: create
    the key), and the counter is read only when that turns out stale."""
    known = seen.get(key)
    for _ in range(CAS_ATTEMPTS):
        if known is not None and known[1] >= limit:
            return False
        try:
            if known is None:
                count = 1
                revision = await kv.create(key, b"1")
            else:
                count = known[1] + 1
                revision = await kv.update(key, str(count).encode(), last=known[0])
        except KeyWrongLastSequenceError:
            try:
                entry = await kv.get(key)
            except KeyNotFoundError:
                known = None
                continue
            known = (entry.revision or 0, int(entry.value or b"0"))
            _remember(seen, key, known)
            continue
        _remember(seen, key, (revision, count))
        return True
    raise QuotaUnavailableError(f"the count {key} kept changing")


def _remember(seen: dict[str, tuple[int, int]], key: str, state: tuple[int, int]) -> None:
    # Concurrent turns of one process may finish out of order: the newest revision stays.
    if key not in seen or seen[key][0] < state[0]:
        seen[key] = state


async def _add(kv: KeyValue, key: str, amount: int) -> None:
    for _ in range(CAS_ATTEMPTS):
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:
            try:
                await kv.create(key, str(amount).encode())
                return
            except KeyWrongLastSequenceError:
                continue
        try:
            await kv.update(key, str(int(entry.value or b"0") + amount).encode(), last=entry.revision)
            return
        except KeyWrongLastSequenceError:
            continue
    raise QuotaUnavailableError(f"the count {key} kept changing")
