"""`calagent up`: the supervisor that runs the whole system in the foreground.

It starts what is not given (nats-server, PostgreSQL, the scripted demo model), starts every
service as its own process (replicas share work through queue groups and pull consumers), restarts
whatever crashes — a service or one of the servers — with one backoff, prints one ready line once
`/healthz` says all five answer, and on Ctrl-C or SIGTERM stops everything it started, servers
included. Every child gets a parent-death signal, so a supervisor killed outright takes them with
it; servers that outlived an earlier supervisor anyway are stopped by the next `up` on the data dir.

Trust: each service gets its own NATS user (`calagent.runtime.trust`) in `NATS_URL`, the database
password in `DATABASE_URL`, and the token secret in `CALAGENT_AUTH_SECRET` (generated into the
data dir when unset). The data dir, its secrets, `up.json` and the logs are readable by the owner only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from calagent.contracts.subjects import SERVICES
from calagent.devtools.nats_cluster import MAX_CLUSTER_SIZE, EmbeddedNatsCluster
from calagent.devtools.nats_server import EmbeddedNats
from calagent.devtools.postgres import EmbeddedPostgres
from calagent.devtools.processes import (
    free_port,
    open_private_log,
    parent_death_signal,
    private_dir,
    process_of,
    stable_port,
    stop_process,
)
from calagent.runtime.settings import MIN_AUTH_SECRET_CHARS, Settings
from calagent.runtime.trust import write_private

log = logging.getLogger("calagent.up")

STATE_FILE = "up.json"
BANNER = """
================================================================================
  NO REAL MODEL CONFIGURED (OPENAI_BASE_URL is unset).
  calagent is answering with the built-in SCRIPTED DEMO MODEL. It is not a
  language model: it only knows a handful of scripted sentences. Point
  OPENAI_BASE_URL / OPENAI_API_KEY / CALAGENT_MODEL at a real endpoint.
================================================================================
"""


def parse_scale(spec: str | None) -> dict[str, int]:
    scale = dict.fromkeys(SERVICES, 1)
    if not spec:
        return scale
    for part in spec.split(","):
        name, _, count = part.strip().partition("=")
        if name not in scale:
            raise ValueError(f"unknown service {name!r} in --scale (known: {', '.join(SERVICES)})")
        try:
            value = int(count)
        except ValueError as exc:
            raise ValueError(f"--scale {part!r}: the count must be an integer") from exc
        if value < 1 or value > 16:
            raise ValueError(f"--scale {part!r}: between 1 and 16 replicas")
        scale[name] = value
    return scale


# The first restart of a crashed child comes this soon: a killed nats-server or PostgreSQL is
# back, on the same port, well within the services' reconnect attempts.
FIRST_RESTART_DELAY_S = 0.25
MAX_RESTART_DELAY_S = 30.0
# A child that ran this long without crashing starts its backoff over at the next crash.
STABLE_AFTER_S = 10.0


def restart_delay(restarts: int) -> float:
    return min(MAX_RESTART_DELAY_S, FIRST_RESTART_DELAY_S * 2.0**restarts)


@dataclass
class Child:
    """A process the supervisor keeps running: a service, the scripted model, or a server.

    `launch` starts it (a server's own start: stale locks cleared, same port); without it, `argv`
    is run with `env`.
    """

    name: str
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    log_path: Path | None = None
    launch: Callable[[], subprocess.Popen[bytes]] | None = None

    def start(self) -> None:
        if self.launch is not None:
            self.proc = self.launch()
        else:
            out = open_private_log(self.log_path) if self.log_path else None
            try:
                self.proc = subprocess.Popen(
                    self.argv,
                    env=self.env,
                    stdout=out if out else None,
                    stderr=subprocess.STDOUT if out else None,
                    # Children die with the supervisor even if it is SIGKILLed.
                    preexec_fn=parent_death_signal(signal.SIGTERM),
                )
            finally:
                if out is not None:
                    out.close()
        self.started_at = time.monotonic()


@dataclass
class Supervisor:
    settings: Settings
    port: int
    scale: dict[str, int]
    # nats-server nodes to run as one cluster (`--nats-cluster`); 1 is a single server.
    nats_cluster: int = 1
    children: list[Child] = field(default_factory=list)
    nats: EmbeddedNats | EmbeddedNatsCluster | None = None
    postgres: EmbeddedPostgres | None = None
    stopping: bool = False
    # What `up.json` says besides the pids: the gateway's, the admin's NATS and the database's URLs.
    addresses: dict[str, str] = field(default_factory=dict)
    # Networks the services' CalDAV guard allows besides the operator's own list: the address of
    # the server `--caldav-demo` started, which is loopback and refused otherwise.
    caldav_networks: tuple[str, ...] = ()

    def _child_env(
        self, nats_url: str, database_url: str, model_url: str | None, auth_secret: str
    ) -> dict[str, str]:
        env = dict(os.environ)
        env["NATS_URL"] = nats_url
        env["DATABASE_URL"] = database_url
        env["CALAGENT_AUTH_SECRET"] = auth_secret
        env["CALAGENT_HTTP_PORT"] = str(self.port)
        env["PYTHONUNBUFFERED"] = "1"
        if self.caldav_networks:
            given = [n for n in env.get("CALAGENT_CALDAV_ALLOW_NETWORKS", "").split(",") if n.strip()]
            env["CALAGENT_CALDAV_ALLOW_NETWORKS"] = ",".join([*given, *self.caldav_networks])
        if self.nats_cluster > 1:
            # Every stream, consumer and bucket with a copy on each node.
            env["CALAGENT_NATS_REPLICAS"] = str(self.nats_cluster)
        if model_url:
            env["OPENAI_BASE_URL"] = model_url
            env.setdefault("OPENAI_API_KEY", "scripted-demo")
        return env

    def _nats_url_for(self, service: str, given: str) -> str:
        return self.nats.url_for(service) if self.nats is not None else given

    def _keep_alive(
        self, name: str, launch: Callable[[], subprocess.Popen[bytes]], proc: subprocess.Popen[bytes]
    ) -> None:
        child = Child(name, launch=launch, proc=proc, started_at=time.monotonic())
        self.children.append(child)

    def start(self) -> str:
        data_dir = private_dir(self.settings.data_dir.resolve())
        logs = private_dir(data_dir / "logs")
        stop_leftovers(data_dir)
        auth_secret = auth_secret_for(self.settings)

        nats_url = self.settings.nats_url
        if not nats_url:
            if self.nats_cluster > 1:
                self.nats = EmbeddedNatsCluster(data_dir / "nats", self.nats_cluster)
            else:
                self.nats = EmbeddedNats(data_dir / "nats")
            nats_url = self.nats.start()
            nodes = self.nats_nodes
            for index, node in enumerate(nodes, start=1):
                assert node.proc is not None
                self._keep_alive(
                    "nats-server" if len(nodes) == 1 else f"nats-server-{index}", node.spawn, node.proc
                )
        database_url = self.settings.database_url
        if not database_url:
            self.postgres = EmbeddedPostgres(
                data_dir / "postgres", port=stable_port(data_dir / "postgres" / "port")
            )
            database_url = self.postgres.start()
            assert self.postgres.proc is not None
            self._keep_alive("postgres", self.postgres.spawn, self.postgres.proc)
        self.addresses = {
            "url": f"http://127.0.0.1:{self.port}",
            "nats_url": nats_url,
            "database_url": database_url,
        }
        self._record_state()

        model_url = None
        if not self.settings.openai_base_url:
            model_port = free_port()
            model = Child(
                "scriptedmodel",
                [sys.executable, "-m", "calagent.scriptedmodel", "--port", str(model_port)],
                dict(os.environ),
                log_path=logs / "scriptedmodel.log",
            )
            model.start()
            self.children.append(model)
            model_url = f"http://127.0.0.1:{model_port}/v1"
            print(BANNER, file=sys.stderr, flush=True)

        # Services whose start-up runs migrations go first so replicas do not all wait on the lock.
        for service in ("timeparse", "commands", "agent", "evalrec", "gateway"):
            env = self._child_env(self._nats_url_for(service, nats_url), database_url, model_url, auth_secret)
            for index in range(self.scale[service]):
                child = Child(
                    service if self.scale[service] == 1 else f"{service}-{index + 1}",
                    [sys.executable, "-m", f"calagent.{service}"],
                    env,
                    log_path=logs / f"{service}-{index + 1}.log",
                )
                child.start()
                self.children.append(child)
        return f"http://127.0.0.1:{self.port}"

    @property
    def state_file(self) -> Path:
        return self.settings.data_dir.resolve() / STATE_FILE

    def _record_state(self) -> None:
        """`up.json`: where the running system is (for the CLI) and which processes are ours (for
        the next `up`, should this supervisor die without stopping them). It holds credentials:
        the admin's NATS address and the database's, so it is the owner's only."""
        state = {**self.addresses, "pid": os.getpid(), "servers": self._server_records()}
        write_private(self.state_file, json.dumps(state))

    @property
    def nats_nodes(self) -> list[EmbeddedNats]:
        """The nats-server processes this supervisor runs: one, or each node of the cluster."""
        if isinstance(self.nats, EmbeddedNatsCluster):
            return self.nats.nodes
        return [self.nats] if self.nats is not None else []

    def _server_records(self) -> list[dict[str, object]]:
        records: list[dict[str, object]] = [
            {"pid": node.proc.pid, "marker": str(node.conf_path), "signal": int(signal.SIGTERM)}
            for node in self.nats_nodes
            if node.proc is not None
        ]
        if self.postgres is not None and self.postgres.proc is not None:
            records.append(
                {
                    "pid": self.postgres.proc.pid,
                    "marker": str(self.postgres.pgdata),
                    "signal": int(signal.SIGINT),
                }
            )
        return records

    def wait_ready(self, url: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stopping:
            self.reap()
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:  # noqa: S310
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise TimeoutError(
            f"the system did not become healthy within {timeout}s (logs in {self.settings.data_dir})"
        )

    def reap(self) -> None:
        """Restart crashed children — services and servers alike — with exponential backoff."""
        now = time.monotonic()
        for child in self.children:
            if self.stopping:
                return
            code = child.proc.poll() if child.proc is not None else "not started"
            if code is None:
                if child.restarts and now - child.started_at > STABLE_AFTER_S:
                    child.restarts = 0  # stable again: the next crash starts the backoff over
                continue
            if not child.next_start:
                if child.proc is not None and now - child.started_at >= STABLE_AFTER_S:
                    # It ran a good while before it died: killed, not crash-looping, so it comes
                    # back at the first delay however often that has happened before.
                    child.restarts = 0
                delay = restart_delay(child.restarts)
                child.next_start = now + delay
                log.error("%s exited with status %s; restarting in %.2fs", child.name, code, delay)
            elif now >= child.next_start:
                child.restarts += 1
                child.next_start = 0.0
                try:
                    child.start()
                except Exception as exc:
                    # e.g. a server's port still held for a moment: the next round tries again, later.
                    child.proc = None
                    log.error("%s could not be restarted: %s", child.name, exc)
                    continue
                log.warning("%s restarted (restart #%s)", child.name, child.restarts)
                if child.launch is not None:
                    self._record_state()  # the server's new pid, for a later `up` should we die

    def stop(self) -> None:
        self.stopping = True
        # Services first (they finish or hand back in-flight work over the bus), then the servers.
        services = [child for child in self.children if child.launch is None]
        for child in services:
            if child.proc is not None and child.proc.poll() is None:
                child.proc.terminate()
        deadline = time.monotonic() + 20
        for child in services:
            if child.proc is None:
                continue
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait(timeout=5)
        if self.postgres is not None:
            self.postgres.stop()
        if self.nats is not None:
            self.nats.stop()
        if self.addresses:  # ours: a refused start leaves a running supervisor's file alone
            with contextlib.suppress(FileNotFoundError):
                self.state_file.unlink()


def auth_secret_for(settings: Settings) -> str:
    """CALAGENT_AUTH_SECRET, or the data dir's generated one (created 0600 on the first start and
    reused after, so tokens from `calagent token` stay valid across restarts)."""
    if settings.auth_secret is not None:
        return settings.auth_secret
    path = settings.auth_secret_path.resolve()
    write_private(path, secrets.token_urlsafe(48))
    log.info("CALAGENT_AUTH_SECRET is unset: tokens are signed with the secret generated in %s", path)
    secret = path.read_text().strip()
    assert len(secret) >= MIN_AUTH_SECRET_CHARS
    return secret


def _is_supervisor(proc: psutil.Process | None) -> bool:
    return proc is not None and process_of(proc.pid, "calagent", "up") is not None


def stop_leftovers(data_dir: Path) -> None:
    """Refuse to run beside a live supervisor of this data dir; stop the servers a dead one left.

    `up.json` names the supervisor and its servers. Servers of earlier versions, which recorded
    none (and could lose `up.json` altogether), are found by what they run on: the postgres named
    in `postmaster.pid`, a nats-server started with this data dir's config. A process counts as a
    leftover only while it runs that command line for this data dir and no live supervisor is its
    parent, so a reused pid of some other process is never signalled.
    """
    path = data_dir / STATE_FILE
    state: dict[str, Any] = {}
    with contextlib.suppress(ValueError, OSError):
        state = json.loads(path.read_text())
    pid = int(state.get("pid", -1))
    if pid > 0 and pid != os.getpid() and process_of(pid, "calagent", "up") is not None:
        raise SystemExit(f"calagent up already runs on {data_dir} (pid {pid}); stop it first")
    found: list[tuple[psutil.Process | None, int]] = [
        (process_of(int(server["pid"]), str(server["marker"])), int(server["signal"]))
        for server in state.get("servers", [])
    ]
    pgdata = data_dir / "postgres" / "pgdata"
    with contextlib.suppress(ValueError, IndexError, OSError):
        postmaster = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
        found.append((process_of(postmaster, "postgres", str(pgdata)), int(signal.SIGINT)))
    # A single server's configuration, or each cluster node's.
    nats_confs = [
        str(data_dir / "nats" / "nats.conf"),
        *map(str, (data_dir / "nats").glob("node-*/nats.conf")),
    ]
    found += [
        (process_of(proc.pid, "nats-server", conf), int(signal.SIGTERM))
        for proc in psutil.process_iter()
        for conf in nats_confs
    ]
    stopped: set[int] = set()
    for leftover, sig in found:
        if leftover is None or leftover.pid in stopped:
            continue
        with contextlib.suppress(psutil.Error):
            if _is_supervisor(leftover.parent()):
                raise SystemExit(
                    f"calagent up already runs on {data_dir} (pid {leftover.ppid()}); stop it first"
                )
        log.warning(
            "stopping pid %s, left running on %s by a supervisor that is gone", leftover.pid, data_dir
        )
        stop_process(leftover, sig)
        stopped.add(leftover.pid)
    path.unlink(missing_ok=True)


def run_up(
    port: int | None, scale_spec: str | None, nats_cluster: int = 1, caldav_networks: tuple[str, ...] = ()
) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s up %(levelname)s %(message)s")
    # Whatever the supervisor and its children create (logs, sockets, state) is the owner's only.
    os.umask(0o077)
    settings = Settings()
    scale = parse_scale(scale_spec)
    if not 1 <= nats_cluster <= MAX_CLUSTER_SIZE:
        raise ValueError(f"--nats-cluster: between 1 and {MAX_CLUSTER_SIZE} nodes")
    if nats_cluster > 1 and settings.nats_url:
        raise ValueError(
            "--nats-cluster starts its own nodes: unset NATS_URL, or list your cluster's servers in it"
        )
    supervisor = Supervisor(
        settings=settings,
        port=port if port is not None else settings.http_port,
        scale=scale,
        nats_cluster=nats_cluster,
        caldav_networks=caldav_networks,
    )

    def on_signal(_signum: int, _frame: object) -> None:
        supervisor.stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started = time.monotonic()
    try:
        url = supervisor.start()
        supervisor.wait_ready(url)
        print(f"calagent ready {url}", flush=True)
        # How a person gets in (contract §18): the issuer when OpenID Connect is configured, else a
        # one-time link or a pasted token.
        if settings.oidc_enabled:
            print(f"sign in: open {url} and choose “Sign in with {settings.oidc_display_name}”", flush=True)
        else:
            print(
                "sign in: run `calagent login-link USER` and open the link it prints "
                "(one use, valid for 10 minutes); or paste the token `calagent token USER` prints",
                flush=True,
            )
        log.info("ready in %.2fs", time.monotonic() - started)
        while not supervisor.stopping:
            supervisor.reap()
            time.sleep(0.2)
        return 0
    except TimeoutError as exc:
        log.error("%s", exc)
        return 1
    finally:
        supervisor.stop()
