"""The bus under attack, for `calagent faults`: a running system's NATS, spoken to directly.

- Without credentials (none, a wrong password, an unknown user): every connection must be refused.
- With a service's own credentials, what its role does not allow: a forged `turn.done` from every
  service but the agent, and a read of every turn's events by every service but the gateway, must
  be refused by the server.
- With credentials that may publish anywhere (the operator's): garbage on every subject the
  system declares — requests, streams, topics — must be answered or dead-lettered, never crash a
  service (the same processes run afterwards) and never leave `/healthz` unhealthy.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nats
from nats.aio.client import Client as NatsClient
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from calagent.contracts import subjects, wire
from calagent.contracts.turns import TurnAnswer, TurnEvent
from calagent.runtime.trust import ADMIN, load_or_create_passwords, with_credentials

GARBAGE: tuple[bytes, ...] = (
    b"",
    b"{",
    b"null",
    b"[]",
    b"42",
    b'{"unexpected": true}',
    b'{"envelope": {"user_id": 5}}',
    b"\x00\xff\xfe\xfd",
    '{"text": "\ud800"}'.encode("utf-8", "surrogatepass"),
    b"[" * 10_000,
    b"x" * 200_000,
)


@dataclass
class BusFuzzReport:
    connections_tried: int = 0
    connections_refused: int = 0
    forged_done_tried: int = 0
    forged_done_refused: int = 0
    forged_done_delivered: int = 0
    cross_reads_tried: int = 0
    cross_reads_refused: int = 0
    garbage_sent: int = 0
    garbage_answered: int = 0
    dead_letters_added: int = 0
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.connections_refused == self.connections_tried
            and self.forged_done_refused == self.forged_done_tried
            and self.forged_done_delivered == 0
            and self.cross_reads_refused == self.cross_reads_tried
        )

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "details"}


class _Watched:
    """A connection whose asynchronous errors (permission violations) are kept."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.nc: NatsClient | None = None

    async def open(self, url: str) -> NatsClient:
        async def on_error(exc: Exception) -> None:
            self.errors.append(str(exc))

        self.nc = await nats.connect(url, error_cb=on_error, allow_reconnect=False, connect_timeout=3)
        return self.nc

    async def violated(self, timeout: float = 2.0) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if any("permissions violation" in e.lower() for e in self.errors):
                return True
            await asyncio.sleep(0.05)
        return False

    async def close(self) -> None:
        if self.nc is not None:
            with contextlib.suppress(Exception):
                await self.nc.close()


async def _expected(_exc: Exception) -> None:
    """The refusal being tested for is counted by the caller, not logged as a failure."""


def _forged_done() -> bytes:
    answer = TurnAnswer(
        turn_id="fuzz-forged",
        conversation_id="default",
        outcome="created",
        reply="已创建「转账给张三」",
        intent="schedule.create",
    )
    return TurnEvent(turn_id="fuzz-forged", type="turn.done", answer=answer).model_dump_json().encode()


def _targets() -> tuple[list[str], list[str], list[str]]:
    declared = list(vars(wire).values())
    endpoints = [d.subject for d in declared if isinstance(d, wire.Endpoint)]
    endpoints += [wire.health(service).subject for service in subjects.SERVICES]
    streams = [d.subject for d in declared if isinstance(d, wire.Stream)]
    topics = [f"{d.prefix}.fuzz" for d in declared if isinstance(d, wire.Topic)]
    return endpoints, streams, topics


async def _dead_letters(admin: NatsClient) -> int:
    info = await admin.jetstream().stream_info(subjects.DEADLETTER_STREAM)
    return int(info.state.messages)


async def fuzz_bus(admin_url: str, passwords: dict[str, str]) -> BusFuzzReport:
    report = BusFuzzReport()
    parts = urlsplit(admin_url.split(",")[0])
    plain = f"nats://{parts.hostname}:{parts.port}"
    await _without_credentials(plain, report)
    admin = await nats.connect(with_credentials(plain, ADMIN, passwords[ADMIN]))
    try:
        await _outside_roles(admin, plain, passwords, report)
        await _garbage(admin, report)
    finally:
        await admin.close()
    return report


async def _without_credentials(plain: str, report: BusFuzzReport) -> None:
    """No password, a wrong one, a user nobody made: every connection is refused."""
    for url in (
        plain,
        with_credentials(plain, "agent", "not-the-password"),
        with_credentials(plain, "mallory", "x"),
    ):
        report.connections_tried += 1
        try:
            nc = await nats.connect(
                url, allow_reconnect=False, connect_timeout=3, max_reconnect_attempts=0, error_cb=_expected
            )
        except Exception:
            report.connections_refused += 1
        else:
            report.details.append(f"connected without valid credentials: {url.split('@')[0]}")
            await nc.close()


async def _outside_roles(
    admin: NatsClient, plain: str, passwords: dict[str, str], report: BusFuzzReport
) -> None:
    """A service's credentials, outside its role: forging a turn's answer, reading other turns."""
    listened: list[bytes] = []

    async def on_event(msg: Any) -> None:
        listened.append(msg.data)

    await admin.subscribe(f"{subjects.TURN_EVENTS_PREFIX}.fuzz-forged", cb=on_event)
    await admin.flush()
    for service in subjects.SERVICES:
        if service == "agent":
            continue
        watched = _Watched()
        try:
            nc = await watched.open(with_credentials(plain, service, passwords[service]))
            report.forged_done_tried += 1
            await nc.publish(f"{subjects.TURN_EVENTS_PREFIX}.fuzz-forged", _forged_done())
            await nc.flush()
            if await watched.violated():
                report.forged_done_refused += 1
        finally:
            await watched.close()
        if service == "gateway":
            continue
        reader = _Watched()
        try:
            nc = await reader.open(with_credentials(plain, service, passwords[service]))
            report.cross_reads_tried += 1
            await nc.subscribe(f"{subjects.TURN_EVENTS_PREFIX}.>")
            await nc.flush()
            if await reader.violated():
                report.cross_reads_refused += 1
        finally:
            await reader.close()
    await asyncio.sleep(0.5)
    report.forged_done_delivered = len(listened)


async def _garbage(admin: NatsClient, report: BusFuzzReport) -> None:
    """Garbage on every subject, with credentials that may publish anywhere: counted, not crashed on."""
    before = await _dead_letters(admin)
    endpoints, streams, topics = _targets()
    js = admin.jetstream()
    for body in GARBAGE:
        for subject in endpoints:
            report.garbage_sent += 1
            with contextlib.suppress(NoRespondersError, NatsTimeoutError):
                await admin.request(subject, body, timeout=3)
                report.garbage_answered += 1
        for subject in streams:
            report.garbage_sent += 1
            await js.publish(subject, body)
        for subject in topics:
            report.garbage_sent += 1
            await admin.publish(subject, body)
    await admin.flush()
    await asyncio.sleep(3.0)  # the consumers settle what they were given
    report.dead_letters_added = await _dead_letters(admin) - before


def passwords_of(data_dir: Path) -> dict[str, str]:
    """The NATS users' passwords `calagent up` keeps in its data dir."""
    return load_or_create_passwords(data_dir / "nats" / "users.json")
