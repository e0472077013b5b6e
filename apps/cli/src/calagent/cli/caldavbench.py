"""`calagent bench caldav`: how long a committed write takes to reach the CalDAV server, and how
fast the inbound sync reads a calendar back.

The whole system runs in-process (`start_stack`) on NATS and PostgreSQL from the environment or
the embedded packages, with a local Radicale. Delivery latency is the outbox row's own record:
from the moment the write's transaction queued it (just before its commit) to the moment the
worker's transaction marked it delivered — both read from the database clock. Creates go to the
commands service over the bus (no model in the path: this measures the sync, not a turn).
Inbound throughput is a first sync of a calendar filled directly on the server; the first sync of
a new user's account of ten calendars and 5,000 events is timed to its first event, to every event
of the next two weeks and to the last.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.fernet import Fernet
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from calagent.contracts import wire
from calagent.contracts.caldav import AccountRequest, AccountResult, ConnectCalDav
from calagent.contracts.commands import CommandRequest, PrepareOrCreate
from calagent.contracts.envelope import Envelope
from calagent.contracts.tools import PrepareOrCreateSchedule
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar

if TYPE_CHECKING:
    from calagent.cli.stack import Stack


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _ics(uid: str, day: int) -> str:
    start = f"2027{1 + day // 28:02d}{1 + day % 28:02d}T010000Z"
    end = f"2027{1 + day // 28:02d}{1 + day % 28:02d}T020000Z"
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:{uid}\r\nDTSTAMP:20260924T000000Z\r\nDTSTART:{start}\r\nDTEND:{end}\r\n"
        f"SUMMARY:bench {uid}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )


async def measure(
    nats_url: str,
    database_url: str,
    n_writes: int,
    n_inbound: int,
    tmp: Path,
    first_sync: tuple[int, int] | None = None,
) -> dict[str, Any]:
    from calagent.cli.stack import start_stack

    radicale = EmbeddedRadicale(tmp / "radicale", {"bench": "bench-pw", "inbound": "inbound-pw"})
    radicale.start()
    try:
        stack = await start_stack(
            nats_url=nats_url,
            database_url=database_url,
            model_base_url=None,
            settings_overrides={
                "CALAGENT_DATA_DIR": str(tmp / "data"),
                "CALAGENT_CREDENTIALS_KEY": Fernet.generate_key().decode(),
                "CALAGENT_CALDAV_SWEEP_S": 1.0,
                "CALAGENT_CALDAV_SYNC_S": 3600,
                # The local server's own address, which the CalDAV guard refuses unless told.
                "CALAGENT_CALDAV_ALLOW_NETWORKS": radicale.network,
            },
        )
        engine = create_async_engine(database_url)
        try:
            make_calendar(radicale.url, "bench", "bench-pw", "Bench")
            user = f"bench-{uuid.uuid4().hex[:8]}"
            latencies, delivered = await _outbound(stack, engine, radicale, user, n_writes)
            seconds = await _inbound(stack, engine, radicale, n_inbound)
            first = await _first_sync(stack, engine, radicale, *first_sync) if first_sync else {}
        finally:
            await engine.dispose()
            await stack.stop()
    finally:
        radicale.stop()
    return {
        "writes": n_writes,
        "delivered": delivered,
        "delivery_p50_ms": round(statistics.median(latencies), 1),
        "delivery_p99_ms": round(_percentile(latencies, 0.99), 1),
        "delivery_max_ms": round(max(latencies), 1),
        "inbound_events": n_inbound,
        "inbound_seconds": round(seconds, 3),
        "inbound_events_per_s": round(n_inbound / seconds, 1),
        **first,
    }


def _envelope(stack: Stack, user: str) -> Envelope:
    return Envelope(
        turn_id=uuid.uuid4().hex,
        user_id=user,
        conversation_id="bench",
        occurred_at=stack.clock.now(),
        tz="Asia/Shanghai",
        channel="api",
    )


async def _connect(stack: Stack, radicale: EmbeddedRadicale, user: str, login: str) -> AccountResult:
    """`user` connects the server's calendars of `login` (its password is `<login>-pw`)."""
    assert stack.probe is not None
    result: AccountResult = await stack.probe.request(
        wire.CALDAV_ACCOUNTS,
        AccountRequest(
            command=ConnectCalDav(
                envelope=_envelope(stack, user),
                url=radicale.user_url(login),
                username=login,
                password=f"{login}-pw",
            )
        ),
        timeout=30,
    )
    return result


async def _outbound(
    stack: Stack, engine: AsyncEngine, radicale: EmbeddedRadicale, user: str, n_writes: int
) -> tuple[list[float], int]:
    """`n_writes` creates on a connected calendar, one at a time: each delivery's latency, and how
    many were delivered."""
    probe = stack.probe
    assert probe is not None
    connected = await _connect(stack, radicale, user, "bench")
    assert connected.account is not None, connected
    today = stack.clock.now().date()
    for i in range(n_writes):
        day = today + timedelta(days=1 + i)
        result = await probe.request(
            wire.COMMAND_EXECUTE,
            CommandRequest(
                command=PrepareOrCreate(
                    envelope=_envelope(stack, user),
                    idempotency_key=f"bench-{i}",
                    args=PrepareOrCreateSchedule(title=f"bench {i}", date=day.isoformat(), time="09:00"),
                )
            ),
            timeout=30,
        )
        assert result.status == "created", result
        # One at a time: the latency of a write, not of a queue behind it.
        await _drained(engine, user)
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "select extract(epoch from delivered_at - created_at) * 1000 as ms, outcome"
                " from commands.caldav_outbox where user_id = :u"
            ),
            {"u": user},
        )
        found = rows.all()
    latencies = [float(r.ms) for r in found]
    delivered = sum(1 for r in found if r.outcome == "delivered")
    return latencies, delivered


async def _inbound(stack: Stack, engine: AsyncEngine, radicale: EmbeddedRadicale, n_inbound: int) -> float:
    """A calendar filled on the server, read back by one first sync: its seconds."""
    from calagent.commands.app import CommandsService

    probe = stack.probe
    assert probe is not None
    inbound_url = make_calendar(radicale.url, "inbound", "inbound-pw", "Inbound")
    _fill(radicale.user_url("inbound"), inbound_url, n_inbound)
    reader = f"reader-{uuid.uuid4().hex[:8]}"
    commands = next(a for a in stack.apps if isinstance(a, CommandsService))
    assert commands.sync is not None
    linked = await _connect(stack, radicale, reader, "inbound")
    assert linked.account is not None
    # The connect asked the running worker for a sync; wait for it to finish, then time
    # a sync of our own from scratch.
    await _count(engine, reader, n_inbound)
    async with engine.begin() as conn:
        await conn.execute(text("delete from commands.events where user_id = :u"), {"u": reader})
        await conn.execute(text("delete from commands.caldav_resources where user_id = :u"), {"u": reader})
        await conn.execute(
            text("update commands.caldav_calendars set sync_token = null where account_id = :a"),
            {"a": linked.account.id},
        )
    started = time.perf_counter()
    stats = await commands.sync.inbound.sync_account(linked.account.id)
    seconds = time.perf_counter() - started
    assert stats is not None and stats.changed == n_inbound, stats
    return seconds


def _fill(user_url: str, calendar_url: str, n: int) -> None:
    import caldav

    with caldav.DAVClient(url=user_url, username="inbound", password="inbound-pw") as client:
        calendar = caldav.Calendar(client=client, url=calendar_url)
        for i in range(n):
            calendar.save_event(_ics(f"in-{i}", i % 300))


def _ics_at(uid: str, start: datetime) -> str:
    stamp = "%Y%m%dT%H%M%SZ"
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:{uid}\r\nDTSTAMP:20260924T000000Z\r\nDTSTART:{start.astimezone(UTC):{stamp}}\r\n"
        f"DTEND:{(start + timedelta(minutes=45)).astimezone(UTC):{stamp}}\r\n"
        f"SUMMARY:bench {uid}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )


async def _first_sync(
    stack: Stack, engine: AsyncEngine, radicale: EmbeddedRadicale, calendars: int, per_calendar: int
) -> dict[str, Any]:
    """An account of `calendars` calendars holding `per_calendar` events each, spread over the
    year before and the year after now, connected as a new user does: seconds from the connection
    until the first event shows, until every event of the next two weeks does, until all do."""
    login, password = "many", "many-pw"
    radicale.add_user(login, password)
    now = stack.clock.now()
    for c in range(calendars):
        make_calendar(radicale.url, login, password, f"Calendar {c}", cal_id=f"cal{c}")
        # Written into the server's own folder (Radicale reads it as it is): filling thousands of
        # objects by PUT would take longer than the sync measured.
        folder = radicale.data_dir / "collections" / "collection-root" / login / f"cal{c}"
        for i in range(per_calendar):
            start = now + timedelta(days=i * 730 / per_calendar - 365, hours=c)
            (folder / f"ev-{c}-{i}.ics").write_text(_ics_at(f"many-{c}-{i}", start))
    total = calendars * per_calendar
    near_end = now + timedelta(weeks=2)
    reader = f"many-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    linked = await _connect(stack, radicale, reader, login)
    assert linked.account is not None, linked
    marks: dict[str, float] = {}
    near_total = sum(
        1
        for c in range(calendars)
        for i in range(per_calendar)
        if now <= now + timedelta(days=i * 730 / per_calendar - 365, hours=c) < near_end
    )
    while "all" not in marks:
        async with engine.connect() as conn:
            shown, near = (
                await conn.execute(
                    text(
                        "select count(*), count(*) filter (where start_at >= :a and start_at < :b)"
                        " from commands.events where user_id = :u"
                    ),
                    {"u": reader, "a": now, "b": near_end},
                )
            ).one()
        elapsed = time.perf_counter() - started
        if shown and "first" not in marks:
            marks["first"] = elapsed
        if near >= near_total and "near" not in marks:
            marks["near"] = elapsed
        if shown >= total:
            marks["all"] = elapsed
        if elapsed > 900:
            raise TimeoutError(f"the first sync showed {shown} of {total} events in 900 s")
        await asyncio.sleep(0.05)
    return {
        "first_sync_calendars": calendars,
        "first_sync_events": total,
        "first_sync_first_event_s": round(marks["first"], 2),
        "first_sync_next_two_weeks_s": round(marks["near"], 2),
        "first_sync_all_s": round(marks["all"], 2),
    }


async def _drained(engine: Any, user: str) -> None:
    for _ in range(600):
        async with engine.connect() as conn:
            waiting = await conn.scalar(
                text(
                    "select count(*) from commands.caldav_outbox where user_id = :u and delivered_at is null"
                ),
                {"u": user},
            )
        if not waiting:
            return
        await asyncio.sleep(0.005)
    raise TimeoutError("the outbox did not drain")


async def _count(engine: Any, user: str, n: int) -> None:
    for _ in range(1200):
        async with engine.connect() as conn:
            found = await conn.scalar(
                text("select count(*) from commands.events where user_id = :u"), {"u": user}
            )
        if found == n:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("the first sync did not finish")


def run_caldav_bench(args: Any) -> int:
    writes = int(getattr(args, "n", 200) or 200)
    inbound = int(getattr(args, "inbound", 500) or 500)
    # Issue 44 item 9: a new user's account of ten calendars and 5,000 events.
    first_sync = (int(getattr(args, "calendars", 10) or 10), int(getattr(args, "per_calendar", 500) or 500))
    from calagent.devtools.testing.servers import provide_servers

    with tempfile.TemporaryDirectory(prefix="calagent-caldav-bench-") as tmp, provide_servers() as servers:
        database_url = servers.create_database()
        results = asyncio.run(measure(servers.nats_url, database_url, writes, inbound, Path(tmp), first_sync))
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:{width}s} {value}")
    return 0
