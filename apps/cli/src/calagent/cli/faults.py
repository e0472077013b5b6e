"""`calagent faults`: kill the running system's parts under load and count what was lost.

The system runs as users run it (`calagent up`, every service its own process, replicas of the
agent, commands and gateway). Clients send create turns, each for a user of its own, and retry a
failed request with the same `client_message_id` until it is answered, as a well-behaved client
does. First the bus is fuzzed (`calagent.cli.busfuzz`: without credentials, with a service's
credentials outside its role, garbage on every subject). Then one part after another is killed with SIGKILL — each service, nats-server,
PostgreSQL, and now and then the supervisor itself (which is then started again on the same data
dir) — and the time until `/healthz` answers 200 again is taken as that fault's recovery.
With `--nats-cluster N` the bus is N nats-server nodes and each `nats-server` fault kills one of
them at random: the streams have a copy on every node, so the others elect new leaders and the
turns go on while the supervisor brings the node back.

Afterwards every user's calendar is read back through `GET /v1/events`: a turn whose event is not
there was lost, one whose event is there twice was duplicated. It prints: faults injected, turns
sent, lost, duplicated, unanswered, the 5xx and connection errors clients saw (each retried), and
the slowest recovery. The exit status is 1 when anything was lost, duplicated, left unanswered or
did not recover.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import statistics
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from calagent.cli.busfuzz import BusFuzzReport, fuzz_bus, passwords_of
from calagent.cli.system import System
from calagent.cli.turnbench import bench_script

SERVICE_TARGETS = ("agent", "commands", "timeparse", "evalrec", "gateway")
SERVER_TARGETS = ("nats-server", "postgres")
SUPERVISOR = "supervisor"
SCALE = "agent=2,commands=2,gateway=2"
CREATE = "明天下午三点开会"
RECOVERY_LIMIT_S = 60.0
# A client gives up on a turn only this long after the load stopped: every fault has recovered by
# then, so a turn still unanswered is a turn the system dropped.
GIVE_UP_AFTER_S = 150.0


@dataclass
class Report:
    faults: Counter[str] = field(default_factory=Counter)
    recoveries: dict[str, list[float]] = field(default_factory=dict)
    unrecovered: int = 0
    turns_sent: int = 0
    answered: int = 0
    unanswered: int = 0
    lost: int = 0
    duplicated: int = 0
    rejected: int = 0
    http_5xx: int = 0
    connection_errors: int = 0
    users: list[str] = field(default_factory=list)
    bus: BusFuzzReport | None = None
    # Services that were not the same processes after the bus fuzz: a message crashed them.
    crashed_by_fuzz: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        bus_ok = self.bus is None or (self.bus.ok and not self.crashed_by_fuzz)
        return bus_ok and not (
            self.lost or self.duplicated or self.unanswered or self.unrecovered or self.rejected
        )

    def as_dict(self) -> dict[str, Any]:
        recoveries = [v for values in self.recoveries.values() for v in values]
        return {
            "faults_injected": sum(self.faults.values()),
            "faults": dict(self.faults),
            "turns_sent": self.turns_sent,
            "answered": self.answered,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "unanswered": self.unanswered,
            "rejected_4xx": self.rejected,
            "http_5xx_retried": self.http_5xx,
            "connection_errors_retried": self.connection_errors,
            "unrecovered": self.unrecovered,
            "slowest_recovery_s": round(max(recoveries), 2) if recoveries else None,
            "bus_fuzz": None if self.bus is None else {**self.bus.as_dict(), "crashed": self.crashed_by_fuzz},
            "recovery_s": {
                target: {
                    "median": round(statistics.median(values), 2),
                    "max": round(max(values), 2),
                    "n": len(values),
                }
                for target, values in sorted(self.recoveries.items())
                if values
            },
        }


def format_report(report: Report) -> str:
    data = report.as_dict()
    lines = [
        f"faults injected: {data['faults_injected']} "
        + "("
        + ", ".join(f"{k} {v}" for k, v in sorted(report.faults.items()))
        + ")",
        f"turns sent: {data['turns_sent']}, answered: {data['answered']}, lost: {data['lost']}, "
        f"duplicated: {data['duplicated']}, unanswered: {data['unanswered']}",
        f"HTTP 5xx seen by clients (each retried with the same key): {data['http_5xx_retried']}; "
        f"connection errors retried: {data['connection_errors_retried']}; 4xx: {data['rejected_4xx']}",
        f"slowest recovery: {data['slowest_recovery_s']} s; unrecovered: {data['unrecovered']}",
    ]
    bus = report.bus
    if bus is not None:
        lines.append(
            f"bus fuzz: connections without valid credentials refused {bus.connections_refused}/"
            f"{bus.connections_tried}; forged turn.done refused {bus.forged_done_refused}/"
            f"{bus.forged_done_tried} (delivered {bus.forged_done_delivered}); cross-service reads "
            f"refused {bus.cross_reads_refused}/{bus.cross_reads_tried}; garbage sent "
            f"{bus.garbage_sent}, dead-lettered {bus.dead_letters_added}, services crashed "
            f"{len(report.crashed_by_fuzz)}"
        )
    for target, numbers in data["recovery_s"].items():
        lines.append(
            f"  {target:<12} median {numbers['median']:>6} s  max {numbers['max']:>6} s  ({numbers['n']})"
        )
    return "\n".join(lines)


# ---- the clients ---------------------------------------------------------------------------------------


async def send_until_answered(
    client: httpx.AsyncClient, system: System, user: str, report: Report, give_up_at: float
) -> bool:
    key = uuid.uuid4().hex
    headers = {"Authorization": f"Bearer {system.token(user)}"}
    body = {"message": CREATE, "client_message_id": key}
    loop = asyncio.get_running_loop()
    while loop.time() < give_up_at:
        try:
            response = await client.post("/v1/chat", json=body, headers=headers, timeout=120.0)
        except httpx.TransportError:
            report.connection_errors += 1
            await asyncio.sleep(0.5)
            continue
        if response.status_code == 200:
            return True
        if response.status_code >= 500:
            report.http_5xx += 1
            await asyncio.sleep(0.5)
            continue
        report.rejected += 1
        return False
    return False


async def client_loop(client: httpx.AsyncClient, system: System, report: Report, load: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not load.is_set():
        user = f"fault-{uuid.uuid4().hex[:12]}"
        report.turns_sent += 1
        report.users.append(user)
        give_up_at = loop.time() + 10 * 3600  # moved to a bound once the load stops
        task = asyncio.ensure_future(send_until_answered(client, system, user, report, give_up_at))
        stopped = asyncio.ensure_future(load.wait())
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            # The load stopped while this turn is still being retried: it gets a bounded time more.
            try:
                answered = await asyncio.wait_for(task, GIVE_UP_AFTER_S)
            except TimeoutError:
                answered = False
        else:
            stopped.cancel()
            answered = task.result()
        if answered:
            report.answered += 1
        else:
            report.unanswered += 1


# ---- the faults ----------------------------------------------------------------------------------------


async def healthy(client: httpx.AsyncClient) -> bool:
    try:
        response = await client.get("/healthz", timeout=3.0)
    except httpx.TransportError:
        return False
    return response.status_code == 200


async def wait_recovered(
    client: httpx.AsyncClient, system: System, target: str, victim: int | None, count: int = 1
) -> bool:
    """Healthy again, and the killed part replaced by a process of its own: `count` processes of
    the target's role (its replicas, a cluster's nodes) run again, the victim not among them."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RECOVERY_LIMIT_S
    while loop.time() < deadline:
        replaced = True
        if victim is not None:
            pids = {p.pid for p in system.processes(roots=True).get(target, []) if _alive(p)}
            replaced = len(pids) >= count and victim not in pids
        if replaced and await healthy(client):
            return True
        await asyncio.sleep(0.1)
    return False


def _alive(proc: psutil.Process) -> bool:
    # A killed child stays listed as a zombie until the supervisor reaps it.
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


async def kill_one(client: httpx.AsyncClient, system: System, target: str, report: Report) -> None:
    began = time.monotonic()
    if target == SUPERVISOR:
        assert system.up is not None
        system.up.send_signal(signal.SIGKILL)
        system.up.wait(timeout=10)
        # What an operator (or systemd) does: start it again on the same data dir.
        await asyncio.to_thread(system.start_up)
        recovered = await wait_recovered(client, system, target, None)
    else:
        victims = system.processes(roots=True).get(target, [])
        if not victims:
            await wait_recovered(client, system, target, None)
            victims = system.processes(roots=True).get(target, [])
        victim = random.choice(victims)
        with contextlib.suppress(psutil.NoSuchProcess):
            victim.send_signal(signal.SIGKILL)
        recovered = await wait_recovered(client, system, target, victim.pid, len(victims))
    report.faults[target] += 1
    if recovered:
        report.recoveries.setdefault(target, []).append(time.monotonic() - began)
    else:
        report.unrecovered += 1


def schedule(kills: int, targets: tuple[str, ...], supervisor_every: int) -> list[str]:
    plan: list[str] = []
    index = 0
    while len(plan) < kills:
        if supervisor_every and len(plan) % supervisor_every == supervisor_every - 1:
            plan.append(SUPERVISOR)
        else:
            plan.append(targets[index % len(targets)])
            index += 1
    return plan


async def read_back(client: httpx.AsyncClient, system: System, report: Report) -> None:
    async def count(user: str) -> int:
        headers = {"Authorization": f"Bearer {system.token(user)}"}
        params = {"start": "2026-09-01T00:00:00+08:00", "end": "2026-10-31T00:00:00+08:00"}
        for _ in range(60):
            try:
                response = await client.get("/v1/events", params=params, headers=headers, timeout=10.0)
                if response.status_code == 200:
                    return len(response.json()["events"])
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.5)
        raise RuntimeError(f"could not read back the events of {user}")

    limit = asyncio.Semaphore(16)

    async def check(user: str) -> None:
        async with limit:
            found = await count(user)
        if found == 0:
            report.lost += 1
        elif found > 1:
            report.duplicated += 1

    await asyncio.gather(*(check(user) for user in report.users))


async def fuzz_the_bus(client: httpx.AsyncClient, system: System, report: Report) -> None:
    """The bus fuzz on the freshly started system, then: the same service processes, healthy."""
    before = {role: {p.pid for p in procs} for role, procs in system.processes(roots=True).items()}
    report.bus = await fuzz_bus(system.nats_url, passwords_of(system.data_dir))
    after = {role: {p.pid for p in procs} for role, procs in system.processes(roots=True).items()}
    report.crashed_by_fuzz = sorted(role for role, pids in before.items() if after.get(role) != pids)
    if not await wait_recovered(client, system, "gateway", None):
        report.crashed_by_fuzz.append("healthz")


async def attack(
    system: System,
    kills: int,
    clients: int,
    gap_s: float,
    targets: tuple[str, ...],
    supervisor_every: int,
    bus_fuzz: bool,
) -> Report:
    report = Report()
    load = asyncio.Event()
    limits = httpx.Limits(max_connections=clients + 8)
    async with httpx.AsyncClient(base_url=system.url, limits=limits) as client:
        if bus_fuzz:
            await fuzz_the_bus(client, system, report)
        workers = [asyncio.create_task(client_loop(client, system, report, load)) for _ in range(clients)]
        try:
            await asyncio.sleep(2.0)  # the load is running before the first fault
            for target in schedule(kills, targets, supervisor_every):
                await kill_one(client, system, target, report)
                await asyncio.sleep(gap_s)
        finally:
            load.set()
            await asyncio.gather(*workers)
        await read_back(client, system, report)
    return report


def run_faults(
    *,
    kills: int,
    clients: int,
    gap_s: float = 0.5,
    targets: tuple[str, ...] = SERVICE_TARGETS + SERVER_TARGETS,
    supervisor_every: int = 25,
    bus_fuzz: bool = True,
    data_dir: Path | None = None,
    nats_cluster: int = 1,
) -> Report:
    with tempfile.TemporaryDirectory(prefix="calagent-faults-") as tmp:
        system = System(data_dir or Path(tmp), scale=SCALE, nats_cluster=nats_cluster)
        try:
            system.start()
            system.set_script(bench_script(0))
            return asyncio.run(attack(system, kills, clients, gap_s, targets, supervisor_every, bus_fuzz))
        finally:
            system.stop()


def run_faults_command(args: Any) -> int:
    report = run_faults(
        kills=args.kills,
        clients=args.clients,
        gap_s=args.gap,
        supervisor_every=args.supervisor_every,
        nats_cluster=args.nats_cluster,
    )
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(format_report(report))
    return 0 if report.ok else 1
