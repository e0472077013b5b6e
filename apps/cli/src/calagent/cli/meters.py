"""What the benches read off a running system's processes: CPU seconds and resident memory per
role (summed over its replicas), a piece of work's wall time, and a percentile of many."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator

import psutil

from calagent.cli.system import System


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def sum_by_role(
    procs: dict[str, list[psutil.Process]], measure: Callable[[psutil.Process], float]
) -> dict[str, float]:
    """`measure` of each role's processes, summed over its replicas (a process gone meanwhile
    counts nothing)."""
    totals: dict[str, float] = {}
    for role, members in procs.items():
        total = 0.0
        for proc in members:
            with contextlib.suppress(psutil.Error):
                total += measure(proc)
        totals[role] = total
    return totals


def _cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def cpu_seconds(procs: dict[str, list[psutil.Process]]) -> dict[str, float]:
    return sum_by_role(procs, _cpu_s)


@contextlib.contextmanager
def cpu_meter(system: System, out: dict[str, float]) -> Iterator[None]:
    # PostgreSQL forks a backend per connection: list the processes again after the work so a
    # backend born during it is counted (from zero), not missed.
    before = cpu_seconds(system.processes())
    yield
    after = cpu_seconds(system.processes())
    for role, seconds in after.items():
        out[role] = seconds - before.get(role, 0.0)


async def timed(work: Awaitable[object]) -> float:
    began = time.perf_counter()
    await work
    return (time.perf_counter() - began) * 1000


def _rss_mib(proc: psutil.Process) -> float:
    return float(proc.memory_info().rss) / 2**20


def rss_mib(system: System) -> dict[str, float]:
    """Resident memory per role (summed over replicas), in MiB."""
    return sum_by_role(system.processes(), _rss_mib)


async def sample_peak_rss(system: System, peak: dict[str, float], every_s: float = 0.1) -> None:
    while True:
        for role, mib in (await asyncio.to_thread(rss_mib, system)).items():
            peak[role] = max(peak.get(role, 0.0), mib)
        await asyncio.sleep(every_s)
