"""`calagent up`: the supervisor that runs the whole system in the foreground.

It starts what is not given (nats-server, PostgreSQL, the scripted demo model), starts every
service as its own process (replicas share work through queue groups and pull consumers), restarts
a crashed service with backoff, prints one ready line once `/healthz` says all five answer, and on
Ctrl-C or SIGTERM stops everything it started, servers included.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from calagent.contracts.subjects import SERVICES
from calagent.runtime.embedded import EmbeddedNats, EmbeddedPostgres, free_port
from calagent.runtime.settings import DEV_AUTH_SECRET, Settings

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


def _die_with_parent() -> None:
    # Children die with the supervisor even if it is SIGKILLed (Linux PR_SET_PDEATHSIG).
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    log_path: Path | None = None

    def start(self) -> None:
        out = self.log_path.open("ab") if self.log_path else None
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=out if out else None,
            stderr=subprocess.STDOUT if out else None,
            preexec_fn=_die_with_parent,
        )
        self.started_at = time.monotonic()


@dataclass
class Supervisor:
    settings: Settings
    port: int
    scale: dict[str, int]
    children: list[Child] = field(default_factory=list)
    nats: EmbeddedNats | None = None
    postgres: EmbeddedPostgres | None = None
    stopping: bool = False

    def _child_env(self, nats_url: str, database_url: str, model_url: str | None) -> dict[str, str]:
        env = dict(os.environ)
        env["NATS_URL"] = nats_url
        env["DATABASE_URL"] = database_url
        env["CALAGENT_HTTP_PORT"] = str(self.port)
        env["PYTHONUNBUFFERED"] = "1"
        if model_url:
            env["OPENAI_BASE_URL"] = model_url
            env.setdefault("OPENAI_API_KEY", "scripted-demo")
        return env

    def start(self) -> str:
        data_dir = self.settings.data_dir.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        logs = data_dir / "logs"
        logs.mkdir(exist_ok=True)
        if self.settings.auth_secret == DEV_AUTH_SECRET:
            log.warning("CALAGENT_AUTH_SECRET is unset: using the development secret (never in production)")

        nats_url = self.settings.nats_url
        if not nats_url:
            self.nats = EmbeddedNats(data_dir / "nats")
            nats_url = self.nats.start()
        database_url = self.settings.database_url
        if not database_url:
            self.postgres = EmbeddedPostgres(data_dir / "postgres", port=_stable_port(data_dir / "postgres"))
            database_url = self.postgres.start()

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

        env = self._child_env(nats_url, database_url, model_url)
        # Services whose start-up runs migrations go first so replicas do not all wait on the lock.
        for service in ("timeparse", "commands", "agent", "evalrec", "gateway"):
            for index in range(self.scale[service]):
                child = Child(
                    service if self.scale[service] == 1 else f"{service}-{index + 1}",
                    [sys.executable, "-m", f"calagent.{service}"],
                    env,
                    log_path=logs / f"{service}-{index + 1}.log",
                )
                child.start()
                self.children.append(child)

        url = f"http://127.0.0.1:{self.port}"
        (data_dir / STATE_FILE).write_text(
            json.dumps({"url": url, "nats_url": nats_url, "database_url": database_url, "pid": os.getpid()})
        )
        return url

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
        """Restart crashed children with exponential backoff (capped at 30 s)."""
        now = time.monotonic()
        for child in self.children:
            if child.proc is None or self.stopping:
                continue
            code = child.proc.poll()
            if code is None:
                if child.restarts and now - child.started_at > 60:
                    child.restarts = 0  # stable again: the next crash starts the backoff over
                continue
            if not child.next_start:
                delay = min(30.0, 0.5 * 2**child.restarts)
                child.next_start = now + delay
                log.error("%s exited with status %s; restarting in %.1fs", child.name, code, delay)
            elif now >= child.next_start:
                child.restarts += 1
                child.next_start = 0.0
                child.start()
                log.warning("%s restarted (restart #%s)", child.name, child.restarts)

    def stop(self) -> None:
        self.stopping = True
        for child in self.children:
            if child.proc is not None and child.proc.poll() is None:
                child.proc.terminate()
        deadline = time.monotonic() + 20
        for child in self.children:
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
        with contextlib.suppress(FileNotFoundError):
            (self.settings.data_dir.resolve() / STATE_FILE).unlink()


def _stable_port(pg_dir: Path) -> int:
    """Keep PostgreSQL on the same port across restarts of one data dir when that port is free."""
    marker = pg_dir / "port"
    if marker.exists():
        with contextlib.suppress(ValueError):
            port = int(marker.read_text())
            import socket

            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) != 0:
                    return port
    port = free_port()
    pg_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(port))
    return port


def run_up(port: int | None, scale_spec: str | None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s up %(levelname)s %(message)s")
    settings = Settings()
    scale = parse_scale(scale_spec)
    supervisor = Supervisor(
        settings=settings, port=port if port is not None else settings.http_port, scale=scale
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
