"""The bus: the contracts' endpoints, streams and topics as FastStream subscribers and publishers.

One `Bus` per process and service wraps FastStream's `NatsBroker` (nats-py underneath). The
declarations in `calagent.contracts.wire` are the only place a subject meets its types: `serve`
and `request` take an `Endpoint[Req, Rep]`, `consume` and `js_publish` a `Stream[Msg]`, so a
handler and its callers cannot disagree about a body. Trace context rides in NATS headers through
FastStream's `NatsTelemetryMiddleware` (OpenTelemetry messaging conventions). How each received
message is acknowledged, answered or dead-lettered is `calagent.runtime.settle`; the streams
themselves and their copies are `calagent.runtime.streams`; the typed publishers handed to senders
are `calagent.runtime.publishers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC
from typing import TYPE_CHECKING, Any, TypeVar

from faststream import AckPolicy
from faststream.nats import (
    ConsumerConfig,
    NatsBroker,
    NatsRouter,
    PubAck,
    PullSub,
)
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.specification import AsyncAPI
from nats.aio.client import Client as NatsClient
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import StorageType
from nats.js.kv import KeyValue
from opentelemetry.trace import TracerProvider
from pydantic import BaseModel, ValidationError

from calagent.contracts import subjects
from calagent.contracts.bus import (
    BusErrorReply,
    DeadLetter,
    HealthCheck,
    HealthReply,
)
from calagent.contracts.wire import Endpoint, Stream, Topic, deadletter, health
from calagent.runtime.clock import Clock, SystemClock
from calagent.runtime.publishers import StreamPublisher, TopicPublisher
from calagent.runtime.settle import (
    RetryPolicy,
    TransientError,
    answer_policy,
    decoder_for,
    listen_policy,
    settle_policy,
)
from calagent.runtime.streams import ensure_replicas, ensure_streams, jstream
from calagent.runtime.trust import inbox_prefix, user_of

if TYPE_CHECKING:
    from faststream.nats import TestNatsBroker
    from faststream.nats.publisher.usecase import LogicPublisher

# Handlers raise `TransientError`, consumers take a `RetryPolicy` and senders hold the publishers
# `Bus` hands out: all belong to using the bus.
__all__ = (
    "Bus",
    "BusRequestError",
    "Declared",
    "RetryPolicy",
    "StreamPublisher",
    "TopicPublisher",
    "TransientError",
    "specification",
)

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


def nats_servers(url: str) -> list[str]:
    """`NATS_URL` may name several servers, comma-separated (a cluster): nats-py wants a list."""
    return [server.strip() for server in url.split(",") if server.strip()]


def instance_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Declared:
    """One subscription or publisher of a bus: a core subscription (`stream` None), a durable pull
    consumer of `stream`, or a publisher (`publishes`)."""

    subject: str
    publishes: bool
    stream: str | None = None
    durable: str | None = None


def specification(buses: list[Bus], *, title: str, version: str, description: str) -> AsyncAPI:
    """The AsyncAPI specification of what `buses` declare (FastStream's generator over their
    brokers): documentation, no connection."""
    return AsyncAPI(*(bus._broker for bus in buses), title=title, version=version, description=description)


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
        telemetry: bool = True,
        replicas: int = 1,
    ) -> None:
        self.service = service
        # Copies of each stream, consumer and bucket this bus creates (`CALAGENT_NATS_REPLICAS`):
        # one per cluster node, so losing a node loses no message and no consumer's position.
        self.replicas = replicas
        self._stream_replicas: dict[str, int] = {}
        self._buckets: dict[str, KeyValue] = {}
        self._opening_bucket = asyncio.Lock()
        self.clock = clock or SystemClock()
        user = user_of(url)
        # Replies to this connection's requests (and its pull consumers' deliveries) arrive under
        # a prefix only its NATS user may read (`calagent.runtime.trust`); without credentials,
        # NATS's default.
        self._inbox_prefix = inbox_prefix(user) if user else "_INBOX"
        self._broker = NatsBroker(
            nats_servers(url),
            name=f"calagent-{service}",
            inbox_prefix=self._inbox_prefix,
            # A lost server (a restart, a cluster node going away) is retried for ever, quickly:
            # a service never exits because the bus went away for a while.
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
            # A node that vanished without closing its sockets (a host lost, not a process) is
            # noticed after two unanswered pings, not the client's default four minutes.
            ping_interval=5,
            max_outstanding_pings=2,
            connect_timeout=5,
            drain_timeout=5,
            graceful_timeout=GRACEFUL_TIMEOUT_S,
            # A span per message received and sent, and its context in the message's headers;
            # without `telemetry` (a process whose spans go nowhere) neither is made.
            middlewares=(
                (NatsTelemetryMiddleware(tracer_provider=tracer_provider, include_messages_counters=False),)
                if telemetry
                else ()
            ),
            logger=faststream_log,
            # FastStream logs every message received and processed at this level.
            log_level=logging.DEBUG,
            # No FastDepends around the handlers: each takes the one model its subject's decoder
            # (`settle.decoder_for`) validated from the body and is handed it as is, so nothing is
            # injected or validated a second time on every message. The AsyncAPI document is built
            # from the handlers' signatures either way.
            apply_types=False,
        )
        self._nc: NatsClient | None = None
        self._started: set[int] = set()
        self._stream_publishers: dict[str, StreamPublisher[Any]] = {}
        self._topic_publishers: dict[str, TopicPublisher[Any]] = {}
        # What this bus answers, as declared: the AsyncAPI document adds each one's reply.
        self.endpoints: list[Endpoint[Any, Any]] = []
        self._consumers: list[tuple[str, ConsumerConfig]] = []
        self._dead_letters = self.stream_publisher(deadletter(service))

    @classmethod
    async def connect(cls, url: str, service: str, clock: Clock | None = None, *, replicas: int = 1) -> Bus:
        """A started bus for a caller that only requests and publishes (CLI, tests)."""
        bus = cls(url, service, clock, replicas=replicas)
        await bus.start()
        return bus

    # ---- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and make sure the streams exist, starting no subscriber yet."""
        if self._nc is None:
            self._nc = await self._broker.connect()
            self._stream_replicas = await ensure_streams(self._nc.jetstream(), self.replicas)

    async def start(self) -> None:
        await self.open()
        await self._ensure_consumers()
        if not self._broker.running:
            await self._broker.start()
        else:
            for subscriber in self._broker.subscribers:
                if id(subscriber) not in self._started:
                    await subscriber.start()
        self._started.update(id(subscriber) for subscriber in self._broker.subscribers)
        # Once `start` returns, the server knows every subscription: a request sent right after
        # from another connection finds its responder.
        await self._connection.flush()

    async def _ensure_consumers(self) -> None:
        """Create or update each declared durable consumer before its subscriber binds to it.

        A subscriber binds to an existing durable as it is, so an `ack_wait` or `max_deliver`
        changed in code would never reach a consumer created by an earlier version; adding a
        consumer under an existing name updates what the server allows to change.
        """
        js = self._connection.jetstream()
        for stream_name, config in self._consumers:
            # As many copies as its stream: a consumer's delivered and acknowledged positions
            # survive the loss of a node only when they are replicated like the messages.
            copies = self._stream_replicas.get(stream_name, self.replicas)
            await js.add_consumer(stream_name, dataclasses.replace(config, num_replicas=copies))

    async def close(self) -> None:
        """Stop taking messages, let in-flight handlers finish (bounded), then disconnect."""
        with contextlib.suppress(Exception):
            await self._broker.stop()
        self._nc = None
        self._started.clear()

    @property
    def _connection(self) -> NatsClient:
        if self._nc is None:
            raise RuntimeError("the bus is not connected")
        return self._nc

    @property
    def connected(self) -> bool:
        """Whether the connection is up right now (false while it reconnects, and before `open`)."""
        return self._nc is not None and bool(self._nc.is_connected)

    async def key_value(self, bucket: str, *, ttl: float = 0, description: str) -> KeyValue:
        """A JetStream KV bucket (each key its latest value, on file, entries expiring after `ttl`
        seconds, or never when 0) replicated like the streams, so an entry outlives the node that
        stored it; opened once per bus, on first use, so an app given a bus works before its
        lifespan ran. A bucket that exists with fewer copies is raised first: a bucket's
        configuration must match what exists. Replicas opening the same bucket at once send the
        same configuration, which JetStream accepts."""
        async with self._opening_bucket:
            if bucket not in self._buckets:
                replicas = await ensure_replicas(self._connection.jetstream(), f"KV_{bucket}", self.replicas)
                self._buckets[bucket] = await self._broker.key_value(
                    bucket,
                    ttl=ttl,
                    history=1,
                    storage=StorageType.FILE,
                    replicas=replicas,
                    description=description,
                )
            return self._buckets[bucket]

    def in_memory(self) -> TestNatsBroker:
        """FastStream's in-memory test broker over this bus (`async with bus.in_memory() as
        broker`): the declared handlers answer `request`, `publish` and `js_publish` without a
        server, and `broker` sends what no typed call may (a malformed body)."""
        from faststream.nats import TestNatsBroker

        return TestNatsBroker(self._broker)

    def declared(self) -> list[Declared]:
        """Every subscription and publisher this bus declares, as the NATS server will see them."""
        found = []
        for subscriber in self._broker.subscribers:
            stream = getattr(subscriber, "stream", None)
            found.append(
                Declared(
                    subject=subscriber.subject.broker_address,  # type: ignore[attr-defined]
                    publishes=False,
                    stream=None if stream is None else stream.name,
                    durable=subscriber.extra_options.get("durable") if stream is not None else None,  # type: ignore[attr-defined]
                )
            )
        for publisher in self._broker.publishers:
            found.append(Declared(subject=publisher.subject.broker_address, publishes=True))  # type: ignore[attr-defined]
        return found

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
        router = NatsRouter(middlewares=(answer_policy(endpoint.subject, self.dead_letter),))
        router.subscriber(
            endpoint.subject,
            queue=subjects.queue_group(self.service),
            max_workers=max_workers,
            decoder=decoder_for(endpoint.request),
            title=self.title(endpoint.subject),
            description=endpoint.summary,
        )(handler)
        self._broker.include_router(router)
        self.endpoints.append(endpoint)

    def serve_health(self, probe: Callable[[], Awaitable[dict[str, str]]] | None = None) -> None:
        """Answer health checks; with `probe`, report the dependencies it checks (a replica whose
        database is down answers `degraded`, naming it)."""
        reply = HealthReply(service=self.service, instance=instance_id())

        async def on_health(_check: HealthCheck) -> HealthReply:
            if probe is None:
                return reply
            found = await probe()
            dependencies = {name: "ok" if state == "ok" else "down" for name, state in found.items()}
            healthy = all(state == "ok" for state in dependencies.values())
            return reply.model_copy(
                update={"status": "ok" if healthy else "degraded", "dependencies": dependencies}
            )

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
        router = NatsRouter(middlewares=(settle_policy(stream.subject, self.dead_letter, policy),))
        config = ConsumerConfig(
            durable_name=name,
            filter_subject=stream.subject,
            ack_wait=policy.ack_wait,
            max_deliver=policy.consumer_max_deliver,
            max_ack_pending=1000,
        )
        self._consumers.append((stream.stream, config))
        router.subscriber(
            stream.subject,
            stream=jstream(stream.stream),
            durable=name,
            config=config,
            # One message per fetch: a busy replica leaves the next turn to an idle one.
            pull_sub=PullSub(batch_size=1, timeout=1.0),
            inbox_prefix=f"{self._inbox_prefix}.".encode(),
            ack_policy=AckPolicy.MANUAL,
            max_workers=max_workers,
            decoder=decoder_for(stream.message),
            title=self.title(stream.subject),
            description=f"{stream.summary} Durable pull consumer `{name}`.",
        )(handler)
        self._broker.include_router(router)

    def listen(self, topic: Topic[M], handler: Callable[[M], Awaitable[None]]) -> None:
        """Receive every message of `topic` (no queue group, in order of arrival)."""
        router = NatsRouter(middlewares=(listen_policy(topic.wildcard),))
        router.subscriber(
            topic.wildcard,
            decoder=decoder_for(topic.message),
            title=self.title(topic.wildcard),
            description=topic.summary,
        )(handler)
        self._broker.include_router(router)

    # ---- calling ---------------------------------------------------------------------------------

    async def request(self, endpoint: Endpoint[Req, Rep], message: Req, *, timeout: float = 10.0) -> Rep:
        loop = asyncio.get_running_loop()
        # "No responders" is what a replica starting or restarting looks like for a moment
        # (its queue subscription is not registered yet): wait briefly before calling it down.
        give_up = loop.time() + min(timeout, NO_RESPONDERS_GRACE_S)
        delay = 0.01
        while True:
            try:
                reply = await self._broker.request(message, endpoint.subject, timeout=timeout)
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

    def _publisher(
        self, subject: str, schema: type[BaseModel], summary: str, **options: Any
    ) -> LogicPublisher:
        """A publisher of `subject`, in the AsyncAPI document as this service's publishing side."""
        return self._broker.publisher(
            subject,
            schema=schema,
            title=self.title(subject, publishes=True),
            description=summary,
            **options,
        )

    def stream_publisher(self, stream: Stream[M]) -> StreamPublisher[M]:
        """The (documented) publisher of `stream`; one per subject."""
        known = self._stream_publishers.get(stream.subject)
        if known is None:
            publisher = self._publisher(
                stream.subject, stream.message, stream.summary, stream=jstream(stream.stream)
            )
            known = self._stream_publishers[stream.subject] = StreamPublisher(publisher, stream)
        publisher_of_stream: StreamPublisher[M] = known
        return publisher_of_stream

    def topic_publisher(self, topic: Topic[M]) -> TopicPublisher[M]:
        known = self._topic_publishers.get(topic.prefix)
        if known is None:
            publisher = self._publisher(topic.wildcard, topic.message, topic.summary)
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
