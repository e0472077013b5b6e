"""`calagent up` under faults, and what it lets in: killed servers, a killed supervisor, its files.

Real processes throughout: the supervisor, nats-server, PostgreSQL and the five services.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from calagent.devtools.nats_server import EmbeddedNats
from calagent.devtools.postgres import EmbeddedPostgres

from .test_up import Up, _argv, _cli

pytestmark = pytest.mark.e2e

RECOVERY_LIMIT_S = 10.0
# The token secret every earlier version fell back to, published in its source.
OLD_DEVELOPMENT_SECRET = "calagent-development-secret-change-me"
CREATE = {"message": "明天下午三点和张三开会"}


def _server(up: Up, name: str) -> psutil.Process:
    """The supervisor's own child named `name` (nats-server, or the postgres postmaster)."""
    for child in psutil.Process(up.proc.pid).children():
        try:
            if child.name() == name and child.status() != psutil.STATUS_ZOMBIE:
                return child
        except psutil.Error:
            continue
    raise AssertionError(f"no {name} under the supervisor")


def _listening_ports(proc: psutil.Process) -> set[int]:
    return {c.laddr.port for c in proc.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}


def _listening_successor(up: Up, name: str, victim: psutil.Process, ports: set[int]) -> psutil.Process | None:
    try:
        successor = _server(up, name)
        if successor.pid != victim.pid and ports <= _listening_ports(successor):
            return successor
    except (AssertionError, psutil.Error):
        pass
    return None


def _recovery_after_kill_9(up: Up, name: str) -> tuple[float, float]:
    """Kill `name` outright; time until a new one listens on the same ports (services keep their
    URLs), and until a turn is created again end to end."""
    victim = _server(up, name)
    ports = _listening_ports(victim)
    assert ports
    victim.kill()
    killed = time.monotonic()
    listening = 0.0
    while time.monotonic() - killed < 30 and not listening:
        if _listening_successor(up, name, victim, ports) is not None:
            listening = time.monotonic() - killed
        time.sleep(0.02)
    assert listening, f"no new {name} listens on {ports}"
    answer = None
    while time.monotonic() - killed < 30:
        try:
            answer = up.call("POST", "/v1/chat", user=f"after-{name}", body=CREATE, timeout=5)
            if answer.get("outcome") in ("created", "conflict"):
                break
        except (urllib.error.URLError, TimeoutError, OSError):
            pass
        time.sleep(0.1)
    answered = time.monotonic() - killed
    assert answer is not None and answer["outcome"] in ("created", "conflict"), answer
    return listening, answered


SERVICE_MODULES = {f"calagent.{s}" for s in ("gateway", "agent", "commands", "timeparse", "evalrec")}
# The service processes of the module's system as it became ready, by module.
SERVICES_AT_START: dict[str, int] = {}


def _services(up: Up) -> dict[str, int]:
    found = {}
    for proc in up.descendants():
        argv = _argv(proc)
        if argv[-2:-1] == ["-m"] and argv[-1] in SERVICE_MODULES:
            found[argv[-1]] = proc.pid
    return found


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    up = Up(tmp_path_factory.mktemp("calagent-faults"))
    try:
        up.wait_ready()
        SERVICES_AT_START.update(_services(up))
        yield up
    finally:
        up.stop()


def test_a_killed_nats_server_is_restarted_on_its_port_and_turns_answer_again(running: Up) -> None:
    assert running.call("POST", "/v1/chat", user="before", body=CREATE)["outcome"] == "created"
    listening, answered = _recovery_after_kill_9(running, "nats-server")
    print(
        f"\nkill -9 nats-server: listening again after {listening:.2f}s, a turn created after {answered:.2f}s"
    )
    assert answered < RECOVERY_LIMIT_S


def test_a_killed_postgres_is_restarted_over_its_stale_lock_files_and_turns_answer_again(running: Up) -> None:
    listening, answered = _recovery_after_kill_9(running, "postgres")
    print(f"\nkill -9 postgres: listening again after {listening:.2f}s, a turn created after {answered:.2f}s")
    assert answered < RECOVERY_LIMIT_S
    events = running.call(
        "GET", "/v1/events?start=2026-09-25T00:00:00%2B08:00&end=2026-09-26T00:00:00%2B08:00", "before"
    )
    assert [e["title"] for e in events["events"]] == ["和张三开会"]  # written before the kill, still there


def test_a_keyed_retry_works_under_the_gateways_own_credential(running: Up) -> None:
    # The client_message_id claims live in the gateway's KV bucket: its grant must reach it.
    body = {**CREATE, "client_message_id": "retry-under-auth"}
    first = running.call("POST", "/v1/chat", user="keyed", body=body)
    again = running.call("POST", "/v1/chat", user="keyed", body=body)
    assert first["outcome"] == "created"
    assert again["turn_id"] == first["turn_id"]
    assert "Violation" not in (running.data_dir / "nats" / "nats.log").read_text()


def test_no_service_exited_while_the_servers_were_down(running: Up) -> None:
    assert set(SERVICES_AT_START) == SERVICE_MODULES
    assert _services(running) == SERVICES_AT_START


def test_each_service_has_its_own_nats_user_and_secrets_stay_private(running: Up) -> None:
    users = {}
    for proc in running.descendants():
        argv = _argv(proc)
        if argv[-2:-1] == ["-m"] and argv[-1] in SERVICE_MODULES:
            env = proc.environ()
            service = argv[-1].removeprefix("calagent.")
            users[service] = env["NATS_URL"].split("://", 1)[1].split(":", 1)[0]
            assert len(env["CALAGENT_AUTH_SECRET"]) >= 32
    assert users == {s: s for s in ("gateway", "agent", "commands", "timeparse", "evalrec")}

    data = running.data_dir
    for private in [
        data / "up.json",
        data / "auth-secret",
        data / "nats" / "users.json",
        data / "nats" / "nats.conf",
        data / "nats" / "nats.log",
        data / "postgres" / "password",
        data / "postgres" / "postgres.log",
        *(data / "logs").glob("*.log"),
    ]:
        assert private.stat().st_mode & 0o777 == 0o600, private
    for directory in (data, data / "logs", data / "nats", data / "postgres"):
        # Under root the server's own user must traverse toward its data (x), never list or read.
        assert directory.stat().st_mode & 0o066 == 0, directory

    passwords = json.loads((data / "nats" / "users.json").read_text()).values()
    database_password = (data / "postgres" / "password").read_text().strip()
    for log in [*(data / "logs").glob("*.log"), data / "nats" / "nats.log"]:
        text = log.read_text()
        assert not any(password in text for password in [*passwords, database_password]), log


def test_calagent_token_signs_with_the_generated_secret_and_the_old_public_one_is_refused(
    running: Up,
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"CALAGENT_AUTH_SECRET", "NATS_URL"}}
    env["CALAGENT_DATA_DIR"] = str(running.data_dir)
    token = _cli(["token", "token-user"], env).strip()
    request = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, urllib.request; r = urllib.request.Request(sys.argv[1], headers={'Authorization': 'Bearer ' + sys.argv[2]});"
            "print(urllib.request.urlopen(r).status)",
            running.url + "/v1/commands/active",
            token,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert request.stdout.strip() == "200", request.stderr
    with pytest.raises(urllib.error.HTTPError) as refused:
        running.call("GET", "/v1/commands/active", secret=OLD_DEVELOPMENT_SECRET)
    assert refused.value.code == 401


def test_a_second_up_on_a_running_data_dir_refuses_and_leaves_the_first_alone(running: Up) -> None:
    second = Up(running.data_dir)
    _, err = second.proc.communicate(timeout=60)
    assert second.proc.returncode != 0
    assert "already runs" in err
    assert json.loads((running.data_dir / "up.json").read_text())["pid"] == running.proc.pid
    assert running.call("POST", "/v1/chat", user="beside-second", body=CREATE)["outcome"] in (
        "created",
        "conflict",
    )


def names_of(processes: list[psutil.Process]) -> set[str]:
    found = set()
    for process in processes:
        try:
            found.add(process.name())
        except psutil.NoSuchProcess:
            continue
    return found


def still_running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_killing_the_supervisor_takes_every_server_and_service_with_it(tmp_path: Path) -> None:
    up = Up(tmp_path)
    up.wait_ready()
    family = up.descendants()
    # PostgreSQL starts and ends short-lived workers: one listed may be gone by the time it is read.
    assert {"nats-server", "postgres"} <= names_of(family)
    up.proc.send_signal(signal.SIGKILL)
    up.proc.wait()
    deadline = time.monotonic() + 20
    alive = family
    while alive and time.monotonic() < deadline:
        alive = [p for p in family if still_running(p)]
        time.sleep(0.1)
    assert alive == [], [p.cmdline() for p in alive]

    again = Up(tmp_path)
    try:
        again.wait_ready()
        assert again.call("POST", "/v1/chat", user="after-supervisor", body=CREATE)["outcome"] == "created"
    finally:
        again.stop()


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "as-earlier-versions-left-them"])
def test_servers_a_dead_supervisor_left_running_are_stopped_by_the_next_up(
    tmp_path: Path, recorded: bool
) -> None:
    # Running on the data dir, their supervisor gone; earlier versions did not record their pids.
    nats = EmbeddedNats(tmp_path / "nats")
    nats.start()
    postgres = EmbeddedPostgres(tmp_path / "postgres")
    postgres.start()
    (tmp_path / "postgres" / "port").write_text(str(postgres.port))
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert nats.proc is not None and postgres.proc is not None
    leftovers = [psutil.Process(nats.proc.pid), psutil.Process(postgres.proc.pid)]
    if recorded:
        servers = [
            {"pid": nats.proc.pid, "marker": str(nats.conf_path), "signal": int(signal.SIGTERM)},
            {"pid": postgres.proc.pid, "marker": str(postgres.pgdata), "signal": int(signal.SIGINT)},
        ]
        (tmp_path / "up.json").write_text(json.dumps({"pid": gone.pid, "servers": servers}))
    # else: no up.json at all, as an earlier version's failed second start left it (it deleted
    # the file on its way out)
    up = Up(tmp_path)
    try:
        up.wait_ready()
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in leftovers)
        assert up.call("POST", "/v1/chat", user="after-leftovers", body=CREATE)["outcome"] == "created"
    finally:
        up.stop()
        nats.stop()
        postgres.stop()


def test_a_gateway_started_alone_without_a_secret_refuses_with_the_reason(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CALAGENT_AUTH_SECRET"}
    env.update({"CALAGENT_DATA_DIR": str(tmp_path), "NATS_URL": "nats://127.0.0.1:1"})
    done = subprocess.run(
        [sys.executable, "-m", "calagent.gateway"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "CALAGENT_AUTH_SECRET is unset" in done.stderr
    assert "calagent up" in done.stderr
