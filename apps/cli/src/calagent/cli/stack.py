"""The whole system in one event loop, on real NATS and PostgreSQL, for end-to-end tests and the
offline eval.

Each service is built by the same `create_app` and started by the same `start_service` as in
production, with its own bus connection; only the process boundary is missing. The gateway is
reached over HTTP by the same routes a client uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import nats
from nats.js.errors import NotFoundError

from calagent.contracts import subjects
from calagent.devtools.testing import TEST_AUTH_SECRET
from calagent.runtime.bus import Bus, nats_servers
from calagent.runtime.clock import FrozenClock
from calagent.runtime.service import ServiceApp, start_service
from calagent.runtime.settings import Settings
from calagent.runtime.streams import ensure_streams

DEFAULT_NOW = "2026-09-24T10:00:00+08:00"  # a Thursday


async def reset_streams(nats_url: str) -> None:
    """Start from empty streams so nothing left by an earlier stack on this server is consumed."""
    nc = await nats.connect(servers=nats_servers(nats_url))
    try:
        js = nc.jetstream()
        for name in (subjects.TURNS_STREAM, subjects.RECORDS_STREAM, subjects.DEADLETTER_STREAM):
            with contextlib.suppress(NotFoundError):
                await js.delete_stream(name)
        await ensure_streams(js)
    finally:
        await nc.close()


@dataclass
class Stack:
    settings: Settings
    clock: FrozenClock
    client: httpx.AsyncClient
    buses: list[Bus] = field(default_factory=list)
    apps: list[ServiceApp] = field(default_factory=list)
    probe: Bus | None = None
    # Stopped first: the gateway's listeners besides HTTP (the SMTP receiver).
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def token(self, user_id: str, tz: str | None = None) -> str:
        from calagent.gateway.auth import issue_token

        # Token expiry is checked against real time even when business time is frozen.
        return issue_token(user_id, self.settings.require_auth_secret(), tz=tz)

    def headers(self, user_id: str, tz: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(user_id, tz)}"}

    async def chat(
        self, user_id: str, message: str, *, tz: str | None = None, **fields: Any
    ) -> httpx.Response:
        body: dict[str, Any] = {"message": message, **{k: v for k, v in fields.items() if v is not None}}
        return await self.client.post("/v1/chat", json=body, headers=self.headers(user_id, tz))

    async def stop(self) -> None:
        for close in self.closers:
            await close()
        await self.client.aclose()
        for bus in reversed(self.buses):
            await bus.close()
        for app in reversed(self.apps):
            await app.stop()
        if self.probe is not None:
            await self.probe.close()


async def start_stack(
    *,
    nats_url: str,
    database_url: str,
    model_base_url: str | None,
    now: str = DEFAULT_NOW,
    settings_overrides: dict[str, Any] | None = None,
    gateway_transport: httpx.AsyncBaseTransport | None = None,
    without: frozenset[str] = frozenset(),
    nats_url_for: Callable[[str], str] | None = None,
) -> Stack:
    """The system in this event loop; the services named in `without` are left to the caller
    (a test that runs one as a process of its own, to kill it). With `nats_url_for` each service
    connects as its own NATS user (`nats_url_for(service)`), held by the server to the grants
    `calagent up` deploys (`runtime.trust`): a subject a service asks without a grant is refused
    here as there. Without it every service connects with `nats_url`."""
    from calagent.agent.app import create_app as create_agent
    from calagent.commands.app import create_app as create_commands
    from calagent.evalrec.app import create_app as create_evalrec
    from calagent.gateway.app import create_app as create_gateway
    from calagent.timeparse.app import create_app as create_timeparse

    values: dict[str, Any] = {
        "NATS_URL": nats_url,
        "DATABASE_URL": database_url,
        "OPENAI_BASE_URL": model_base_url,
        "OPENAI_API_KEY": "scripted" if model_base_url else None,
        "CALAGENT_NOW": now,
        "CALAGENT_MODEL_TIMEOUT_S": 10.0,
        "CALAGENT_TURN_TIMEOUT_S": 30.0,
        "CALAGENT_AUTH_SECRET": TEST_AUTH_SECRET,
        # Tests and evals send a user's turns faster than anyone types; a test of the rate sets it.
        "CALAGENT_USER_TURNS_PER_MINUTE": 0,
        # Cases simulate model outages one after another: a circuit opened by one would answer the
        # unrelated cases after it with 503. The circuit and the backoff have tests of their own.
        "CALAGENT_MODEL_CIRCUIT_FAILURES": 1_000_000,
        "CALAGENT_MODEL_BACKOFF_S": 0.05,
    }
    values.update(settings_overrides or {})
    settings = Settings(**values)
    clock = FrozenClock(datetime.fromisoformat(now))
    await reset_streams(nats_url)
    own_url = nats_url_for or (lambda _service: nats_url)

    buses: list[Bus] = []
    apps: list[ServiceApp] = []
    for factory in (create_timeparse, create_commands, create_agent, create_evalrec):
        app = factory(settings, clock)
        if app.name in without:
            continue
        buses.append(await start_service(app, own_url(app.name), clock))
        apps.append(app)

    gateway_bus = Bus(own_url("gateway"), "gateway", clock)
    gateway = create_gateway(settings, clock, bus=gateway_bus)
    gateway_bus.serve_health()
    await gateway_bus.start()
    buses.append(gateway_bus)
    await gateway.state.gateway.start_listeners()
    transport = gateway_transport or httpx.ASGITransport(app=gateway)
    client = httpx.AsyncClient(transport=transport, base_url="http://gateway", timeout=60.0)
    probe = await Bus.connect(nats_url, "probe", clock)
    return Stack(
        settings=settings,
        clock=clock,
        client=client,
        buses=buses,
        apps=apps,
        probe=probe,
        closers=[gateway.state.gateway.stop_listeners],
    )
