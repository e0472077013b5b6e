"""The HTTP gateway (contract §4): auth, input limits, channel envelopes, the SSE relay.

It never calls the model and owns no data: chat turns go to the agent over JetStream, reads go to
the commands and evalrec services over request-reply. Every failure of those becomes a JSON status
(503 not answering, 502 answered badly, 504 turn timeout), never a stack trace. Every error body,
whatever raised it, is `{"error": {"code": …, "message": …}}` (contract §11).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import uuid
from collections.abc import AsyncIterator, Awaitable
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from opentelemetry import trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.trace import Span
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from calagent.contracts import subjects, wire
from calagent.contracts.bus import HealthCheck
from calagent.contracts.commands import (
    DeletePlan,
    EventOut,
    ExportIcs,
    FeedCalendar,
    GetActiveStub,
    ListPlans,
    QueryRange,
    QueryRequest,
    QueryResult,
    RotateFeed,
    StubOut,
)
from calagent.contracts.envelope import Channel, Envelope
from calagent.contracts.evalrec import TimelineRequest, UsageRequest
from calagent.contracts.limits import (
    MAX_RANGE,
    OUT_OF_RANGE_MESSAGE,
    RANGE_TOO_LONG_MESSAGE,
    within_supported_years,
)
from calagent.contracts.text import refuse_unstorable
from calagent.contracts.transport import own_names, unwrap
from calagent.contracts.turns import (
    MAX_MESSAGE_CHARS,
    Segment,
    TurnDelivered,
    TurnEvent,
    event_view,
    stub_view,
)
from calagent.gateway.accounts import accounts_router
from calagent.gateway.auth import AuthError, Principal
from calagent.gateway.changes import changes_router
from calagent.gateway.commands import commands_router
from calagent.gateway.history import history_router
from calagent.gateway.limits import MAX_BODY_BYTES, PAYLOAD_TOO_LARGE, BodySizeLimit, plain_id
from calagent.gateway.oidc import oidc_router
from calagent.gateway.people import people_router
from calagent.gateway.quotas import QuotaExceededError, QuotaUnavailableError
from calagent.gateway.session import CsrfError, principal_from_request
from calagent.gateway.signin import signin_router
from calagent.gateway.turns import (
    AgentUnreachableError,
    ChatTurn,
    IdempotencyKeyReusedError,
    TurnOutcome,
    TurnRunner,
    TurnTimeoutError,
)
from calagent.gateway.web import page_router
from calagent.runtime.bus import Bus, BusRequestError, StreamPublisher
from calagent.runtime.clock import Clock, clock_from_env
from calagent.runtime.settings import Settings, load_settings
from calagent.runtime.timeline import epoch_ms

log = logging.getLogger("calagent.gateway")

SERVICE = "gateway"
DEFAULT_CONVERSATION = "default"
# Above the services' own database probe (1 s), so a slow database reads as down, not missing.
HEALTH_TIMEOUT_S = 2.0
QUERY_TIMEOUT_S = 10.0
SHUTDOWN_GRACE_S = 5.0
# A feed secret as commands makes it (`secrets.token_urlsafe`) within `FeedCalendar`'s bounds;
# anything else in a feed address is answered 404 without asking anyone.
FEED_SECRET = re.compile(r"[A-Za-z0-9_-]{16,128}")
FEED_PATH = re.compile(r"/feeds/[^/\s\"]*")
FEED_NOT_FOUND = "no calendar feed at this address"
ICS_MEDIA_TYPE = "text/calendar; charset=utf-8"

tracer = trace.get_tracer("calagent.gateway")


# ---- errors ------------------------------------------------------------------------------------


# The `code` of an error body by HTTP status, where the status alone says what went wrong.
ERROR_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: PAYLOAD_TOO_LARGE,
    422: "invalid_request",
    500: "internal_error",
    502: "bad_gateway",
    503: "service_unavailable",
    504: "turn_timeout",
}


def error_code(status: int) -> str:
    return ERROR_CODES.get(status, "http_error")


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


class DownstreamError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class UnprocessableError(Exception):
    """A 422; `errors` are `{"loc", "msg", "type"}` items, sent as one message naming each field."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors

    @classmethod
    def one(cls, loc: list[str | int], msg: str, kind: str = "value_error") -> UnprocessableError:
        return cls([{"loc": loc, "msg": msg, "type": kind}])

    @property
    def message(self) -> str:
        return "; ".join(f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in self.errors)


def downstream(service: str, exc: BusRequestError) -> DownstreamError:
    if exc.code in ("unavailable", "timeout", "transient"):
        return DownstreamError(503, f"the {service} service is not answering ({exc.code})")
    return DownstreamError(502, f"the {service} service could not answer ({exc.code})")


# ---- input -------------------------------------------------------------------------------------


class ChatRequest(BaseModel):
    """`POST /v1/chat`; strict types so a number or a list is refused, not coerced into text."""

    model_config = ConfigDict(strict=True, extra="ignore")

    message: StrictStr
    conversation_id: StrictStr | None = Field(default=None, min_length=1, max_length=128)
    client_message_id: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    active_command_id: StrictStr | None = Field(default=None, min_length=1, max_length=64)
    channel: Channel = "web"

    @field_validator("message", "conversation_id", "client_message_id", "active_command_id")
    @classmethod
    def _storable(cls, value: str | None) -> str | None:
        return value if value is None else refuse_unstorable(value)

    @field_validator("message")
    @classmethod
    def _message_bounds(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("message is empty")
        if len(value) > MAX_MESSAGE_CHARS:
            raise ValueError(f"message is {len(value)} characters; at most {MAX_MESSAGE_CHARS} are accepted")
        return value


def parse_chat_body(raw: bytes) -> ChatRequest:
    try:
        data = json.loads(raw)
    except RecursionError as exc:
        raise UnprocessableError.one(["body"], "the body is nested too deeply", "json_invalid") from exc
    except ValueError as exc:
        # JSONDecodeError and UnicodeDecodeError are ValueErrors, and so is an integer literal
        # longer than Python converts (4,300 digits).
        raise UnprocessableError.one(["body"], f"the body is not valid JSON: {exc}", "json_invalid") from exc
    if not isinstance(data, dict):
        raise UnprocessableError.one(
            ["body"], "the body must be a JSON object with a 'message' string", "dict_type"
        )
    try:
        return ChatRequest.model_validate(data)
    except ValidationError as exc:
        raise UnprocessableError(
            [
                {"loc": ["body", *err["loc"]], "msg": err["msg"], "type": err["type"]}
                for err in exc.errors(include_url=False)
            ]
        ) from exc


def parse_instant(name: str, value: str | None, tz: str) -> datetime:
    """An ISO 8601 instant; a date or a time without offset is read in the caller's zone."""
    if not value:
        raise UnprocessableError.one(["query", name], f"'{name}' is required (ISO 8601)", "missing")
    try:
        at = datetime.fromisoformat(value)
    except ValueError as exc:
        raise UnprocessableError.one(
            ["query", name], f"'{name}' is not an ISO 8601 date or date-time"
        ) from exc
    if not within_supported_years(at):
        raise UnprocessableError.one(["query", name], f"'{name}': {OUT_OF_RANGE_MESSAGE}")
    if at.tzinfo is None:
        at = at.replace(tzinfo=ZoneInfo(tz))
    return at


# ---- the app -----------------------------------------------------------------------------------


class Gateway:
    def __init__(self, settings: Settings, clock: Clock, bus: Bus | None) -> None:
        self.settings = settings
        self.clock = clock
        self._bus: Bus | None = None
        self._runner: TurnRunner | None = None
        self._delivered: StreamPublisher[TurnDelivered] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        if bus is not None:
            self.attach(bus)

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
        self._delivered = bus.stream_publisher(wire.TURN_DELIVERED)

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

    async def ask(self, query: Any) -> QueryResult:
        """A query to the commands service, its own errors left in the result."""
        try:
            return await self.bus.request(
                wire.COMMAND_QUERY, QueryRequest(query=query), timeout=QUERY_TIMEOUT_S
            )
        except BusRequestError as exc:
            raise downstream("commands", exc) from exc

    async def query(self, principal: Principal, query: Any) -> QueryResult:
        result = await self.ask(query)
        if result.error is not None:
            code = 422 if result.error.code in ("invalid_range", "invalid_time", "invalid_symbol") else 502
            raise DownstreamError(code, result.error.message)
        return result

    async def deliver(self, turn: ChatTurn, outcome: TurnOutcome, done_span: Span | None) -> None:
        """Report this gateway's latency segments; never fails the request it describes."""
        written_ms = epoch_ms()
        if done_span is not None:
            done_span.end()
        if outcome.replayed:
            return
        start = turn.received_ms
        record = TurnDelivered(
            turn_id=turn.turn_id,
            user_id=turn.principal.user_id,
            segments=(
                Segment(name="gateway.receive", start_ms=0.0, ms=outcome.published_ms - start),
                Segment(
                    name="gateway.wait",
                    start_ms=outcome.published_ms - start,
                    ms=outcome.done_ms - outcome.published_ms,
                ),
                Segment(
                    name="gateway.done", start_ms=outcome.done_ms - start, ms=written_ms - outcome.done_ms
                ),
            ),
            total_ms=written_ms - start,
        )
        if self._delivered is None:
            return
        try:
            await self._delivered.publish(record, msg_id=f"delivered:{turn.turn_id}")
        except Exception:
            log.warning("could not publish the delivery record of %s", turn.turn_id, exc_info=True)


def redact_feed_secrets(text: str) -> str:
    """A feed address is its own credential: logs and traces keep only its shape."""
    return FEED_PATH.sub("/feeds/<redacted>", text)


class RedactFeedSecrets(logging.Filter):
    """For uvicorn's access log, whose record arguments carry the request path."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_feed_secrets(a) if isinstance(a, str) else a for a in record.args)
        return True


def _gateway(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


def authenticate(request: Request) -> Principal:
    """The bearer token's user, else the session cookie's (contract §18, `session.py`)."""
    gw = _gateway(request)
    return principal_from_request(request, gw.settings, gw.clock)


AuthPrincipal = Annotated[Principal, Depends(authenticate)]


def _error_json(status: int, message: str, code: str | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse(error_body(code or error_code(status), message, **extra), status_code=status)


def _sse(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


def _event_json(event: TurnEvent) -> str:
    return event.model_dump_json(exclude_none=True)


def _stub_view(stub: StubOut | None) -> dict[str, Any] | None:
    return None if stub is None else stub_view(stub).model_dump(mode="json")


def _event_view(event: EventOut) -> dict[str, Any]:
    return event_view(event).model_dump(mode="json")


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
            active = Bus(settings.require_nats(), SERVICE, clock, replicas=settings.nats_replicas)
            gw.attach(active)
            active.serve_health()
        else:
            active = bus
        try:
            await active.start()
            yield
        finally:
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
    )
    app.state.gateway = gw
    app.add_middleware(BodySizeLimit, max_bytes=MAX_BODY_BYTES)
    app.include_router(page_router(settings, clock))  # the page at `/` (services/gateway/web)

    # ---- error mapping ---------------------------------------------------------------------------

    @app.exception_handler(AuthError)
    async def on_auth_error(_request: Request, exc: AuthError) -> JSONResponse:
        response = _error_json(401, str(exc))
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    @app.exception_handler(CsrfError)
    async def on_csrf(_request: Request, exc: CsrfError) -> JSONResponse:
        return _error_json(403, str(exc), "csrf_failed")

    @app.exception_handler(UnprocessableError)
    async def on_unprocessable(_request: Request, exc: UnprocessableError) -> JSONResponse:
        return _error_json(422, exc.message)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Routes parse their own input; this keeps any validation FastAPI does in the same shape.
        errors = [{"loc": e.get("loc", ()), "msg": e.get("msg", "invalid")} for e in exc.errors()]
        return _error_json(422, UnprocessableError(errors).message)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Unknown paths and methods: FastAPI's default body would be `{"detail": …}`.
        response = _error_json(exc.status_code, str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(IdempotencyKeyReusedError)
    async def on_key_reused(_request: Request, exc: IdempotencyKeyReusedError) -> JSONResponse:
        return _error_json(409, str(exc), "idempotency_key_reused")

    @app.exception_handler(DownstreamError)
    async def on_downstream(_request: Request, exc: DownstreamError) -> JSONResponse:
        return _error_json(exc.status, exc.detail)

    @app.exception_handler(QuotaExceededError)
    async def on_quota(_request: Request, exc: QuotaExceededError) -> JSONResponse:
        response = _error_json(429, exc.message, exc.code, retry_after_s=round(exc.retry_after_s, 3))
        response.headers["Retry-After"] = str(math.ceil(exc.retry_after_s))
        return response

    @app.exception_handler(QuotaUnavailableError)
    async def on_quota_unavailable(_request: Request, exc: QuotaUnavailableError) -> JSONResponse:
        log.warning("%s", exc)
        return _error_json(503, "the turn could not be checked against the account's limits; try again")

    @app.exception_handler(TurnTimeoutError)
    async def on_timeout(_request: Request, exc: TurnTimeoutError) -> JSONResponse:
        return _error_json(504, "the agent did not answer in time", turn_id=exc.turn_id)

    @app.exception_handler(AgentUnreachableError)
    async def on_unreachable(_request: Request, exc: AgentUnreachableError) -> JSONResponse:
        log.warning("%s", exc)
        return _error_json(503, "the turn could not be handed to the agent; try again")

    @app.exception_handler(Exception)
    async def on_unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error in the gateway", exc_info=exc)
        return _error_json(500, "internal error in the gateway")

    # ---- routes ----------------------------------------------------------------------------------

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        """Every service named with what it answered ("ok", "degraded": it answers but a dependency
        it needs is down, "missing": no replica answers), and the dependencies by name, so a
        database or bus outage shows here instead of only as failing turns."""
        others = [s for s in subjects.SERVICES if s != SERVICE]
        dependencies: dict[str, str] = {"bus": "ok" if gw.bus_connected else "down"}

        async def ask(service: str) -> str:
            try:
                reply = await gw.bus.request(wire.health(service), HealthCheck(), timeout=HEALTH_TIMEOUT_S)
            except Exception:
                return "missing"
            for name, state in reply.dependencies.items():
                if state != "ok" or name not in dependencies:
                    dependencies[name] = state
            return reply.status

        answers = await asyncio.gather(*(ask(s) for s in others))
        services = {SERVICE: "ok", **dict(zip(others, answers, strict=True))}
        healthy = all(v == "ok" for v in services.values()) and all(v == "ok" for v in dependencies.values())
        return JSONResponse(
            {"status": "ok" if healthy else "degraded", "services": services, "dependencies": dependencies},
            status_code=200 if healthy else 503,
        )

    # The route parses its own body (to answer every malformed one in the contract's shape); the
    # schema still documents it, so clients and the fuzz test see what a chat body is.
    @app.post(
        "/v1/chat",
        response_model=None,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ChatRequest.model_json_schema()}},
            }
        },
    )
    async def chat(request: Request, principal: AuthPrincipal) -> Response:
        received_ms = epoch_ms()
        receive_span = tracer.start_span(
            "gateway.receive", attributes={"calagent.user_id": principal.user_id}
        )
        try:
            with trace.use_span(receive_span, end_on_exit=False):
                body = parse_chat_body(await request.body())
                unwrapped = unwrap(body.message, own_names(principal.user_id, principal.aliases))
                if not unwrapped.text:
                    raise UnprocessableError.one(
                        ["body", "message"],
                        "message has no text of its own once channel wrappers are removed",
                    )
                turn = ChatTurn(
                    principal=principal,
                    raw_text=body.message,
                    unwrapped=unwrapped,
                    conversation_id=body.conversation_id or DEFAULT_CONVERSATION,
                    channel=body.channel,
                    client_message_id=body.client_message_id,
                    active_command_id=body.active_command_id,
                    received_ms=received_ms,
                    receive_span=receive_span,
                )
                receive_span.set_attribute("calagent.turn_id", turn.turn_id)
                receive_span.set_attribute("calagent.third_party", unwrapped.third_party)
                if "text/event-stream" in request.headers.get("accept", ""):
                    return await _stream(turn)
                task = gw.spawn(gw.runner.run(turn))
                # Shielded: a client that hangs up does not cancel a turn other retries may await.
                outcome: TurnOutcome = await asyncio.shield(task)
        finally:
            # Normally ended at publish; this covers a refusal or a replayed answer.
            if receive_span.is_recording():
                receive_span.end()
        done_span = tracer.start_span("gateway.done", attributes={"calagent.turn_id": turn.turn_id})
        refused_for = outcome.answer.retry_after_s
        if refused_for is not None:
            # The model endpoint is treated as down: said at once, with when to try again (§17).
            done_span.end()
            response = _error_json(
                503,
                outcome.answer.reply,
                "model_unavailable",
                turn_id=turn.turn_id,
                retry_after_s=refused_for,
            )
            response.headers["Retry-After"] = str(math.ceil(refused_for))
            return response
        return JSONResponse(
            outcome.answer.model_dump(mode="json"),
            background=BackgroundTask(gw.deliver, turn, outcome, done_span),
        )

    async def _stream(turn: ChatTurn) -> Response:
        events: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        task = gw.spawn(gw.runner.run(turn, events.put_nowait))
        task.add_done_callback(lambda _t: events.put_nowait(None))
        accepted = asyncio.ensure_future(turn.accepted.wait())
        await asyncio.wait({task, accepted}, return_when=asyncio.FIRST_COMPLETED)
        accepted.cancel()
        failure = task.exception() if task.done() else None
        if failure is not None:
            # Failed before the agent had it (no stream, lock wait ran out): a real HTTP status.
            raise failure

        async def body() -> AsyncIterator[bytes]:
            while (event := await events.get()) is not None:
                yield _sse(event.type, _event_json(event))
            exc = task.exception()
            if isinstance(exc, TurnTimeoutError):
                data = error_body(error_code(504), "the agent did not answer in time", turn_id=exc.turn_id)
                yield _sse("error", json.dumps(data))
                return
            if exc is not None:
                data = error_body(error_code(500), "the turn failed in the gateway")
                yield _sse("error", json.dumps(data))
                return
            outcome: TurnOutcome = task.result()
            done_span = tracer.start_span("gateway.done", attributes={"calagent.turn_id": turn.turn_id})
            yield _sse("turn.done", outcome.answer.model_dump_json())
            gw.spawn(gw.deliver(turn, outcome, done_span))

        return StreamingResponse(
            body(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.get("/v1/events")
    async def events(
        principal: AuthPrincipal, start: str | None = None, end: str | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        start_at = parse_instant("start", start, principal.tz)
        end_at = parse_instant("end", end, principal.tz)
        if end_at <= start_at:
            raise UnprocessableError.one(["query", "end"], "'end' must be after 'start'")
        if end_at - start_at > MAX_RANGE:
            raise UnprocessableError.one(["query", "end"], RANGE_TOO_LONG_MESSAGE)
        result = await gw.query(
            principal, QueryRange(envelope=gw.envelope(principal), start_at=start_at, end_at=end_at)
        )
        return {"events": [_event_view(e) for e in result.events]}

    @app.get("/v1/commands/active")
    async def active_command(principal: AuthPrincipal) -> dict[str, Any] | None:
        result = await gw.query(principal, GetActiveStub(envelope=gw.envelope(principal)))
        return _stub_view(result.stub)

    @app.get("/v1/turns/{turn_id}/timeline", response_model=None)
    async def timeline(principal: AuthPrincipal, turn_id: str) -> dict[str, Any] | JSONResponse:
        if not plain_id(turn_id):
            return _error_json(404, "no timeline for this turn")
        try:
            result = await gw.bus.request(
                wire.EVALREC_TIMELINE,
                TimelineRequest(turn_id=turn_id, user_id=principal.user_id),
                timeout=QUERY_TIMEOUT_S,
            )
        except BusRequestError as exc:
            raise downstream("evalrec", exc) from exc
        if result.timeline is None:
            return _error_json(404, "no timeline for this turn")
        return result.timeline.model_dump(mode="json")

    @app.get("/v1/usage", response_model=None)
    async def usage(principal: AuthPrincipal, days: str = "7") -> dict[str, Any]:
        """The caller's model tokens over the last `days` days, per day in the caller's zone (§17)."""
        if not days.isdigit() or not 1 <= int(days) <= 366:
            raise UnprocessableError.one(["query", "days"], "days must be a whole number from 1 to 366")
        try:
            result = await gw.bus.request(
                wire.EVALREC_USAGE,
                UsageRequest(user_id=principal.user_id, days=int(days), by="day", tz=principal.tz),
                timeout=QUERY_TIMEOUT_S,
            )
        except BusRequestError as exc:
            raise downstream("evalrec", exc) from exc
        return result.model_dump(mode="json")

    @app.get("/v1/calendar.ics")
    async def calendar_ics(principal: AuthPrincipal) -> Response:
        result = await gw.query(principal, ExportIcs(envelope=gw.envelope(principal)))
        if result.ics is None:
            raise DownstreamError(502, "the commands service returned no calendar")
        return Response(
            result.ics,
            media_type=ICS_MEDIA_TYPE,
            headers={"Content-Disposition": 'inline; filename="calendar.ics"'},
        )

    # ---- automation plans: offers that never run by themselves (contract §9) ---------------------

    @app.get("/v1/plans")
    async def plans(principal: AuthPrincipal) -> dict[str, list[dict[str, Any]]]:
        result = await gw.query(principal, ListPlans(envelope=gw.envelope(principal)))
        return {"plans": [plan.model_dump(mode="json") for plan in result.plans]}

    @app.delete("/v1/plans/{plan_id}", response_model=None)
    async def delete_plan(principal: AuthPrincipal, plan_id: str) -> Response:
        # Another user's plan id is answered like one that does not exist.
        if not plain_id(plan_id):
            return _error_json(404, "no plan with this id")
        result = await gw.query(principal, DeletePlan(envelope=gw.envelope(principal), plan_id=plan_id))
        if not result.deleted:
            return _error_json(404, "no plan with this id")
        return Response(status_code=204)

    # ---- private feeds (contract §10) ---------------------------------------------------------

    @app.post("/v1/feeds", status_code=201)
    async def rotate_feed(principal: AuthPrincipal) -> JSONResponse:
        """A new private address for the caller's feed; the previous one stops working."""
        result = await gw.query(principal, RotateFeed(envelope=gw.envelope(principal)))
        secret = result.feed_secret
        if secret is None or not FEED_SECRET.fullmatch(secret):
            raise DownstreamError(502, "the commands service returned no usable feed address")
        return JSONResponse(
            {"url": f"/feeds/{secret}.ics"}, status_code=201, headers={"Cache-Control": "no-store"}
        )

    @app.get("/feeds/{secret}.ics", response_model=None)
    async def feed(secret: str) -> Response:
        """No bearer: the secret is the credential. The answer is the feed or 404, nothing about
        whose it is; a malformed secret is not even asked about."""
        if not FEED_SECRET.fullmatch(secret):
            return _error_json(404, FEED_NOT_FOUND)
        result = await gw.ask(FeedCalendar(secret=secret))
        if result.error is not None and result.error.code == "not_found":
            return _error_json(404, FEED_NOT_FOUND)
        if result.error is not None or result.ics is None:
            raise DownstreamError(502, "the commands service could not serve the feed")
        return Response(
            result.ics,
            media_type=ICS_MEDIA_TYPE,
            headers={
                "Content-Disposition": 'inline; filename="calendar.ics"',
                "Cache-Control": "private, no-cache",
            },
        )

    # HEAD of a feed, for calendar apps that poll with it; one operation in the schema, not two
    # sharing an id.
    app.add_api_route(
        "/feeds/{secret}.ics", feed, methods=["HEAD"], include_in_schema=False, response_model=None
    )

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(_principal: AuthPrincipal) -> JSONResponse:
        return JSONResponse(app.openapi())

    app.include_router(accounts_router(authenticate))  # connected calendars (contract §12)
    app.include_router(history_router(authenticate))  # the conversation (contract §18)
    app.include_router(commands_router(authenticate))  # commands without the model (contract §18)
    app.include_router(changes_router(authenticate))  # the change log and undo (contract §15)
    app.include_router(signin_router())  # one-time sign-in links (contract §18)
    app.include_router(oidc_router(settings, clock))  # sign-in with OpenID Connect (contract §18)
    app.include_router(people_router(authenticate))  # contacts and the mail address (contract §16)

    # Feed addresses are credentials: no span records them.
    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,/feeds/")
    return app
