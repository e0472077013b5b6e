"""`calagent up --nats-cluster 3`: the bus as three nats-server nodes, and what losing one costs.

Real processes throughout: the supervisor, three nats-server nodes, PostgreSQL and the services.
The node that leads the turns stream is killed with SIGKILL under load while the supervisor is
frozen (SIGSTOP), so the node stays gone the way a lost machine does: the turns must go on from
the copies on the other two nodes, not from the node coming back. Then the supervisor resumes,
restarts the node, and the node catches up. Every client retries with its `client_message_id`
until answered; every calendar is read back.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import nats
import psutil
import pytest
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import StreamInfo

from calagent.cli.faults import Report, client_loop, read_back, send_until_answered
from calagent.cli.system import System
from calagent.cli.turnbench import bench_script
from calagent.contracts import subjects

pytestmark = pytest.mark.e2e

NODES = 3
STREAMS = (subjects.TURNS_STREAM, subjects.RECORDS_STREAM, subjects.DEADLETTER_STREAM)
KV_STREAM = f"KV_{subjects.GATEWAY_KEYS_BUCKET}"
CONSUMERS = (
    (subjects.TURNS_STREAM, subjects.AGENT_CONSUMER),
    (subjects.RECORDS_STREAM, subjects.EVALREC_CONSUMER),
)
# The followers of a lost raft leader wait 4-9 s without a heartbeat (nats-server's election
# timeout, not configurable) before one of them campaigns, and a turn needs every group it touches
# led again: the turns stream, the agent's consumer, the gateway's key bucket. Measured 5-9 s; the
# bound leaves room for the slowest draw of those timers plus one client retry.
RECOVERY_LIMIT_S = 12.0
CLIENTS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    system = System(tmp_path_factory.mktemp("calagent-cluster"), scale="agent=2", nats_cluster=NODES)
    try:
        system.start()
        system.set_script(bench_script(0))
        yield system
    finally:
        system.stop()


@pytest.fixture
async def admin(cluster: System) -> AsyncIterator[NatsClient]:
    connection = await nats.connect(
        cluster.nats_url.split(","), max_reconnect_attempts=-1, reconnect_time_wait=0.2
    )
    try:
        yield connection
    finally:
        await connection.close()


def _nodes(system: System) -> dict[str, psutil.Process]:
    """The running nats-server processes by server name (`calagent-<i>` runs `node-<i>/nats.conf`)."""
    found = {}
    for proc in system.processes(roots=True).get("nats-server", []):
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            conf = next(arg for arg in proc.cmdline() if arg.endswith("nats.conf"))
        except (psutil.Error, StopIteration):
            continue
        found[f"calagent-{Path(conf).parent.name.removeprefix('node-')}"] = proc
    return found


async def _info(js: JetStreamContext, stream: str) -> StreamInfo | None:
    try:
        return await js.stream_info(stream)
    except Exception:  # no leader yet, or the connection is moving to another node
        return None


def _fully_replicated(info: StreamInfo | None) -> bool:
    """A leader and every other node a current follower."""
    if info is None or info.cluster is None or info.cluster.leader is None:
        return False
    followers = info.cluster.replicas or []
    return len(followers) == NODES - 1 and all(peer.current and not peer.offline for peer in followers)


async def _wait_fully_replicated(js: JetStreamContext, streams: tuple[str, ...], limit_s: float) -> float:
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        infos = [await _info(js, stream) for stream in streams]
        if all(_fully_replicated(info) for info in infos):
            return time.monotonic() - began
        await asyncio.sleep(0.2)
    raise AssertionError(f"{streams} not fully replicated within {limit_s}s: {infos}")


async def test_services_connect_to_every_node_and_each_stream_has_a_copy_on_each(
    cluster: System, admin: NatsClient
) -> None:
    for role in ("gateway", "agent", "commands", "timeparse", "evalrec"):
        for proc in cluster.processes()[role]:
            env = proc.environ()
            assert len(env["NATS_URL"].split(",")) == NODES, role
            assert env["CALAGENT_NATS_REPLICAS"] == str(NODES)
    assert set(_nodes(cluster)) == {f"calagent-{i}" for i in range(1, NODES + 1)}

    # A keyed turn, so the gateway has opened its bucket of message keys.
    async with httpx.AsyncClient(base_url=cluster.url) as client:
        give_up_at = asyncio.get_running_loop().time() + 60
        assert await send_until_answered(client, cluster, "first", Report(), give_up_at)

    js = admin.jetstream(timeout=2)
    await _wait_fully_replicated(js, (*STREAMS, KV_STREAM), limit_s=30)
    for stream in (*STREAMS, KV_STREAM):
        info = await js.stream_info(stream)
        assert info.config.num_replicas == NODES, stream
        assert info.cluster is not None and info.cluster.leader is not None, stream
    for stream, durable in CONSUMERS:
        consumer = await js.consumer_info(stream, durable)
        assert consumer.config.num_replicas == NODES, durable
        assert consumer.cluster is not None and consumer.cluster.leader is not None, durable


async def _first_turn_after(client: httpx.AsyncClient, system: System, report: Report) -> float:
    """Seconds until a turn sent now (retried with its key, as a client does) is answered."""
    user = f"probe-{uuid.uuid4().hex[:8]}"
    report.users.append(user)  # read back with the others
    began = asyncio.get_running_loop().time()
    assert await send_until_answered(client, system, user, report, began + 120)
    return asyncio.get_running_loop().time() - began


async def _new_leader(admin: NatsClient, stream: str, old: str, limit_s: float) -> tuple[str, float]:
    began = time.monotonic()
    fast = admin.jetstream(timeout=0.25)  # asked often: a leaderless stream answers nothing
    while time.monotonic() - began < limit_s:
        info = await _info(fast, stream)
        if info is not None and info.cluster is not None and info.cluster.leader not in (None, old):
            return info.cluster.leader, time.monotonic() - began
        await asyncio.sleep(0.05)
    raise AssertionError(f"{stream} elected no new leader within {limit_s}s")


async def test_killing_the_turn_streams_leader_under_load_loses_and_duplicates_nothing(
    cluster: System, admin: NatsClient
) -> None:
    js = admin.jetstream(timeout=2)
    await _wait_fully_replicated(js, STREAMS, limit_s=30)
    info = await js.stream_info(subjects.TURNS_STREAM)
    assert info.cluster is not None and info.cluster.leader is not None
    leader = info.cluster.leader
    victim = _nodes(cluster)[leader]
    assert cluster.up is not None
    supervisor = psutil.Process(cluster.up.pid)

    report = Report()
    load = asyncio.Event()
    async with httpx.AsyncClient(
        base_url=cluster.url, limits=httpx.Limits(max_connections=CLIENTS + 8)
    ) as client:
        workers = [asyncio.create_task(client_loop(client, cluster, report, load)) for _ in range(CLIENTS)]
        try:
            await asyncio.sleep(3.0)  # turns are flowing before the fault
            before = report.answered
            # The node stays down until we say so: the supervisor cannot restart what it cannot run.
            supervisor.send_signal(signal.SIGSTOP)
            try:
                victim.send_signal(signal.SIGKILL)
                recovery, (new_leader, election) = await asyncio.gather(
                    _first_turn_after(client, cluster, report),
                    _new_leader(admin, subjects.TURNS_STREAM, leader, limit_s=60),
                )
                assert not victim.is_running() or victim.status() == psutil.STATUS_ZOMBIE
                # The load goes on with one node gone: three seconds at least, and on a machine
                # too busy to answer in those, until the clients' turns are answered again (the
                # same bound as the first turn's recovery), not a fixed window.
                answered_before = report.answered
                loop = asyncio.get_running_loop()
                down_since = loop.time()
                await asyncio.sleep(3.0)
                for _ in range(round((RECOVERY_LIMIT_S - 3.0) / 0.1)):
                    if report.answered > answered_before:
                        break
                    await asyncio.sleep(0.1)
                down_s = loop.time() - down_since
                answered_while_down = report.answered - answered_before
            finally:
                supervisor.send_signal(signal.SIGCONT)
            # The supervisor restarts the node; it rejoins and catches up with what it missed.
            caught_up = await _wait_fully_replicated(js, STREAMS, limit_s=60)
            await asyncio.sleep(2.0)  # and turns go on with all three again
        finally:
            load.set()
            await asyncio.gather(*workers)
        await read_back(client, cluster, report)

    print(
        f"\nkilled {leader} (the turns stream's leader) under load: new leader {new_leader} after "
        f"{election:.2f}s, a new turn answered after {recovery:.2f}s, {answered_while_down} turns answered "
        f"in {down_s:.1f} s with the node gone, the restarted node caught up {caught_up:.2f}s after the supervisor "
        f"resumed; {report.turns_sent} turns, {report.lost} lost, {report.duplicated} duplicated, "
        f"{report.unanswered} unanswered, {report.http_5xx} 5xx and {report.connection_errors} connection "
        "errors retried"
    )
    assert report.answered > before
    assert recovery < RECOVERY_LIMIT_S, recovery
    assert answered_while_down > 0
    assert (report.lost, report.duplicated, report.unanswered, report.rejected) == (0, 0, 0, 0), (
        report.as_dict()
    )
    restarted = _nodes(cluster)
    assert set(restarted) == {f"calagent-{i}" for i in range(1, NODES + 1)}
    assert restarted[leader].pid != victim.pid


@pytest.mark.parametrize(
    ("nodes", "nats_url", "reason"),
    [("9", None, "between 1 and 5"), ("3", "nats://elsewhere:4222", "unset NATS_URL")],
    ids=["more-nodes-than-jetstream-copies", "beside-a-given-nats-url"],
)
def test_up_refuses_a_cluster_it_cannot_run_before_starting_anything(
    tmp_path: Path, nodes: str, nats_url: str | None, reason: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    env["CALAGENT_DATA_DIR"] = str(tmp_path)
    if nats_url:
        env["NATS_URL"] = nats_url
    done = subprocess.run(
        [sys.executable, "-m", "calagent.cli.main", "up", "--nats-cluster", nodes],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert reason in done.stderr
    assert not (tmp_path / "nats").exists()
