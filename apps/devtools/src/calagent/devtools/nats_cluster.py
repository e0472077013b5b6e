"""Several nats-server nodes on this host as one JetStream cluster (`calagent up --nats-cluster`)."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from pathlib import Path

from calagent.devtools.nats_server import ClusterMembership, EmbeddedNats
from calagent.devtools.processes import private_dir, stable_port, wait_for_port
from calagent.runtime.trust import ADMIN, write_private

log = logging.getLogger("calagent.embedded")

# JetStream's own limit on the copies of a stream.
MAX_CLUSTER_SIZE = 5


class EmbeddedNatsCluster:
    """`size` nats-server nodes on this host as one JetStream cluster (`calagent up --nats-cluster`).

    Node i lives in `<data_dir>/node-i` with its own store, log and configuration, and keeps its
    client and route ports across restarts (recorded in the node's dir), so a node the supervisor
    restarts rejoins under the same name and address and catches up from its peers. Every node
    has the same users and permissions (one `users.json` for the cluster).
    """

    def __init__(self, data_dir: Path, size: int) -> None:
        if not 1 <= size <= MAX_CLUSTER_SIZE:
            raise ValueError(f"a cluster of 1 to {MAX_CLUSTER_SIZE} nodes, not {size}")
        self.data_dir = data_dir.resolve()
        private_dir(self.data_dir)
        dirs = [self.data_dir / f"node-{index}" for index in range(1, size + 1)]
        route_ports = tuple(stable_port(node_dir / "route-port") for node_dir in dirs)
        secret = self.data_dir / "route-password"
        if not secret.exists():
            write_private(secret, secrets.token_urlsafe(24))
        password = secret.read_text().strip()
        self.nodes = [
            EmbeddedNats(
                node_dir,
                stable_port(node_dir / "port"),
                server_name=f"calagent-{index}",
                cluster=ClusterMembership(route_ports[index - 1], route_ports, password),
                users_file=self.data_dir / "users.json",
            )
            for index, node_dir in enumerate(dirs, start=1)
        ]

    def url_for(self, user: str) -> str:
        """Every node's address with `user`'s credentials, comma-separated (a `NATS_URL`)."""
        return ",".join(node.url_for(user) for node in self.nodes)

    @property
    def admin_url(self) -> str:
        return self.url_for(ADMIN)

    def start(self, timeout: float = 60.0) -> str:
        """Start every node, wait until each listens and the cluster has elected its JetStream
        leader (streams cannot be made before); the admin's address list is returned."""
        procs = [node.spawn() for node in self.nodes]
        for node, proc in zip(self.nodes, procs, strict=True):
            wait_for_port(node.port, timeout, proc)
        wait_for_jetstream(self.admin_url, timeout)
        log.info("nats cluster of %s nodes ready (data in %s)", len(self.nodes), self.data_dir)
        return self.admin_url

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def wait_for_jetstream(url: str, timeout: float) -> None:
    """Until JetStream answers on `url` (a clustered one only once its nodes elected a leader)."""

    async def poll() -> None:
        import nats
        from nats.js.errors import Error as JetStreamError

        deadline = time.monotonic() + timeout
        connection = await nats.connect(url.split(","), connect_timeout=2, max_reconnect_attempts=-1)
        try:
            js = connection.jetstream(timeout=2)
            while True:
                try:
                    await js.account_info()
                    return
                except (JetStreamError, nats.errors.Error, TimeoutError):
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
        finally:
            await connection.close()

    asyncio.run(poll())
