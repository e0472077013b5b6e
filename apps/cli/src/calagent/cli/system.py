"""The whole system as its users run it, for the commands that measure or attack it from outside
(`calagent bench turns`, `calagent faults`): `calagent up` on a data dir of its own, every service
its own process, and a scripted model as a process beside it."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from calagent.devtools.processes import free_port

NOW = "2026-09-24T10:00:00+08:00"
ROLES = ("gateway", "agent", "commands", "timeparse", "evalrec")


def role_of(argv: str) -> str | None:
    """Which part of the system a process is, from its command line."""
    for name in ROLES:
        if f"calagent.{name}" in argv:
            return name
    if "nats-server" in argv:
        return "nats-server"
    if "postgres" in argv:
        return "postgres"
    return None


@dataclass
class System:
    """`calagent up` in `data_dir`, and a scripted model as its own process."""

    data_dir: Path
    scale: str | None = None
    # nats-server nodes (`calagent up --nats-cluster`); 1 is a single server.
    nats_cluster: int = 1
    secret: str = field(default_factory=lambda: secrets.token_hex(32))
    port: int = field(default_factory=free_port)
    model_port: int = field(default_factory=free_port)
    up: subprocess.Popen[str] | None = None
    model: subprocess.Popen[str] | None = None
    database_url: str = ""
    # The admin's NATS address (every node's, comma-separated, for a cluster), from `up.json`.
    nats_url: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def asyncpg_dsn(self) -> str:
        """The database for asyncpg itself (the URL the services get names SQLAlchemy's driver)."""
        return self.database_url.replace("postgresql+asyncpg://", "postgresql://")

    @property
    def model_url(self) -> str:
        return f"http://127.0.0.1:{self.model_port}"

    def _base_env(self) -> dict[str, str]:
        return {
            k: v for k, v in os.environ.items() if k not in {"NATS_URL", "DATABASE_URL", "OPENAI_BASE_URL"}
        }

    def start(self) -> None:
        self.model = subprocess.Popen(
            [sys.executable, "-m", "calagent.scriptedmodel", "--port", str(self.model_port)],
            env=self._base_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.model.stdout is not None
        self.model.stdout.readline()  # "scripted model listening …"
        self.start_up()

    def start_up(self, timeout: float = 180.0) -> float:
        """Start (or start again) the supervisor on the data dir; returns the seconds it took to be
        ready."""
        env = {
            **self._base_env(),
            "CALAGENT_DATA_DIR": str(self.data_dir),
            "CALAGENT_NOW": NOW,
            "CALAGENT_AUTH_SECRET": self.secret,
            "OPENAI_BASE_URL": f"{self.model_url}/v1",
            "OPENAI_API_KEY": "bench",
        }
        argv = [sys.executable, "-m", "calagent.cli.main", "up", "--port", str(self.port)]
        if self.scale:
            argv += ["--scale", self.scale]
        if self.nats_cluster > 1:
            argv += ["--nats-cluster", str(self.nats_cluster)]
        began = time.monotonic()
        self.up = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self.up.stdout is not None
        deadline = began + timeout
        while time.monotonic() < deadline:
            line = self.up.stdout.readline()
            if line.startswith("calagent ready "):
                break
            if not line and self.up.poll() is not None:
                raise RuntimeError(f"calagent up exited before it was ready (logs in {self.data_dir})")
        else:
            raise RuntimeError("calagent up was not ready in time")
        state = json.loads((self.data_dir / "up.json").read_text())
        self.database_url = state["database_url"]
        self.nats_url = state["nats_url"]
        return time.monotonic() - began

    def set_script(self, script: dict[str, Any]) -> None:
        httpx.put(f"{self.model_url}/_script", json=script, timeout=10).raise_for_status()

    def token(self, user: str) -> str:
        from calagent.gateway.auth import issue_token

        return issue_token(user, self.secret)

    def processes(self, *, roots: bool = False) -> dict[str, list[psutil.Process]]:
        """The system's processes by role; the model server is not part of the system. With
        `roots`, PostgreSQL is its postmaster alone, not its backends too (what a fault kills, not
        what CPU accounting sums)."""
        assert self.up is not None
        roles: dict[str, list[psutil.Process]] = {}
        for proc in psutil.Process(self.up.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                role = role_of(" ".join(proc.cmdline()))
                parent = proc.parent()
                if (
                    roots
                    and role == "postgres"
                    and parent is not None
                    and role_of(" ".join(parent.cmdline())) == "postgres"
                ):
                    continue
                if role is not None:
                    roles.setdefault(role, []).append(proc)
        return roles

    def stop(self) -> None:
        for proc in (self.up, self.model):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=30)
                if proc.poll() is None:
                    proc.kill()
