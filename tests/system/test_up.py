"""`calagent up` as a user runs it: real processes, real HTTP, the embedded servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest

from calagent.devtools.processes import free_port
from calagent.gateway.auth import issue_token
from calagent.runtime.settings import AUTH_SECRET_FILE
from calagent.scriptedmodel import ScriptedModelServer

from .scripts import create_meeting_script

pytestmark = pytest.mark.e2e

NOW = "2026-09-24T10:00:00+08:00"


def _argv(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:  # gone, or a zombie not yet reaped
        return []


def _cli(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "calagent.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


class Up:
    def __init__(self, data_dir: Path, extra: dict[str, str] | None = None, scale: str | None = None) -> None:
        self.port = free_port()
        self.data_dir = data_dir
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"NATS_URL", "DATABASE_URL", "OPENAI_BASE_URL", "CALAGENT_AUTH_SECRET"}
        }
        env.update({"CALAGENT_DATA_DIR": str(data_dir), "CALAGENT_NOW": NOW, **(extra or {})})
        argv = [sys.executable, "-m", "calagent.cli.main", "up", "--port", str(self.port)]
        if scale:
            argv += ["--scale", scale]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ready_after = 0.0
        self.signin_hint = ""
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 120.0) -> None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("calagent ready "):
                assert line.strip() == f"calagent ready {self.url}"
                self.ready_after = time.monotonic() - self.started
                self.signin_hint = self.proc.stdout.readline()
                return
            if not line and self.proc.poll() is not None:
                break
        raise AssertionError(f"not ready: {self.proc.stderr.read() if self.proc.stderr else ''}")

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children(recursive=True)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)

    @property
    def secret(self) -> str:
        """The token secret `calagent up` generated into the data dir (no CALAGENT_AUTH_SECRET)."""
        return (self.data_dir / AUTH_SECRET_FILE).read_text().strip()

    def call(
        self,
        method: str,
        path: str,
        user: str = "alice",
        body: dict[str, Any] | None = None,
        *,
        secret: str | None = None,
        timeout: float = 60,
    ) -> Any:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode() if body is not None else None,
            headers={
                "Authorization": f"Bearer {issue_token(user, secret or self.secret)}",
                "Content-Type": "application/json",
            },
            method=method,
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("calagent-up")


def test_up_serves_a_turn_and_sigterm_leaves_nothing_behind(data_dir: Path) -> None:
    up = Up(data_dir)
    try:
        up.wait_ready()
        print(f"\ncalagent up ready after {up.ready_after:.2f}s")
        with urllib.request.urlopen(up.url + "/healthz", timeout=5) as response:
            health = json.loads(response.read())
        assert health == {
            "status": "ok",
            "services": dict.fromkeys(("gateway", "agent", "commands", "timeparse", "evalrec"), "ok"),
            "dependencies": {"bus": "ok", "database": "ok"},
        }
        timings = []
        for i in range(5):
            began = time.perf_counter()
            answer = up.call(
                "POST", "/v1/chat", user=f"slice-{i}", body={"message": "明天下午三点和张三开会"}
            )
            timings.append((time.perf_counter() - began) * 1000)
            assert answer["outcome"] == "created", answer
        timings.sort()
        print(f"slice turn over HTTP with the demo model: median {timings[2]:.1f} ms")
        events = up.call(
            "GET", "/v1/events?start=2026-09-25T00:00:00%2B08:00&end=2026-09-26T00:00:00%2B08:00", "slice-0"
        )
        assert [e["title"] for e in events["events"]] == ["和张三开会"]

        # A saved zone is the zone of the user's next turn, under the services' own NATS users.
        saved = up.call("PUT", "/v1/settings", user="zoned", body={"tz": "America/Los_Angeles"})
        assert saved["tz"] == "America/Los_Angeles"
        zoned = up.call("POST", "/v1/chat", user="zoned", body={"message": "明天下午三点和张三开会"})
        assert zoned["outcome"] == "created", zoned
        # Wednesday evening in Los Angeles: tomorrow is the 24th there.
        assert [e["start"] for e in zoned["events"]] == ["2026-09-24T15:00:00-07:00"]
        family = up.descendants()
        assert len(family) >= 8  # nats, postgres (+ its workers), scripted model, five services

        # The operator's view of the same turn, through the CLI against the running system.
        cli_env = {**os.environ, "CALAGENT_DATA_DIR": str(data_dir)}
        cli_env.pop("NATS_URL", None)
        timeline = _cli(["timeline", answer["turn_id"]], cli_env)
        assert "model.request" in timeline and "tool.prepare_or_create_schedule" in timeline
        print(timeline)
        report = _cli(["report"], cli_env)
        assert "created" in report
        print(report)

        # How to sign in is printed, and the link the CLI prints signs the page in.
        assert "calagent login-link" in up.signin_hint
        link = _cli(["login-link", "slice-0"], cli_env).strip()
        assert link.startswith(f"{up.url}/#login=")
        request = urllib.request.Request(
            up.url + "/web/login",
            data=json.dumps({"token": link.split("#login=", 1)[1]}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read())["token"]

        # A crashed service is restarted with backoff and the system answers again.
        timeparse = next(p for p in family if _argv(p)[-1:] == ["calagent.timeparse"])
        timeparse.kill()
        deadline = time.monotonic() + 30
        restarted: list[psutil.Process] = []
        while time.monotonic() < deadline and not restarted:
            restarted = [
                p
                for p in up.descendants()
                if _argv(p)[-1:] == ["calagent.timeparse"] and p.pid != timeparse.pid
            ]
            time.sleep(0.2)
        assert restarted, "timeparse was not restarted"
        again = up.call("POST", "/v1/chat", user="after-crash", body={"message": "明天下午三点和张三开会"})
        assert again["outcome"] == "created"
        family = up.descendants()
    finally:
        up.stop()
    assert up.proc.returncode == 0
    time.sleep(0.5)
    alive = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], [p.cmdline() for p in alive]


def test_data_survives_a_restart_on_the_same_data_dir(data_dir: Path) -> None:
    up = Up(data_dir)
    try:
        up.wait_ready()
        events = up.call(
            "GET", "/v1/events?start=2026-09-25T00:00:00%2B08:00&end=2026-09-26T00:00:00%2B08:00", "slice-0"
        )
        assert [e["title"] for e in events["events"]] == ["和张三开会"]
    finally:
        up.stop()


@pytest.fixture
def counting_model() -> Iterator[ScriptedModelServer]:
    script = create_meeting_script("D+1")
    with ScriptedModelServer(script) as server:
        yield server


def test_scaled_replicas_share_turns_and_process_each_once(
    tmp_path: Path, counting_model: ScriptedModelServer
) -> None:
    up = Up(
        tmp_path,
        extra={"OPENAI_BASE_URL": counting_model.base_url, "OPENAI_API_KEY": "x"},
        scale="gateway=2,agent=3,commands=2",
    )
    turns = 24
    try:
        up.wait_ready()
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(
                pool.map(
                    lambda i: up.call(
                        "POST", "/v1/chat", user=f"scale-{i}", body={"message": "明天下午三点开会"}
                    ),
                    range(turns),
                )
            )
    finally:
        up.stop()
    assert all(a["outcome"] == "created" for a in answers)
    assert len({a["turn_id"] for a in answers}) == turns
    assert len(counting_model.requests) == turns  # each turn reached the model exactly once
    processed: dict[str, list[str]] = {}
    for log_file in sorted((tmp_path / "logs").glob("agent-*.log")):
        lines = [line for line in log_file.read_text().splitlines() if " processed by " in line]
        processed[log_file.name] = [line.split("turn ", 1)[1].split(" ", 1)[0] for line in lines]
    all_turns = [t for ids in processed.values() for t in ids]
    assert sorted(all_turns) == sorted(a["turn_id"] for a in answers)  # none twice, none lost
    assert sum(1 for ids in processed.values() if ids) >= 2, processed  # the work was shared
    served = [
        sum(1 for line in log.read_text().splitlines() if '"POST /v1/chat' in line)
        for log in sorted((tmp_path / "logs").glob("gateway-*.log"))
    ]
    assert len(served) == 2 and sum(served) == turns, served
    assert min(served) > 0, served  # both gateways on one port took connections
