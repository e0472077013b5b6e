"""The HTTP gateway (contract §4): auth, input limits, channel envelopes, the SSE relay.

It never calls the model and owns no data: chat turns go to the agent over JetStream, reads go to
the commands and evalrec services over request-reply. Every failure of those becomes a JSON status
(503 not answering, 502 answered badly, 504 turn timeout), never a stack trace (`errors.py`). This
module builds the app; the routes live in one router module per concern.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from calagent.gateway.accounts import accounts_router
from calagent.gateway.calendar import calendar_router
from calagent.gateway.changes import changes_router
from calagent.gateway.chat import chat_router
from calagent.gateway.commands import commands_router
from calagent.gateway.errors import add_error_handlers
from calagent.gateway.feeds import feeds_router
from calagent.gateway.health import SERVICE, health_router
from calagent.gateway.history import history_router
from calagent.gateway.limits import MAX_BODY_BYTES, BodySizeLimit
from calagent.gateway.oidc import oidc_router
from calagent.gateway.people import people_router
from calagent.gateway.records import records_router
from calagent.gateway.settings import settings_router
from calagent.gateway.signin import signin_router
from calagent.gateway.state import AuthPrincipal, Gateway
from calagent.gateway.tasks import tasks_router
from calagent.gateway.web import page_router
from calagent.runtime.bus import Bus
from calagent.runtime.clock import Clock, clock_from_env
from calagent.runtime.settings import Settings, load_settings
from calagent.runtime.telemetry import exported

SHUTDOWN_GRACE_S = 5.0
# Feed addresses are credentials: no span records them; health probes are not traced either.
_UNTRACED = re.compile(r"healthz|/feeds/")


def _untraced(scope: MutableMapping[str, Any]) -> bool:
    return _UNTRACED.search(scope.get("path", "")) is not None


def create_app(
    settings: Settings | None = None, clock: Clock | None = None, bus: Bus | None = None
) -> FastAPI:
    """The gateway app. Without `bus` the lifespan connects one to `settings.nats_url`; a given bus
    (created with service name `gateway`, not started yet) is wired here, started by the lifespan
    if its owner has not, and left open for its owner to close."""
    settings = settings or load_settings()
    clock = clock or clock_from_env(settings.now)
    gw = Gateway(settings, clock, bus)
    # No secret, no gateway: refused at start with the reason, not with a 500 on every call.
    settings.require_auth_secret()

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        own = bus is None
        if bus is None:
            active = Bus(
                settings.require_nats(),
                SERVICE,
                clock,
                telemetry=exported(settings),
                replicas=settings.nats_replicas,
            )
            gw.attach(active)
            active.serve_health()
        else:
            active = bus
        try:
            await active.start()
            gw.follow_zones()
            await gw.start_listeners()
            yield
        finally:
            await gw.stop_listeners()
            await gw.zones.stop()
            # Turns still waiting have lost their clients by now (uvicorn closed them first).
            await gw.drain(grace_s=SHUTDOWN_GRACE_S)
            if own:
                await active.close()

    # The schema is served by the route below, behind the bearer like every API route; the
    # interactive pages (/docs, /redoc) are not served: they fetch the schema without a token.
    app = FastAPI(
        title="calagent gateway",
        version="0.1.0",
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        # FastAPI's own OpenTelemetry layer is the one HTTP telemetry middleware: a server span
        # per request, without a span per dependency, serialization or ASGI message. Errors are
        # logged by our handlers (`errors.py`), not recorded again as log records here.
        telemetry={"exclude": _untraced, "operation_spans": False, "logs": False},
    )
    app.state.gateway = gw
    app.add_middleware(BodySizeLimit, max_bytes=MAX_BODY_BYTES)
    app.include_router(page_router(settings, clock))  # the page at `/` (services/gateway/web)

    add_error_handlers(app)

    app.include_router(health_router())
    app.include_router(chat_router())  # chat turns, whole or streamed (contract §4)
    app.include_router(calendar_router())  # events, the pending command, plans, the .ics (§4, §9)
    app.include_router(records_router())  # a turn's timeline, token usage (contract §17)
    app.include_router(feeds_router())  # private feeds (contract §10)

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(_principal: AuthPrincipal) -> JSONResponse:
        return JSONResponse(app.openapi())

    app.include_router(accounts_router())  # connected calendars (contract §12)
    app.include_router(history_router())  # the conversation (contract §18)
    app.include_router(commands_router())  # commands without the model (contract §18)
    app.include_router(changes_router())  # the change log and undo (contract §15)
    app.include_router(tasks_router())  # tasks placed in free time (contract §21)
    app.include_router(signin_router())  # one-time sign-in links (contract §18)
    app.include_router(oidc_router(settings, clock))  # sign-in with OpenID Connect (contract §18)
    app.include_router(people_router())  # contacts and the mail address (contract §16)
    app.include_router(settings_router())  # settings and free/busy sharing (contract §16)
    return app
