"""Each user's saved zone, kept in memory from the zones bucket (`calagent.runtime.zones`).

A saved zone is the zone of the user's turns and reads (contract §16): it wins over the token's
`tz` claim. The gateway must know it before it publishes a turn, and asking commands for it would
add a round trip to every turn; so every replica watches the bucket commands writes after each
settings commit and answers `zone_of` from memory. A replica that served the `PUT` knows at once
(`remember`); the others within the watch's delivery, milliseconds later. Until the first load
(or while the bus is away) the token's zone is used, as before settings existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from nats.js.kv import KV_DEL, KV_PURGE, KeyValue
from pydantic import ValidationError

from calagent.contracts.settings import ZoneEntry, user_key, valid_zone_name
from calagent.gateway.auth import Principal
from calagent.runtime.bus import Bus
from calagent.runtime.zones import open_zones_bucket

log = logging.getLogger("calagent.gateway.zones")

RETRY_S = 2.0
STOP_WAIT_S = 1.0


class UserZones:
    def __init__(self) -> None:
        self._zones: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._watcher: KeyValue.KeyWatcher | None = None
        self._stopping = False
        self.loaded = asyncio.Event()

    def zone_of(self, user_id: str) -> str | None:
        return self._zones.get(user_key(user_id))

    def remember(self, user_id: str, tz: str | None) -> None:
        self._apply(user_key(user_id), tz)

    def apply_to(self, principal: Principal) -> Principal:
        saved = self.zone_of(principal.user_id)
        if saved is None or saved == principal.tz:
            return principal
        return Principal(
            user_id=principal.user_id, tz=saved, aliases=principal.aliases, token_tz=principal.tz
        )

    def _apply(self, key: str, tz: str | None) -> None:
        if tz is None:
            self._zones.pop(key, None)
        else:
            self._zones[key] = tz

    def start(self, bus: Bus) -> None:
        """Follow the bucket from now on; called in the event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._follow(bus))

    async def stop(self) -> None:
        """Stop following, bounded: the watch is stopped and the task cancelled, and a task that
        does not end (a cancellation swallowed inside the client) is left, not waited for."""
        self._stopping = True
        task, self._task = self._task, None
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(watcher.stop(), STOP_WAIT_S)  # type: ignore[no-untyped-call]
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_WAIT_S)

    async def _follow(self, bus: Bus) -> None:
        """Watch the bucket for as long as the gateway runs; a lost watch is made again."""
        warned = False
        while not self._stopping:
            try:
                kv = await open_zones_bucket(bus)
                self._watcher = watcher = await kv.watchall()
                async for entry in watcher:
                    if self._stopping:
                        return
                    if entry is None:  # the entries stored so far are all delivered
                        self.loaded.set()
                        continue
                    if entry.operation in (KV_DEL, KV_PURGE) or not entry.value:
                        self._apply(entry.key, None)
                        continue
                    try:
                        tz = ZoneEntry.model_validate_json(entry.value).tz
                    except ValidationError:
                        log.warning("ignored an unreadable zone entry")
                        continue
                    self._apply(entry.key, tz if valid_zone_name(tz) else None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not warned:
                    log.warning("cannot watch the users' zones yet (%r); tokens' zones apply", exc)
                    warned = True
            await asyncio.sleep(RETRY_S)
