"""The bus: the contracts' endpoints, streams and topics as FastStream subscribers and publishers.

One `Bus` per process and service wraps FastStream's `NatsBroker` (nats-py underneath). The
declarations in `calagent.contracts.wire` are the only place a subject meets its types: `serve`
and `request` take an `Endpoint[Req, Rep]`, `consume` and `js_publish` a `Stream[Msg]`, so a
handler and its callers cannot disagree about a body. Trace context rides in NATS headers through
FastStream's `NatsTelemetryMiddleware` (OpenTelemetry messaging conventions).

Acknowledgement is explicit and owned here, never left to a framework default:

- request-reply: a body that is not the declared request type is dead-lettered and answered
  `malformed`; a `TransientError` is answered `transient` (the caller may retry with the same
  idempotency key); anything else is answered `internal`. No handler error leaves a caller
  waiting for its timeout.
- JetStream (`AckPolicy.MANUAL`): success is `ack`ed; a failure is `nack`ed with the policy's
  backoff; the delivery that reaches `max_deliver` is dead-lettered and `term`inated; a malformed
  body is dead-lettered and terminated at once. A long handler reports `in_progress` so `ack_wait`
  can stay short. A handler cancelled by shutdown settles nothing: JetStream redelivers after
  `ack_wait`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Generic, TypeVar

from faststream import AckPolicy, BaseMiddleware
from faststream.message import StreamMessage
from faststream.nats import (
    ConsumerConfig,
    JStream,
    NatsBroker,
    NatsRouter,
    PubAck,
    PullSub,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from faststream.nats.message import NatsMessage
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.nats.publisher.usecase import LogicPublisher
from nats.aio.client import Client as NatsClient
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, TracerProvider
from pydantic import BaseModel, ValidationError

from calagent.contracts import subjects
from calagent.contracts.bus import (
    BusError,
    BusErrorCode,
    BusErrorReply,
    DeadLetter,
    HealthCheck,
    HealthReply,
)
from calagent.contracts.wire import Endpoint, Stream, Topic, deadletter, health
from calagent.runtime.clock import Clock, SystemClock

log = logging.getLogger("calagent.bus")
# FastStream's own log: per-message lines and subscriber task chatter stay out of the service
# logs; its warnings and errors (a subscriber task that failed and restarts) stay in.
faststream_log = logging.getLogger("calagent.bus.faststream")
faststream_log.setLevel(logging.WARNING)

M = TypeVar("M", bound=BaseModel)
Req = TypeVar("Req", bound=BaseModel)
Rep = TypeVar("Rep", bound=BaseModel)

NO_RESPONDERS_GRACE_S = 2.0
# Requests one replica works on at once per endpoint; more wait in the subscription's buffer.
REQUEST_WORKERS = 256
# What a stopping process waits for its in-flight handlers.
GRACEFUL_TIMEOUT_S = 30.0


class BusRequestError(Exception):
    """A request got no usable answer: no responder, timeout, or an error reply."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class TransientError(Exception):
    """Raised by a handler for a failure worth retrying later (database down, dependency timeout)."""


class MalformedMessageError(Exception):
    """A body that is not the type its subject declares: retrying it can never help."""


def instance_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ---- the JetStream retry policy ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a durable consumer settles a failed delivery."""

    max_deliver: int = 5
    backoff: tuple[float, ...] = (0.5, 2.0, 5.0, 15.0)
    ack_wait: float = 180.0
    # While a handler runs, tell JetStream it is still working this often (None: never).
    progress_every: float | None = None

    def nak_delay(self, deliveries: int) -> float | None:
        """The redelivery delay after failed delivery number `deliveries`; None when it was the
        last one allowed (the message is dead-lettered instead)."""
        if deliveries >= self.max_deliver:
            return None
        return self.backoff[min(max(deliveries, 1) - 1, len(self.backoff) - 1)]


# ---- streams -----------------------------------------------------------------------------------------

STREAM_CONFIGS = (
    StreamConfig(
        name=subjects.TURNS_STREAM,
        subjects=[subjects.TURN_REQUESTED],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=600.0,
        max_age=7 * 24 * 3600.0,
    ),
    StreamConfig(
        name=subjects.RECORDS_STREAM,
        subjects=[subjects.TURN_RECORDED, subjects.TURN_DELIVERED],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=600.0,
    ),
    StreamConfig(
        name=subjects.DEADLETTER_STREAM,
        subjects=[f"{subjects.DEADLETTER_PREFIX}.>"],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        max_age=30 * 24 * 3600.0,
    ),
)


async def ensure_streams(js: JetStreamContext) -> None:
    """Create or update the streams the system needs; idempotent, safe from every replica."""
    for config in STREAM_CONFIGS:
        try:
            await js.stream_info(config.name or "")
            await js.update_stream(config)
        except NotFoundError:
            await js.add_stream(config)


def _jstream(name: str) -> JStream:
    # Declared by `ensure_streams` with their full configuration, not by FastStream from the
    # subjects its subscribers happen to name.
    return JStream(name, declare=False)


# ---- decoding and settling ---------------------------------------------------------------------------


def _decoder(model: type[BaseModel]) -> Callable[[StreamMessage[Any]], Awaitable[BaseModel]]:
    """Validate the body once, in JSON mode; the handler gets the model as is."""

    async def decode(msg: StreamMessage[Any]) -> BaseModel:
        try:
            # An empty body is an empty object: a bare health probe is a valid `HealthCheck`.
            return model.model_validate_json(msg.body or b"{}")
        except ValidationError as exc:
            raise MalformedMessageError(str(exc)) from exc

    return decode


def _deliveries(msg: StreamMessage[Any]) -> int:
    try:
        metadata = msg.raw_message.metadata
    except Exception:  # not a JetStream message (an in-memory test broker's)
        return 1
    return int(metadata.num_delivered or 1)


def _mark_failed(exc: BaseException) -> None:
    span = trace.get_current_span()
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))


class _Answer(BaseMiddleware):
    """Request-reply: every failure becomes an error reply (see the module docstring)."""

    def __init__(self, msg: Any, /, *, context: Any, bus: Bus, subject: str) -> None:
        super().__init__(msg, context=context)
        self.bus = bus
        self.subject = subject

    async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: StreamMessage[Any]) -> Any:
        code: BusErrorCode
        failure: Exception
        try:
            return await call_next(msg)
        except MalformedMessageError as exc:
            await self.bus.dead_letter(self.subject, "malformed", str(exc), msg.body)
            code, text, failure = "malformed", str(exc), exc
        except TransientError as exc:
            code, text, failure = "transient", str(exc), exc
        except Exception as exc:
            log.exception("handler for %s failed", self.subject)
            code, text, failure = "internal", repr(exc), exc
        _mark_failed(failure)
        return BusErrorReply(bus_error=BusError(code=code, message=text))


class _Settle(BaseMiddleware):
    """JetStream: ack, nack with backoff, or dead-letter and term (see the module docstring)."""

    def __init__(self, msg: Any, /, *, context: Any, bus: Bus, subject: str, policy: RetryPolicy) -> None:
        super().__init__(msg, context=context)
        self.bus = bus
        self.subject = subject
        self.policy = policy

    async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: NatsMessage) -> Any:  # type: ignore[override]
        deliveries = _deliveries(msg)
        every = self.policy.progress_every
        heartbeat = asyncio.create_task(_report_progress(msg, every)) if every else None
        try:
            await call_next(msg)
        except MalformedMessageError as exc:
            _mark_failed(exc)
            await self.bus.dead_letter(self.subject, "malformed", str(exc), msg.body, deliveries)
            await msg.reject()  # term: no redelivery can make it valid
            return None
        except Exception as exc:
            _mark_failed(exc)
            delay = self.policy.nak_delay(deliveries)
            if delay is None:
                await self.bus.dead_letter(self.subject, "exhausted", repr(exc), msg.body, deliveries)
                await msg.reject()
            else:
                log.warning(
                    "transient failure on %s (delivery %s), retrying in %ss: %r",
                    self.subject,
                    deliveries,
                    delay,
                    exc,
                )
                await msg.nack(delay=delay)
            return None
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
        await msg.ack()
        return None


async def _report_progress(msg: StreamMessage[Any], every: float) -> None:
    while True:
        await asyncio.sleep(every)
        try:
            await msg.raw_message.in_progress()
        except Exception:
            log.warning("could not report progress on %s", msg.raw_message.subject, exc_info=True)


class _Listen(BaseMiddleware):
    """Core fan-out: nobody waits for a reply, so a bad message is logged and dropped."""

    def __init__(self, msg: Any, /, *, context: Any, subject: str) -> None:
        super().__init__(msg, context=context)
        self.subject = subject

    async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: StreamMessage[Any]) -> Any:
        try:
            return await call_next(msg)
        except MalformedMessageError:
            log.warning("dropped a malformed message on %s", msg.raw_message.subject)
        except Exception:
            log.exception("handler for %s failed", self.subject)
        return None


# ---- typed publishers --------------------------------------------------------------------------------


class StreamPublisher(Generic[M]):
    """Publishes one JetStream subject's messages; `msg_id` makes a retry a no-op within the
    stream's duplicate window, and the returned ack says whether it was one."""

    def __init__(self, publisher: LogicPublisher, stream: Stream[M]) -> None:
        self._publisher = publisher
        self._stream = stream

    async def publish(self, message: M, *, msg_id: str | None = None, timeout: float = 10.0) -> PubAck:
        headers = {"Nats-Msg-Id": msg_id} if msg_id else None
        ack: PubAck = await self._publisher.publish(
            message, headers=headers, stream=self._stream.stream, timeout=timeout
        )
        return ack


class TopicPublisher(Generic[M]):
    """Publishes one topic's messages to `<prefix>.<key>`."""

    def __init__(self, publisher: LogicPublisher, topic: Topic[M]) -> None:
        self._publisher = publisher
        self._topic = topic

    async def publish(self, key: str, message: M) -> None:
        await self._publisher.publish(message, subject=self._topic.subject(key))


# ---- the bus -----------------------------------------------------------------------------------------


class Bus:
    """One service's connection: a FastStream broker, what the service serves, typed calls out.

    Subscribers are declared (`serve`, `consume`, `listen`) before `start`; `start` connects,
    ensures the streams and starts whatever is declared and not yet running, so it may be
    called again after declaring more.
    """

    def __init__(
        self,
        url: str,
        service: str,
        clock: Clock | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.service = service
        self.clock = clock or SystemClock()
        self.broker = NatsBroker(
            url,
            name=f"calagent-{service}",
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
            connect_timeout=5,
            drain_timeout=5,
            graceful_timeout=GRACEFUL_TIMEOUT_S,
            middlewares=(
                NatsTelemetryMiddleware(tracer_provider=tracer_provider, include_messages_counters=False),
            ),
            logger=faststream_log,
            # FastStream logs every message received and processed at this level.
            log_level=logging.DEBUG,
        )
        self._nc: NatsClient | None = None
        self._started: set[int] = set()
        self._stream_publishers: dict[str, StreamPublisher[Any]] = {}
        self._topic_publishers: dict[str, TopicPublisher[Any]] = {}
        # What this bus answers, as declared: the AsyncAPI document adds each one's reply.
        self.endpoints: list[Endpoint[Any, Any]] = []
        self._dead_letters = self.stream_publisher(deadletter(service))

    @classmethod
    async def connect(cls, url: str, service: str, clock: Clock | None = None) -> Bus:
        """A started bus for a caller that only requests and publishes (CLI, tests)."""
        bus = cls(url, service, clock)
        await bus.start()
        return bus

    # ---- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and make sure the streams exist, starting no subscriber yet."""
        if self._nc is None:
            self._nc = await self.broker.connect()
            await ensure_streams(self._nc.jetstream())

    async def start(self) -> None:
        await self.open()
        if not self.broker.running:
            await self.broker.start()
        else:
            for subscriber in self.broker.subscribers:
                if id(subscriber) not in self._started:
                    await subscriber.start()
        self._started.update(id(subscriber) for subscriber in self.broker.subscribers)
        # Once `start` returns, the server knows every subscription: a request sent right after
        # from another connection finds its responder.
        await self.nc.flush()

    async def close(self) -> None:
        """Stop taking messages, let in-flight handlers finish (bounded), then disconnect."""
        with contextlib.suppress(Exception):
            await self.broker.stop()
        self._nc = None
        self._started.clear()

    @property
    def nc(self) -> NatsClient:
        """The nats-py connection, for what no typed call may send (tests sending garbage)."""
        if self._nc is None:
            raise RuntimeError("the bus is not connected")
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        """The JetStream context, for stream administration (tests, operators)."""
        return self.nc.jetstream()

    # ---- serving ---------------------------------------------------------------------------------

    def title(self, subject: str, *, publishes: bool = False) -> str:
        """The AsyncAPI name of this service's side of `subject`."""
        return f"{self.service}:{'publish' if publishes else 'receive'}:{subject}"

    def serve(
        self,
        endpoint: Endpoint[Req, Rep],
        handler: Callable[[Req], Awaitable[Rep]],
        *,
        max_workers: int = REQUEST_WORKERS,
    ) -> None:
        """Answer `endpoint` in this service's queue group (replicas share the load)."""
        router = NatsRouter(middlewares=(_policy(_Answer, bus=self, subject=endpoint.subject),))
        router.subscriber(
            endpoint.subject,
            queue=subjects.queue_group(self.service),
            max_workers=max_workers,
            decoder=_decoder(endpoint.request),
            title=self.title(endpoint.subject),
            description=endpoint.summary,
        )(handler)
        self.broker.include_router(router)
        self.endpoints.append(endpoint)

    def serve_health(self) -> None:
        reply = HealthReply(service=self.service, instance=instance_id())

        async def on_health(_check: HealthCheck) -> HealthReply:
            return reply

        self.serve(health(self.service), on_health, max_workers=4)

    def consume(
        self,
        stream: Stream[M],
        handler: Callable[[M], Awaitable[None]],
        *,
        policy: RetryPolicy,
        durable: str | None = None,
        max_workers: int = 8,
    ) -> None:
        """Process `stream` through a durable pull consumer shared by every replica."""
        name = durable or stream.durable
        if name is None:
            raise ValueError(f"{stream.subject} has no durable consumer")
        router = NatsRouter(middlewares=(_policy(_Settle, bus=self, subject=stream.subject, policy=policy),))
        router.subscriber(
            stream.subject,
            stream=_jstream(stream.stream),
            durable=name,
            config=ConsumerConfig(
                durable_name=name,
                filter_subject=stream.subject,
                ack_wait=policy.ack_wait,
                max_deliver=policy.max_deliver,
                max_ack_pending=1000,
            ),
            # One message per fetch: a busy replica leaves the next turn to an idle one.
            pull_sub=PullSub(batch_size=1, timeout=1.0),
            ack_policy=AckPolicy.MANUAL,
            max_workers=max_workers,
            decoder=_decoder(stream.message),
            title=self.title(stream.subject),
            description=f"{stream.summary} Durable pull consumer `{name}`.",
        )(handler)
        self.broker.include_router(router)

    def listen(self, topic: Topic[M], handler: Callable[[M], Awaitable[None]]) -> None:
        """Receive every message of `topic` (no queue group, in order of arrival)."""
        router = NatsRouter(middlewares=(_policy(_Listen, subject=topic.wildcard),))
        router.subscriber(
            topic.wildcard,
            decoder=_decoder(topic.message),
            title=self.title(topic.wildcard),
            description=topic.summary,
        )(handler)
        self.broker.include_router(router)

    # ---- calling ---------------------------------------------------------------------------------

    async def request(self, endpoint: Endpoint[Req, Rep], message: Req, *, timeout: float = 10.0) -> Rep:
        loop = asyncio.get_running_loop()
        # "No responders" is what a replica starting or restarting looks like for a moment
        # (its queue subscription is not registered yet): wait briefly before calling it down.
        give_up = loop.time() + min(timeout, NO_RESPONDERS_GRACE_S)
        delay = 0.01
        while True:
            try:
                reply = await self.broker.request(message, endpoint.subject, timeout=timeout)
                break
            except NoRespondersError as exc:
                if loop.time() + delay > give_up:
                    raise BusRequestError("unavailable", f"no service answers {endpoint.subject}") from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.25)
            except NatsTimeoutError as exc:
                raise BusRequestError(
                    "timeout", f"{endpoint.subject} did not answer within {timeout}s"
                ) from exc
        data = reply.body
        if data.startswith(b'{"bus_error"'):
            err = BusErrorReply.model_validate_json(data).bus_error
            raise BusRequestError(err.code, err.message)
        try:
            return endpoint.reply.model_validate_json(data)
        except ValidationError as exc:
            raise BusRequestError(
                "malformed", f"reply on {endpoint.subject} is not a {endpoint.reply.__name__}"
            ) from exc

    def stream_publisher(self, stream: Stream[M]) -> StreamPublisher[M]:
        """The (documented) publisher of `stream`; one per subject."""
        known = self._stream_publishers.get(stream.subject)
        if known is None:
            publisher = self.broker.publisher(
                stream.subject,
                stream=_jstream(stream.stream),
                schema=stream.message,
                title=self.title(stream.subject, publishes=True),
                description=stream.summary,
            )
            known = self._stream_publishers[stream.subject] = StreamPublisher(publisher, stream)
        publisher_of_stream: StreamPublisher[M] = known
        return publisher_of_stream

    def topic_publisher(self, topic: Topic[M]) -> TopicPublisher[M]:
        known = self._topic_publishers.get(topic.prefix)
        if known is None:
            publisher = self.broker.publisher(
                topic.wildcard,
                schema=topic.message,
                title=self.title(topic.wildcard, publishes=True),
                description=topic.summary,
            )
            known = self._topic_publishers[topic.prefix] = TopicPublisher(publisher, topic)
        publisher_of_topic: TopicPublisher[M] = known
        return publisher_of_topic

    async def js_publish(
        self, stream: Stream[M], message: M, *, msg_id: str | None = None, timeout: float = 10.0
    ) -> PubAck:
        return await self.stream_publisher(stream).publish(message, msg_id=msg_id, timeout=timeout)

    async def publish(self, topic: Topic[M], key: str, message: M) -> None:
        await self.topic_publisher(topic).publish(key, message)

    async def dead_letter(
        self, subject: str, reason: str, error: str, payload: bytes, deliveries: int = 1
    ) -> None:
        record = DeadLetter(
            service=self.service,
            subject=subject,
            reason="malformed" if reason == "malformed" else "exhausted",
            error=error[:4000],
            payload=payload[:16000].decode("utf-8", errors="replace"),
            deliveries=deliveries,
            occurred_at=self.clock.now().astimezone(UTC),
        )
        log.warning("dead-lettered a %s message on %s: %s", reason, subject, error[:300])
        try:
            await self._dead_letters.publish(record)
        except Exception:
            log.exception("could not publish a dead letter for %s", subject)


def _policy(kind: type[BaseMiddleware], **options: Any) -> Any:
    """A FastStream middleware factory: `kind` built per message with `options`."""

    def build(msg: Any, /, *, context: Any) -> BaseMiddleware:
        return kind(msg, context=context, **options)

    return build
