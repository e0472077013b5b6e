"""The bus: pydantic models over NATS core request-reply and JetStream pull consumers.

Written on nats-py directly so every acknowledgement is explicit: a transient failure is a `nak`
with backoff, a malformed message is dead-lettered and `term`inated, an exhausted one is
dead-lettered too. Nothing is rejected by a framework default, and no worker dies on bad input.
W3C trace context rides in NATS headers both ways.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import UTC
from typing import Any, TypeVar

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from pydantic import BaseModel, ValidationError

from calagent.contracts import subjects
from calagent.contracts.bus import BusError, BusErrorReply, DeadLetter, HealthReply
from calagent.runtime.clock import Clock, SystemClock

log = logging.getLogger("calagent.bus")

NO_RESPONDERS_GRACE_S = 2.0

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)

RequestHandler = Callable[[Any, Mapping[str, str]], Awaitable[BaseModel]]
JsHandler = Callable[[Any, Mapping[str, str]], Awaitable[None]]


class BusRequestError(Exception):
    """A request got no usable answer: no responder, timeout, or an error reply."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class TransientError(Exception):
    """Raised by a handler for a failure worth retrying later (database down, dependency timeout)."""


def instance_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def inject_trace_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    carrier: dict[str, str] = dict(headers or {})
    propagate.inject(carrier)
    return carrier


def extract_trace_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    return propagate.extract(dict(headers or {}))


async def ensure_streams(js: JetStreamContext) -> None:
    """Create or update the streams the system needs; idempotent, safe from every replica."""
    wanted = [
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
    ]
    for config in wanted:
        try:
            await js.stream_info(config.name or "")
            await js.update_stream(config)
        except NotFoundError:
            await js.add_stream(config)


class Bus:
    def __init__(self, nc: NatsClient, service: str, clock: Clock | None = None) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.service = service
        self.clock = clock or SystemClock()
        self.tracer = trace.get_tracer(f"calagent.{service}")
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = asyncio.Event()

    @classmethod
    async def connect(cls, url: str, service: str, clock: Clock | None = None) -> Bus:
        nc = await nats.connect(
            url,
            name=f"calagent-{service}",
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            connect_timeout=5,
        )
        return cls(nc, service, clock)

    # ---- request-reply -------------------------------------------------------------------------

    async def request(
        self,
        subject: str,
        message: BaseModel,
        reply_type: type[R],
        *,
        timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
    ) -> R:
        payload = message.model_dump_json().encode()
        with self.tracer.start_as_current_span(
            f"bus.request {subject}", kind=SpanKind.CLIENT, attributes={"messaging.destination.name": subject}
        ):
            loop = asyncio.get_running_loop()
            # "No responders" is what a replica starting or restarting looks like for a moment
            # (its queue subscription is not registered yet): wait briefly before calling it down.
            give_up = loop.time() + min(timeout, NO_RESPONDERS_GRACE_S)
            delay = 0.01
            while True:
                try:
                    reply = await self.nc.request(
                        subject, payload, timeout=timeout, headers=inject_trace_headers(dict(headers or {}))
                    )
                    break
                except NoRespondersError as exc:
                    if loop.time() + delay > give_up:
                        raise BusRequestError("unavailable", f"no service answers {subject}") from exc
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.25)
                except NatsTimeoutError as exc:
                    raise BusRequestError("timeout", f"{subject} did not answer within {timeout}s") from exc
        data = reply.data
        if data.startswith(b'{"bus_error"'):
            err = BusErrorReply.model_validate_json(data).bus_error
            raise BusRequestError(err.code, err.message)
        try:
            return reply_type.model_validate_json(data)
        except ValidationError as exc:
            raise BusRequestError("malformed", f"reply on {subject} is not a {reply_type.__name__}") from exc

    def serve(self, subject: str, request_type: type[M], handler: RequestHandler) -> None:
        """Answer requests on `subject` in this service's queue group (replicas share the load)."""

        async def on_message(msg: Msg) -> None:
            headers = dict(msg.headers or {})
            try:
                request = request_type.model_validate_json(msg.data)
            except ValidationError as exc:
                await self.dead_letter(subject, "malformed", str(exc), msg.data)
                await self._reply(msg, BusErrorReply(bus_error=BusError(code="malformed", message=str(exc))))
                return
            token = otel_context.attach(extract_trace_context(headers))
            span = self.tracer.start_span(
                f"{self.service} {subject}",
                kind=SpanKind.SERVER,
                attributes={"messaging.destination.name": subject},
            )
            span_token = otel_context.attach(trace.set_span_in_context(span))
            try:
                result = await handler(request, headers)
            except TransientError as exc:
                result = BusErrorReply(bus_error=BusError(code="transient", message=str(exc)))
            except Exception as exc:
                log.exception("handler for %s failed", subject)
                result = BusErrorReply(bus_error=BusError(code="internal", message=repr(exc)))
            finally:
                otel_context.detach(span_token)
                span.end()
                otel_context.detach(token)
            await self._reply(msg, result)

        self._tasks.append(asyncio.create_task(self._subscribe(subject, on_message)))

    async def _subscribe(self, subject: str, cb: Callable[[Msg], Coroutine[Any, Any, None]]) -> None:
        # Each message is handled in its own task so one slow request (a model call, a big query)
        # never blocks the others that share this subscription.
        pending: set[asyncio.Task[None]] = set()

        async def dispatch(msg: Msg) -> None:
            task = asyncio.create_task(cb(msg))
            pending.add(task)
            task.add_done_callback(pending.discard)

        sub = await self.nc.subscribe(subject, queue=subjects.queue_group(self.service), cb=dispatch)
        try:
            await self._closing.wait()
        finally:
            with contextlib.suppress(Exception):
                await sub.drain()  # type: ignore[no-untyped-call]
            if pending:
                await asyncio.wait(pending, timeout=10)

    async def _reply(self, msg: Msg, result: BaseModel) -> None:
        if msg.reply:
            await self.nc.publish(msg.reply, result.model_dump_json().encode())

    def serve_health(self) -> None:
        reply = HealthReply(service=self.service, instance=instance_id())

        async def on_message(msg: Msg) -> None:
            await self._reply(msg, reply)

        self._tasks.append(asyncio.create_task(self._subscribe(subjects.health(self.service), on_message)))

    # ---- publish -------------------------------------------------------------------------------

    async def publish(
        self, subject: str, message: BaseModel, headers: Mapping[str, str] | None = None
    ) -> None:
        await self.nc.publish(
            subject, message.model_dump_json().encode(), headers=inject_trace_headers(dict(headers or {}))
        )

    async def js_publish(
        self,
        subject: str,
        message: BaseModel,
        *,
        msg_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Publish to JetStream; `msg_id` makes a retried publish a no-op within the dedup window."""
        with self.tracer.start_as_current_span(
            f"bus.publish {subject}",
            kind=SpanKind.PRODUCER,
            attributes={"messaging.destination.name": subject},
        ):
            hdrs = inject_trace_headers(dict(headers or {}))
            if msg_id:
                hdrs["Nats-Msg-Id"] = msg_id
            await self.js.publish(subject, message.model_dump_json().encode(), headers=hdrs, timeout=10)

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
            await self.js_publish(subjects.deadletter(self.service), record)
        except Exception:
            log.exception("could not publish a dead letter for %s", subject)

    # ---- JetStream pull consumers ----------------------------------------------------------------

    def consume(
        self,
        *,
        stream: str,
        durable: str,
        subject: str,
        message_type: type[M],
        handler: JsHandler,
        max_deliver: int = 5,
        backoff: tuple[float, ...] = (0.5, 2.0, 5.0, 15.0),
        ack_wait: float = 180.0,
        concurrency: int = 8,
    ) -> None:
        """Process `subject` through a durable pull consumer shared by every replica."""
        self._tasks.append(
            asyncio.create_task(
                self._pull_loop(
                    stream,
                    durable,
                    subject,
                    message_type,
                    handler,
                    max_deliver,
                    backoff,
                    ack_wait,
                    concurrency,
                )
            )
        )

    async def _pull_loop(
        self,
        stream: str,
        durable: str,
        subject: str,
        message_type: type[M],
        handler: JsHandler,
        max_deliver: int,
        backoff: tuple[float, ...],
        ack_wait: float,
        concurrency: int,
    ) -> None:
        config = ConsumerConfig(
            durable_name=durable,
            ack_wait=ack_wait,
            max_deliver=max_deliver,
            filter_subject=subject,
            max_ack_pending=1000,
        )
        psub = await self.js.pull_subscribe(subject, durable=durable, stream=stream, config=config)
        slots = asyncio.Semaphore(concurrency)
        running: set[asyncio.Task[None]] = set()

        async def process(msg: Msg) -> None:
            try:
                await self._process_js(msg, subject, message_type, handler, max_deliver, backoff)
            finally:
                slots.release()

        try:
            while not self._closing.is_set():
                await slots.acquire()
                try:
                    msgs = await psub.fetch(1, timeout=1.0)
                except NatsTimeoutError:
                    slots.release()
                    continue
                except Exception:
                    slots.release()
                    if self._closing.is_set():
                        break
                    log.exception("fetch on %s failed; retrying", subject)
                    await asyncio.sleep(0.5)
                    continue
                for msg in msgs:
                    task = asyncio.create_task(process(msg))
                    running.add(task)
                    task.add_done_callback(running.discard)
        finally:
            if running:
                await asyncio.wait(running, timeout=30)
            with contextlib.suppress(Exception):
                await psub.unsubscribe()

    async def _process_js(
        self,
        msg: Msg,
        subject: str,
        message_type: type[M],
        handler: JsHandler,
        max_deliver: int,
        backoff: tuple[float, ...],
    ) -> None:
        deliveries = msg.metadata.num_delivered if msg.metadata else 1
        try:
            message = message_type.model_validate_json(msg.data)
        except ValidationError as exc:
            await self.dead_letter(subject, "malformed", str(exc), msg.data, deliveries)
            await msg.term()
            return
        headers = dict(msg.headers or {})
        token = otel_context.attach(extract_trace_context(headers))
        span = self.tracer.start_span(
            f"{self.service} process {subject}",
            kind=SpanKind.CONSUMER,
            attributes={"messaging.destination.name": subject, "messaging.nats.deliveries": deliveries},
        )
        span_token = otel_context.attach(trace.set_span_in_context(span))
        try:
            await handler(message, headers)
        except Exception as exc:
            if deliveries >= max_deliver:
                await self.dead_letter(subject, "exhausted", repr(exc), msg.data, deliveries)
                await msg.term()
            else:
                delay = backoff[min(deliveries - 1, len(backoff) - 1)]
                log.warning(
                    "transient failure on %s (delivery %s), retrying in %ss: %r",
                    subject,
                    deliveries,
                    delay,
                    exc,
                )
                await msg.nak(delay=delay)
            return
        finally:
            otel_context.detach(span_token)
            span.end()
            otel_context.detach(token)
        await msg.ack()

    # ---- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        self._closing.set()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=30)
        # Every subscription has already been drained and every in-flight handler awaited above;
        # flushing then closing sends what is buffered without nats-py's drain, which can stall
        # on a pull subscription's inbox until its 30 s drain timeout.
        with contextlib.suppress(Exception):
            await self.nc.flush(timeout=2)
        with contextlib.suppress(Exception):
            await self.nc.close()
