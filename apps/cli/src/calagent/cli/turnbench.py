"""`calagent bench turns`: what one turn costs, measured on the running system beside its floor.

In one run, on this machine, with a scripted model answering at a chosen latency:

- the floor: one openai call and one asyncpg insert in one process, against the same model server
  and the same PostgreSQL;
- a create turn and a clarification merge through HTTP, NATS and every service (`calagent up`,
  each service its own process): p50 / p99;
- CPU per turn per process (gateway, agent, commands, timeparse, evalrec, nats-server, PostgreSQL)
  and in total, from the processes' own CPU counters over the sequential creates;
- throughput with concurrent clients;
- turns in flight on one agent replica with a slow model, and the errors;
- with pydantic-ai installed, its default agent in process against the same model, same tool
  and same database, beside ours at the same model latency.

It prints numbers and asserts nothing: machines here are shared and noisy.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil

from calagent.cli.meters import cpu_meter, percentile, rss_mib, sample_peak_rss, timed
from calagent.cli.system import System
from calagent.cli.turnpath import STATS_FLUSH_S, PathCount, count_path, format_path

CREATE = "明天下午三点开会"
WEEKEND = "这个周末去修汽车轮毂"
MERGE = "周日下午2点"
FLOOR_TOOL = {
    "type": "function",
    "function": {
        "name": "prepare_or_create_schedule",
        "description": "create an event",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "date": {"type": "string"},
                "time": {"type": "string"},
            },
            "required": ["title", "date"],
        },
    },
}


def bench_script(ttft_ms: int) -> dict[str, Any]:
    create = {"title": "开会", "date": "D+1", "time": "15:00"}
    return {
        "rules": [
            {
                "when": {"user_contains": "修汽车轮毂", "last_role": "user"},
                "respond": {
                    "tool_calls": [
                        {
                            "name": "prepare_or_create_schedule",
                            "arguments": {"title": "修汽车轮毂", "date": "WE"},
                        }
                    ],
                    "ttft_ms": ttft_ms,
                },
            },
            {
                "when": {"user_contains": "开会", "last_role": "user"},
                "respond": {
                    "tool_calls": [{"name": "prepare_or_create_schedule", "arguments": create}],
                    "ttft_ms": ttft_ms,
                },
            },
            # pydantic-ai asks again after its tool ran: it gets a short final answer.
            {"when": {"last_role": "tool"}, "respond": {"text": "已创建。", "ttft_ms": ttft_ms}},
        ],
        "default": {"text": "ok", "ttft_ms": ttft_ms},
    }


async def chat(client: httpx.AsyncClient, system: System, user: str, message: str) -> dict[str, Any]:
    response = await client.post(
        "/v1/chat",
        json={"message": message},
        headers={"Authorization": f"Bearer {system.token(user)}"},
    )
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer


async def floor_turns(system: System, n: int) -> tuple[list[float], float]:
    """The least a turn could cost: one model call and one insert, in this process."""
    import asyncpg
    from openai import AsyncOpenAI

    model = AsyncOpenAI(base_url=f"{system.model_url}/v1", api_key="bench")
    conn = await asyncpg.connect(system.asyncpg_dsn)
    await conn.execute(
        "CREATE TEMP TABLE floor_events (id text primary key, title text, start_at timestamptz)"
    )
    times: list[float] = []
    process = psutil.Process()
    before = process.cpu_times()
    backend = await conn.fetchval("SELECT pg_backend_pid()")
    pg = psutil.Process(backend)
    pg_before = pg.cpu_times()
    for _ in range(n):

        async def once() -> None:
            reply = await model.chat.completions.create(
                model="bench",
                messages=[{"role": "user", "content": CREATE}],
                tools=[FLOOR_TOOL],  # type: ignore[list-item]
            )
            calls = reply.choices[0].message.tool_calls or []
            arguments = json.loads(getattr(calls[0], "function").arguments) if calls else {}  # noqa: B009
            await conn.execute(
                "INSERT INTO floor_events VALUES ($1, $2, now())",
                uuid.uuid4().hex,
                arguments.get("title", ""),
            )

        times.append(await timed(once()))
    after = process.cpu_times()
    pg_after = pg.cpu_times()
    cpu = (after.user + after.system - before.user - before.system) + (
        pg_after.user + pg_after.system - pg_before.user - pg_before.system
    )
    await conn.close()
    await model.close()
    return times, cpu * 1000 / n


async def pydantic_ai_turns(system: System, n: int) -> tuple[list[float], float] | None:
    """pydantic-ai's default agent, in process, one tool writing the same row (two model calls):
    its times, and its CPU per turn (this process and its database backend)."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
    except ImportError:
        return None
    import asyncpg

    conn = await asyncpg.connect(system.asyncpg_dsn)
    await conn.execute("CREATE TEMP TABLE pai_events (id text primary key, title text, start_at timestamptz)")
    model = OpenAIChatModel(
        "bench", provider=OpenAIProvider(base_url=f"{system.model_url}/v1", api_key="bench")
    )
    agent: Agent[None, str] = Agent(model)

    @agent.tool_plain
    async def prepare_or_create_schedule(title: str, date: str, time: str | None = None) -> str:
        """Create an event."""
        await conn.execute("INSERT INTO pai_events VALUES ($1, $2, now())", uuid.uuid4().hex, title)
        return "created"

    times = []
    await agent.run(CREATE)  # warm: the first run builds the agent's schemas
    process = psutil.Process()
    pg = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()"))
    before, pg_before = process.cpu_times(), pg.cpu_times()
    for _ in range(n):

        async def once() -> None:
            await agent.run(CREATE)

        times.append(await timed(once()))
    after, pg_after = process.cpu_times(), pg.cpu_times()
    cpu = (after.user + after.system - before.user - before.system) + (
        pg_after.user + pg_after.system - pg_before.user - pg_before.system
    )
    await conn.close()
    return times, cpu * 1000 / n


async def measure(system: System, args: Any) -> dict[str, Any]:
    results: dict[str, Any] = {}
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    async with httpx.AsyncClient(base_url=system.url, timeout=120, limits=limits) as client:
        system.set_script(bench_script(0))
        # Warm every process and connection pool first.
        for i in range(10):
            await chat(client, system, f"warm-{i}", CREATE)
        floor, floor_cpu = await floor_turns(system, args.n)
        results["floor"] = {
            "p50": percentile(floor, 0.5),
            "p99": percentile(floor, 0.99),
            "cpu_ms": floor_cpu,
        }
        results.update(await measure_creates(client, system, args.n))
        results["merge"] = await measure_merges(client, system, max(10, args.n // 2))
        results["throughput"] = await measure_throughput(client, system, args.clients, args.seconds)
        system.set_script(bench_script(args.slow_ms))
        # Its own connections: hundreds left idle in the shared pool are closed by the server's
        # keep-alive timeout under the next phase's requests (a ReadError on reuse).
        async with httpx.AsyncClient(base_url=system.url, timeout=120, limits=limits) as burst:
            results["in_flight"] = await measure_in_flight(burst, system, args.in_flight, args.slow_ms)
        system.set_script(bench_script(args.compare_ms))
        results["versus_pydantic_ai"] = await measure_versus_pydantic_ai(
            client, system, args.compare_n, args.compare_ms, results["cpu_ms_per_turn_total"]
        )
        if getattr(args, "path", True):
            system.set_script(bench_script(0))
            flush_s = getattr(args, "stats_flush_s", None)
            results["path"] = await measure_path(
                client, system, max(3, min(args.n, 20)), STATS_FLUSH_S if flush_s is None else flush_s
            )
    return results


async def measure_creates(client: httpx.AsyncClient, system: System, n: int) -> dict[str, Any]:
    """Sequential create turns: their latency, and each process's CPU per turn with idle subtracted."""
    # What the processes burn with no turn at all (sync loops, pull requests, PostgreSQL's own
    # background work), over as long a stretch as the creates took, is not a turn's cost.
    creates: list[float] = []
    cpu: dict[str, float] = {}
    began = time.perf_counter()
    with cpu_meter(system, cpu):
        for i in range(n):
            user = f"c-{i}-{uuid.uuid4().hex[:6]}"
            creates.append(await timed(chat(client, system, user, CREATE)))
    busy_s = time.perf_counter() - began
    idle: dict[str, float] = {}
    with cpu_meter(system, idle):
        await asyncio.sleep(busy_s)
    per_turn = {
        role: max(0.0, seconds - idle.get(role, 0.0)) * 1000 / n for role, seconds in sorted(cpu.items())
    }
    return {
        "create": {"p50": percentile(creates, 0.5), "p99": percentile(creates, 0.99)},
        "cpu_ms_per_turn": per_turn,
        "cpu_ms_per_turn_total": sum(per_turn.values()),
        "idle_cpu_ms_per_turn_total": sum(idle.values()) * 1000 / n,
    }


async def measure_merges(client: httpx.AsyncClient, system: System, n: int) -> dict[str, float]:
    """A clarification merge: the weekend request leaves a stub (not timed), the day completes it."""
    merges: list[float] = []
    for i in range(n):
        user = f"m-{i}-{uuid.uuid4().hex[:6]}"
        await chat(client, system, user, WEEKEND)
        merges.append(await timed(chat(client, system, user, MERGE)))
    return {"p50": percentile(merges, 0.5), "p99": percentile(merges, 0.99)}


async def measure_throughput(
    client: httpx.AsyncClient, system: System, clients: int, seconds: float
) -> dict[str, Any]:
    """Create turns from `clients` concurrent clients for `seconds`."""
    done = 0
    errors = 0
    stop_at = time.monotonic() + seconds

    async def worker(index: int) -> None:
        nonlocal done, errors
        k = 0
        while time.monotonic() < stop_at:
            k += 1
            try:
                await chat(client, system, f"t-{index}-{k}-{uuid.uuid4().hex[:4]}", CREATE)
                done += 1
            except httpx.HTTPError:
                errors += 1

    began = time.monotonic()
    await asyncio.gather(*(worker(i) for i in range(clients)))
    return {"turns_per_s": done / (time.monotonic() - began), "clients": clients, "errors": errors}


async def measure_in_flight(
    client: httpx.AsyncClient, system: System, turns: int, model_ms: int
) -> dict[str, Any]:
    """`turns` creates at once against a slow model (already scripted): outcomes and peak memory."""
    outcomes: list[str] = []
    answered_ms: list[float] = []

    async def slow(index: int) -> None:
        try:
            began = time.perf_counter()
            answer = await chat(client, system, f"f-{index}-{uuid.uuid4().hex[:6]}", CREATE)
            answered_ms.append((time.perf_counter() - began) * 1000)
            outcomes.append(answer["outcome"])
        except httpx.HTTPStatusError as exc:
            outcomes.append(f"http:{exc.response.status_code}")
        except httpx.HTTPError as exc:
            outcomes.append(f"error:{type(exc).__name__}")

    baseline = rss_mib(system)
    peak: dict[str, float] = dict(baseline)
    sampling = asyncio.create_task(sample_peak_rss(system, peak))
    began = time.monotonic()
    await asyncio.gather(*(slow(i) for i in range(turns)))
    sampling.cancel()
    return {
        "turns": turns,
        "model_ms": model_ms,
        "wall_s": time.monotonic() - began,
        # Each turn from its send to its answer (answered turns only).
        "p50_ms": percentile(answered_ms, 0.5),
        "p99_ms": percentile(answered_ms, 0.99),
        "created": outcomes.count("created"),
        "errors": sum(1 for o in outcomes if o != "created"),
        "not_created": dict(Counter(o for o in outcomes if o != "created")),
        # What holding a turn open while the model thinks costs each process, per turn.
        "rss_mib_idle": baseline,
        # PostgreSQL is left out: what it grows by is backends, one per pooled connection
        # opened (each counting shared buffers in its RSS), bounded by the pools, not turns.
        "kib_per_turn_in_flight": {
            role: (peak[role] - baseline.get(role, 0.0)) * 1024 / turns
            for role in sorted(peak)
            if role != "postgres"
        },
    }


async def measure_versus_pydantic_ai(
    client: httpx.AsyncClient, system: System, n: int, model_ms: int, our_cpu_ms: float
) -> dict[str, Any]:
    """Our create turns beside pydantic-ai's default agent, at the model latency already scripted,
    and our clarification merge (no model call) at the same latency."""
    ours: list[float] = []
    for i in range(n):
        user = f"r-{i}-{uuid.uuid4().hex[:6]}"
        ours.append(await timed(chat(client, system, user, CREATE)))
    merges = await measure_merges(client, system, n)
    compared = await pydantic_ai_turns(system, n)
    theirs, their_cpu = compared if compared else ([], None)
    return {
        "model_ms": model_ms,
        "ours_p50": percentile(ours, 0.5),
        "merge_p50": merges["p50"],
        "pydantic_ai_p50": percentile(theirs, 0.5) if theirs else None,
        "ratio": percentile(ours, 0.5) / percentile(theirs, 0.5) if theirs else None,
        "pydantic_ai_cpu_ms": their_cpu,
        "cpu_ratio": our_cpu_ms / their_cpu if their_cpu else None,
    }


async def measure_path(
    client: httpx.AsyncClient, system: System, turns: int, stats_flush_s: float = STATS_FLUSH_S
) -> dict[str, PathCount]:
    """Messages, round trips and transactions of a create and of a merge, counted on the bus and
    in PostgreSQL (`calagent.cli.turnpath`). A merge is counted as its pair (the weekend request
    that leaves a stub, then the day) less the request alone."""

    async def create(user: str) -> None:
        await chat(client, system, user, CREATE)

    async def stub(user: str) -> None:
        await chat(client, system, user, WEEKEND)

    async def stub_and_merge(user: str) -> None:
        await chat(client, system, user, WEEKEND)
        await chat(client, system, user, MERGE)

    nats_url, dsn = system.nats_url, system.asyncpg_dsn
    created = await count_path(nats_url, dsn, turns, create, stats_flush_s)
    stubbed = await count_path(nats_url, dsn, turns, stub, stats_flush_s)
    pair = await count_path(nats_url, dsn, turns, stub_and_merge, stats_flush_s)
    merged = PathCount(
        turns=turns,
        messages=Counter({k: max(0, pair.messages[k] - stubbed.messages[k]) for k in pair.messages}),
        requests=max(0, pair.requests - stubbed.requests),
        transactions=max(0.0, pair.transactions - stubbed.transactions),
    )
    return {"create turn": created, "clarification merge": merged}


def format_results(r: dict[str, Any]) -> str:
    lines = ["calagent bench turns (scripted model; medians and p99 in ms; CPU in ms per turn)"]
    f, c, m = r["floor"], r["create"], r["merge"]
    lines.append(
        f"floor (openai call + asyncpg insert, one process)  p50 {f['p50']:.1f}  p99 {f['p99']:.1f}  CPU {f['cpu_ms']:.1f}"
    )
    lines.append(f"create turn (HTTP, NATS, every service)            p50 {c['p50']:.1f}  p99 {c['p99']:.1f}")
    lines.append(f"clarification merge (0 model calls)                p50 {m['p50']:.1f}  p99 {m['p99']:.1f}")
    per = "  ".join(f"{role} {ms:.2f}" for role, ms in r["cpu_ms_per_turn"].items())
    lines.append(
        f"CPU per create turn (idle subtracted): {per}  total {r['cpu_ms_per_turn_total']:.1f}"
        f"  (idle over the same time: {r['idle_cpu_ms_per_turn_total']:.1f})"
    )
    t = r["throughput"]
    lines.append(
        f"throughput: {t['turns_per_s']:.1f} turns/s with {t['clients']} clients, {t['errors']} errors"
    )
    i = r["in_flight"]
    lines.append(
        f"in flight: {i['turns']} turns at a {i['model_ms']} ms model on one agent replica: "
        f"{i['created']} created, {i['errors']} errors, {i['wall_s']:.1f} s wall, "
        f"p50 {i['p50_ms'] / 1000:.1f} s, p99 {i['p99_ms'] / 1000:.1f} s"
    )
    per_turn = "  ".join(f"{role} {kib:.0f}" for role, kib in i["kib_per_turn_in_flight"].items())
    lines.append(f"memory per turn in flight (KiB, peak over idle RSS): {per_turn}")
    v = r["versus_pydantic_ai"]
    if v["pydantic_ai_p50"] is None:
        lines.append(
            f"versus pydantic-ai at a {v['model_ms']} ms model: pydantic-ai is not installed (ours p50 {v['ours_p50']:.0f})"
        )
    else:
        lines.append(
            f"versus pydantic-ai at a {v['model_ms']} ms model: ours p50 {v['ours_p50']:.0f}, "
            f"pydantic-ai p50 {v['pydantic_ai_p50']:.0f}, ratio {v['ratio']:.2f}; "
            f"CPU per create: ours {r['cpu_ms_per_turn_total']:.1f}, pydantic-ai {v['pydantic_ai_cpu_ms']:.1f}, "
            f"ratio {v['cpu_ratio']:.2f}"
        )
    lines.append(
        f"merge p50 / create p50: {m['p50'] / c['p50']:.2f}; at a {v['model_ms']} ms model: "
        f"merge p50 {v['merge_p50']:.0f} / create p50 {v['ours_p50']:.0f} = {v['merge_p50'] / v['ours_p50']:.2f}"
    )
    for name, count in r.get("path", {}).items():
        lines += format_path(name, count)
    return "\n".join(lines)


def run_turn_bench(args: Any) -> int:
    with tempfile.TemporaryDirectory(prefix="calagent-bench-") as tmp:
        system = System(Path(tmp), nats_cluster=getattr(args, "nats_cluster", 1))
        try:
            system.start()
            results = asyncio.run(measure(system, args))
            results["nats_nodes"] = system.nats_cluster
        finally:
            system.stop()
    if getattr(args, "json", False):
        results["path"] = {
            name: {
                "messages_per_turn": c.messages_per_turn,
                "round_trips_per_turn": c.round_trips_per_turn,
                "transactions_per_turn": c.transactions,
                "messages_by_subject": c.by_class(),
            }
            for name, c in results.get("path", {}).items()
        }
        print(json.dumps(results, indent=2))
    else:
        print(format_results(results))
    return 0
