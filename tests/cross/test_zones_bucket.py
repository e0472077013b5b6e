"""The users' saved zones bucket under the real NATS permissions (`calagent.runtime.trust`):
commands writes a user's zone with its own credential, a gateway watching with its own credential
sees it, a cleared one goes, and the gateway may not write the bucket."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from nats.errors import Error as NatsError

from calagent.commands.adapters.zones import KvZones
from calagent.contracts.settings import user_key
from calagent.devtools.nats_server import EmbeddedNats
from calagent.gateway.auth import Principal
from calagent.gateway.zones import UserZones
from calagent.runtime.bus import Bus
from calagent.runtime.zones import open_zones_bucket

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNats]:
    embedded = EmbeddedNats(Path(tmp_path_factory.mktemp("zones")) / "nats")
    embedded.start()
    yield embedded
    embedded.stop()


async def until(check: Callable[[], bool], wait_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_zone_commands_saves_reaches_every_gateway_and_only_commands_writes_it(
    server: EmbeddedNats,
) -> None:
    assert server.auth
    gateway_bus = Bus(server.url_for("gateway"), "gateway")
    commands_bus = Bus(server.url_for("commands"), "commands")
    await gateway_bus.start()
    await commands_bus.start()
    zones = UserZones()
    try:
        # The gateway starts first: it makes the bucket, and sees the entries written after.
        zones.start(gateway_bus)
        await asyncio.wait_for(zones.loaded.wait(), 10)
        writer = KvZones(commands_bus)
        await writer.publish_zone("ada@example.com", "America/New_York")
        await until(lambda: zones.zone_of("ada@example.com") == "America/New_York")
        principal = zones.apply_to(Principal(user_id="ada@example.com", tz="Asia/Shanghai"))
        assert (principal.tz, principal.credential_tz) == ("America/New_York", "Asia/Shanghai")
        assert zones.zone_of("bob") is None

        await writer.publish_zone("ada@example.com", None)
        await until(lambda: zones.zone_of("ada@example.com") is None)

        # A gateway's credential reads the bucket and cannot write it.
        kv = await open_zones_bucket(gateway_bus)
        with pytest.raises((NatsError, TimeoutError)):
            await kv.put(user_key("mallory"), b'{"tz": "UTC"}')
        assert zones.zone_of("mallory") is None
    finally:
        await zones.stop()
        await gateway_bus.close()
        await commands_bus.close()
