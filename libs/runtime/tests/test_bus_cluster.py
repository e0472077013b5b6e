"""The bus on a real three-node JetStream cluster (`EmbeddedNatsCluster`): streams, durable
consumers and KV buckets get one copy per node from `replicas`, a stream made on one node is
raised to three, and a bus started with the default of one never lowers them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import StorageType
from nats.js.errors import NoStreamResponseError

from calagent.contracts import subjects, wire
from calagent.contracts.turns import TurnRequested
from calagent.devtools.nats_cluster import EmbeddedNatsCluster
from calagent.runtime.bus import Bus, RetryPolicy
from calagent.runtime.streams import STREAM_CONFIGS, ensure_replicas, ensure_streams

pytestmark = pytest.mark.integration

NODES = 3
STREAMS = [config.name or "" for config in STREAM_CONFIGS]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNatsCluster]:
    nodes = EmbeddedNatsCluster(tmp_path_factory.mktemp("cluster") / "nats", NODES)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
async def admin(cluster: EmbeddedNatsCluster) -> AsyncIterator[NatsClient]:
    connection = await nats.connect(cluster.admin_url.split(","))
    try:
        yield connection
    finally:
        await connection.close()


async def _replicas(admin: NatsClient, stream: str) -> int:
    return (await admin.jetstream().stream_info(stream)).config.num_replicas or 1


def test_each_node_has_its_own_name_store_and_ports_and_all_share_the_users(
    cluster: EmbeddedNatsCluster, tmp_path: Path
) -> None:
    names = {node.server_name for node in cluster.nodes}
    stores = {node.data_dir for node in cluster.nodes}
    ports = {node.port for node in cluster.nodes} | {
        node.cluster.port for node in cluster.nodes if node.cluster is not None
    }
    assert len(names) == len(stores) == NODES and len(ports) == 2 * NODES
    assert len({node.users_file for node in cluster.nodes}) == 1
    for node in cluster.nodes:
        text = node.conf_path.read_text()
        assert "sync_interval: always" in text
        assert str(node.data_dir / "jetstream") in text
        assert all(f"127.0.0.1:{peer.cluster.port}" in text for peer in cluster.nodes if peer.cluster)
        assert node.conf_path.stat().st_mode & 0o777 == 0o600  # it holds the passwords
    # The services' NATS_URL lists every node with the service's own user.
    passwords = json.loads(cluster.nodes[0].users_file.read_text())
    assert cluster.url_for("agent").split(",") == [
        f"nats://agent:{passwords['agent']}@127.0.0.1:{node.port}" for node in cluster.nodes
    ]
    # The same data dir gives the same ports again (a `calagent up` started again after the last
    # one's servers were stopped): peers and clients find each node where it was.
    first = EmbeddedNatsCluster(tmp_path / "nats", NODES)
    again = EmbeddedNatsCluster(tmp_path / "nats", NODES)
    assert [(n.port, n.cluster) for n in again.nodes] == [(n.port, n.cluster) for n in first.nodes]


async def test_streams_made_with_one_copy_are_raised_to_one_per_node_and_never_lowered(
    cluster: EmbeddedNatsCluster, admin: NatsClient
) -> None:
    assert await ensure_streams(admin.jetstream(), 1) == dict.fromkeys(STREAMS, 1)
    assert [await _replicas(admin, stream) for stream in STREAMS] == [1, 1, 1]

    agent = Bus(cluster.admin_url, "agent", replicas=NODES)

    async def on_turn(_turn: TurnRequested) -> None:
        return None

    agent.consume(wire.TURN_REQUESTED, on_turn, policy=RetryPolicy(ack_wait=30))
    await agent.start()
    try:
        assert [await _replicas(admin, stream) for stream in STREAMS] == [NODES] * 3
        consumer = await admin.jetstream().consumer_info(subjects.TURNS_STREAM, subjects.AGENT_CONSUMER)
        assert consumer.config.num_replicas == NODES
        # An operator's CLI (or any bus left at the default of one) must not strip the copies.
        cli = await Bus.connect(cluster.admin_url, "cli")
        await cli.close()
        assert [await _replicas(admin, stream) for stream in STREAMS] == [NODES] * 3
    finally:
        await agent.close()


async def test_a_bucket_made_with_one_copy_is_raised_in_place_and_keeps_its_entries(
    admin: NatsClient,
) -> None:
    js = admin.jetstream()
    bucket = await js.create_key_value(bucket="raised", history=1, storage=StorageType.FILE, replicas=1)
    # A stream made on another node is heard of on this one a moment later.
    for _ in range(50):
        try:
            await bucket.put("key", b"value")
            break
        except NoStreamResponseError:
            await asyncio.sleep(0.1)
    assert await ensure_replicas(js, "KV_raised", NODES) == NODES
    assert await ensure_replicas(js, "KV_raised", 1) == NODES
    assert await _replicas(admin, "KV_raised") == NODES
    # The bucket now opens with the copies it has (a different count would be refused as a
    # different configuration) and still holds what it held.
    reopened = await js.create_key_value(bucket="raised", history=1, storage=StorageType.FILE, replicas=NODES)
    assert (await reopened.get("key")).value == b"value"
    assert await ensure_replicas(js, "KV_missing", NODES) == NODES
