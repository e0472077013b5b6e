"""How a received message is settled: the acknowledgement policy of the bus, in one place.

Explicit and owned here, never left to a framework default:

- request-reply (`answer_policy`): a body that is not the declared request type is dead-lettered
  and answered `malformed`; a transient failure (`is_transient`: a `TransientError`, or a
  dependency that is unreachable) is answered `transient` (the caller may retry with the same
  idempotency key); anything else is answered `internal`. No handler error leaves a
  caller waiting for its timeout.
- JetStream (`settle_policy`, on subscribers with `AckPolicy.MANUAL`): success is `ack`ed; a
  failure is `nack`ed with the `RetryPolicy`'s backoff; the delivery that exhausts its budget
  (`max_deliver` for a failure of the message, `transient_for` seconds for an outage) is
  dead-lettered and `term`inated; a malformed body is dead-lettered and terminated at once. A long
  handler reports `in_progress` so `ack_wait` can stay short. A handler cancelled by shutdown
  settles nothing: JetStream redelivers after `ack_wait`.
- core fan-out (`listen_policy`): nobody waits for an answer, so a bad message is logged and
  dropped.

Each policy is a FastStream middleware factory, included with the subscriber it governs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from faststream import BaseMiddleware
from faststream.message import StreamMessage
from faststream.nats.message import NatsMessage
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from pydantic import BaseModel, ValidationError

from calagent.contracts.bus import BusError, BusErrorCode, BusErrorReply

log = logging.getLogger("calagent.bus")


class DeadLetterSink(Protocol):
    async def __call__(
        self, subject: str, reason: str, error: str, payload: bytes, deliveries: int = 1
    ) -> None: ...


class TransientError(Exception):
    """Raised by a handler for a failure worth retrying later (database down, dependency timeout)."""


class MalformedMessageError(Exception):
    """A body that is not the type its subject declares: retrying it can never help."""


# ---- the JetStream retry policy ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a durable consumer settles a failed delivery.

    Two budgets, because the two kinds of failure deserve different patience. A failure that is not
    transient (a bug, a value the handler cannot take) is tried `max_deliver` times and then
    dead-lettered. A transient one (the database or a dependency is down, see `is_transient`) is the
    world's fault, not the message's: it is retried with capped backoff for `transient_for` seconds
    of waiting — for a turn, as long as its answer can still be awaited — so an outage delays the
    message instead of losing it.
    """

    max_deliver: int = 5
    backoff: tuple[float, ...] = (0.5, 2.0, 5.0, 15.0)
    ack_wait: float = 180.0
    # While a handler runs, tell JetStream it is still working this often (None: never).
    progress_every: float | None = None
    # Seconds of backoff that transient failures may spend in all (None: `max_deliver` applies).
    transient_for: float | None = None

    def delay(self, deliveries: int) -> float:
        return self.backoff[min(max(deliveries, 1) - 1, len(self.backoff) - 1)]

    @property
    def transient_deliveries(self) -> int:
        """Deliveries a transiently failing message gets: enough for its backoff to fill
        `transient_for` seconds."""
        if self.transient_for is None:
            return self.max_deliver
        waited, deliveries = 0.0, 1
        while waited < self.transient_for:
            waited += self.delay(deliveries)
            deliveries += 1
        return max(deliveries, self.max_deliver)

    @property
    def consumer_max_deliver(self) -> int:
        """The consumer's own limit: the larger budget, which the transient one always is (the
        handler enforces the smaller)."""
        return self.transient_deliveries

    def nak_delay(self, deliveries: int, *, transient: bool = False) -> float | None:
        """The redelivery delay after failed delivery number `deliveries`; None when it was the
        last one allowed (the message is dead-lettered instead)."""
        limit = self.transient_deliveries if transient else self.max_deliver
        if deliveries >= limit:
            return None
        return self.delay(deliveries)


# ---- what counts as transient ------------------------------------------------------------------------

# Connection-level failures: the message was fine, the world was not. Matched by module and name
# so neither driver must be imported here; a SQLAlchemy error counts only when it wraps one of
# these (a DataError or IntegrityError is about the message, and retrying it cannot help).
_TRANSIENT_NAMES = frozenset(
    {
        "OperationalError",
        "InterfaceError",
        "DisconnectionError",
        "PostgresConnectionError",
        "ConnectionDoesNotExistError",
        "ConnectionFailureError",
        "CannotConnectNowError",
        "TooManyConnectionsError",
        "AdminShutdownError",
        "CrashShutdownError",
        "ConnectionClosedError",
        "NoServersError",
        "StaleConnectionError",
        "OutboundBufferLimitError",
        "ServiceUnavailableError",
    }
)
_TRANSIENT_MODULES = ("sqlalchemy", "asyncpg", "nats")


def is_transient(exc: BaseException) -> bool:
    """True when `exc`, or what caused it, says a dependency is unavailable rather than that the
    message is wrong: worth retrying the same message later."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TransientError | OSError | TimeoutError | ConnectionError):
            return True
        code = getattr(current, "code", None)
        if type(current).__name__ == "BusRequestError" and code in {"transient", "timeout", "unavailable"}:
            return True
        kind = type(current)
        if kind.__name__ in _TRANSIENT_NAMES and kind.__module__.startswith(_TRANSIENT_MODULES):
            return True
        if getattr(current, "connection_invalidated", False):
            return True
        current = current.__cause__ or current.__context__
    return False


class RateLimitedLog:
    """One warning per `every` seconds for a repeating failure, with how many were folded in.

    During an outage every in-flight message fails on every delivery; a line for each filled a
    disk with identical warnings while telling an operator nothing more than the first one did.
    """

    def __init__(self, logger: logging.Logger, every: float = 5.0) -> None:
        self.logger = logger
        self.every = every
        self._last: dict[str, float] = {}
        self._folded: dict[str, int] = {}

    def warning(self, key: str, message: str, *args: object) -> None:
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.every:
            self._folded[key] = self._folded.get(key, 0) + 1
            return
        folded = self._folded.pop(key, 0)
        self._last[key] = now
        if folded:
            message += " (%s more like it in the last %.0fs)"
            args = (*args, folded, now - last if last is not None else 0.0)
        self.logger.warning(message, *args)


_retries = RateLimitedLog(log)


# ---- decoding and settling -------------------------------------------------------------------------


def decoder_for(model: type[BaseModel]) -> Callable[[StreamMessage[Any]], Awaitable[BaseModel]]:
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

    def __init__(self, msg: Any, /, *, context: Any, dead_letter: DeadLetterSink, subject: str) -> None:
        super().__init__(msg, context=context)
        self.dead_letter = dead_letter
        self.subject = subject

    async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: StreamMessage[Any]) -> Any:
        code: BusErrorCode
        failure: Exception
        try:
            return await call_next(msg)
        except MalformedMessageError as exc:
            await self.dead_letter(self.subject, "malformed", str(exc), msg.body)
            code, text, failure = "malformed", str(exc), exc
        except Exception as exc:
            if is_transient(exc):
                # The caller retries with the same key; one line per subject now and then is
                # enough to say a dependency is away (an outage fails every request alike).
                _retries.warning(self.subject, "transient failure answering %s: %r", self.subject, exc)
                code, text, failure = "transient", str(exc), exc
            else:
                log.exception("handler for %s failed", self.subject)
                code, text, failure = "internal", repr(exc), exc
        _mark_failed(failure)
        return BusErrorReply(bus_error=BusError(code=code, message=text))


class _Settle(BaseMiddleware):
    """JetStream: ack, nack with backoff, or dead-letter and term (see the module docstring)."""

    def __init__(
        self, msg: Any, /, *, context: Any, dead_letter: DeadLetterSink, subject: str, policy: RetryPolicy
    ) -> None:
        super().__init__(msg, context=context)
        self.dead_letter = dead_letter
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
            await self.dead_letter(self.subject, "malformed", str(exc), msg.body, deliveries)
            await msg.reject()  # term: no redelivery can make it valid
            return None
        except Exception as exc:
            _mark_failed(exc)
            transient = is_transient(exc)
            delay = self.policy.nak_delay(deliveries, transient=transient)
            if delay is None:
                await self.dead_letter(self.subject, "exhausted", repr(exc), msg.body, deliveries)
                await msg.reject()
            else:
                _retries.warning(
                    self.subject,
                    "%s failure on %s (delivery %s), retrying in %ss: %r",
                    "transient" if transient else "unexpected",
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


def _factory(kind: type[BaseMiddleware], **options: Any) -> Any:
    """A FastStream middleware factory: `kind` built per message with `options`."""

    def build(msg: Any, /, *, context: Any) -> BaseMiddleware:
        return kind(msg, context=context, **options)

    return build


def answer_policy(subject: str, dead_letter: DeadLetterSink) -> Any:
    return _factory(_Answer, subject=subject, dead_letter=dead_letter)


def settle_policy(subject: str, dead_letter: DeadLetterSink, policy: RetryPolicy) -> Any:
    return _factory(_Settle, subject=subject, dead_letter=dead_letter, policy=policy)


def listen_policy(subject: str) -> Any:
    return _factory(_Listen, subject=subject)
