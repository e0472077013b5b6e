"""What every route of one gateway shares (`app.state.gateway`): settings, clock, the bus and the
turn runner on it, its background tasks; and the two dependencies routes take, the caller
(`AuthPrincipal`) and the gateway itself (`CurrentGateway`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from pydantic import BaseModel

from calagent.contracts import wire
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import QueryRequest, QueryResult
from calagent.contracts.wire import Endpoint
from calagent.gateway.auth import Principal
from calagent.gateway.errors import DownstreamError, downstream
from calagent.gateway.mailbox import MailReceiver
from calagent.gateway.session import principal_from_request
from calagent.gateway.turns import TurnRunner
from calagent.gateway.zones import UserZones
from calagent.runtime.bus import Bus, BusRequestError
from calagent.runtime.clock import Clock
from calagent.runtime.settings import Settings

log = logging.getLogger("calagent.gateway")

Req = TypeVar("Req", bound=BaseModel)
Rep = TypeVar("Rep", bound=BaseModel)

DEFAULT_CONVERSATION = "default"
QUERY_TIMEOUT_S = 10.0
# A read whose answer comes straight from the database, and the errors of it the caller made.
CALLER_ERRORS = ("invalid_range", "invalid_time", "invalid_symbol")


class Gateway:
    def __init__(self, settings: Settings, clock: Clock, bus: Bus | None) -> None:
        self.settings = settings
        self.clock = clock
        self._bus: Bus | None = None
        self._runner: TurnRunner | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._mail: MailReceiver | None = None
        # Users' saved zones, which win over their tokens' (contract §16).
        self.zones = UserZones()
        if bus is not None:
            self.attach(bus)

    async def start_listeners(self) -> None:
        """The listeners besides HTTP, once the bus is up: the SMTP receiver when configured."""
        if self.settings.smtp_listen and self._mail is None:
            receiver = MailReceiver(self, self.settings.smtp_listen, self.settings.mail_max_bytes)
            await receiver.start()
            self._mail = receiver

    async def stop_listeners(self) -> None:
        receiver, self._mail = self._mail, None
        if receiver is not None:
            await receiver.stop()

    def follow_zones(self) -> None:
        """Watch the users' saved zones from the first request on (whoever started the bus: the
        lifespan, or the owner of a bus given to `create_app`)."""
        if self._bus is not None:
            self.zones.start(self._bus)

    @property
    def bus(self) -> Bus:
        if self._bus is None:
            raise DownstreamError(503, "the gateway is not connected to the bus")
        return self._bus

    @property
    def runner(self) -> TurnRunner:
        if self._runner is None:
            raise DownstreamError(503, "the gateway is not connected to the bus")
        return self._runner

    @property
    def bus_connected(self) -> bool:
        return self._bus is not None and self._bus.connected

    def attach(self, bus: Bus) -> None:
        """Wire the gateway's subscriptions and publishers on `bus`, before it starts."""
        self._bus = bus
        self._runner = TurnRunner(bus, self.settings, self.clock)

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        # Kept referenced so a detached task (a turn whose client went away) is not collected.
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def drain(self, grace_s: float) -> None:
        if self._background:
            await asyncio.wait(list(self._background), timeout=grace_s)
        for task in list(self._background):
            task.cancel()

    def envelope(self, principal: Principal) -> Envelope:
        """The envelope of a read request: its own id, the caller's identity and zone."""
        return Envelope(
            turn_id=uuid.uuid4().hex,
            user_id=principal.user_id,
            conversation_id=DEFAULT_CONVERSATION,
            occurred_at=self.clock.now(),
            tz=principal.tz,
            channel="api",
        )

    async def call(
        self, service: str, endpoint: Endpoint[Req, Rep], message: Req, *, timeout: float = QUERY_TIMEOUT_S
    ) -> Rep:
        """A request to `service`; one that gets no usable answer raises `DownstreamError` (503
        when it is not answering, 502 when it answered badly)."""
        try:
            return await self.bus.request(endpoint, message, timeout=timeout)
        except BusRequestError as exc:
            raise downstream(service, exc) from exc

    async def ask(self, query: Any) -> QueryResult:
        """A query to the commands service, its own errors left in the result."""
        return await self.call("commands", wire.COMMAND_QUERY, QueryRequest(query=query))

    async def query(self, principal: Principal, query: Any) -> QueryResult:
        """A query to the commands service on `principal`'s behalf (the query's envelope names
        them) whose error is the caller's (422) or the service's (502)."""
        result = await self.ask(query)
        if result.error is not None:
            raise DownstreamError(422 if result.error.code in CALLER_ERRORS else 502, result.error.message)
        return result


def _gateway(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


def envelope_of(request: Request, principal: Principal) -> Envelope:
    """The envelope of the caller's read or account request (`Gateway.envelope`)."""
    return _gateway(request).envelope(principal)


# The dependencies are coroutines, though they never wait: FastAPI runs a plain function
# dependency in its thread pool, one thread hand-off per request for a dictionary lookup.
async def current_gateway(request: Request) -> Gateway:
    return _gateway(request)


def signed_in(request: Request) -> Principal:
    """The bearer token's user, else the session cookie's (contract §18, `session.py`), in the
    zone they saved (contract §16); raises `AuthError`. Runs in the event loop, where the watch of
    the saved zones starts at the first request whoever started the bus."""
    gw = _gateway(request)
    gw.follow_zones()
    return gw.zones.apply_to(principal_from_request(request, gw.settings, gw.clock))


async def authenticate(request: Request) -> Principal:
    return signed_in(request)


AuthPrincipal = Annotated[Principal, Depends(authenticate)]
CurrentGateway = Annotated[Gateway, Depends(current_gateway)]
