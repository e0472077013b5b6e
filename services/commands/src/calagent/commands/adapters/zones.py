"""`ZonePublisher` over the zones bucket (`calagent.runtime.zones`)."""

from __future__ import annotations

from calagent.contracts.settings import ZoneEntry, user_key
from calagent.runtime.bus import Bus
from calagent.runtime.zones import open_zones_bucket


class KvZones:
    def __init__(self, bus: Bus) -> None:
        self._bus = bus

    async def publish_zone(self, user_id: str, tz: str | None) -> None:
        kv = await open_zones_bucket(self._bus)
        if tz is None:
            await kv.delete(user_key(user_id))
        else:
            await kv.put(user_key(user_id), ZoneEntry(tz=tz).model_dump_json().encode())
