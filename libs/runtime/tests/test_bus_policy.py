"""The settle policies (`calagent.runtime.settle`) as the bus wires them, on FastStream's
in-memory `TestNatsBroker` (no server).

What a real JetStream adds (delivery counts, redelivery timing, `in_progress`) is proven against
real NATS in `test_bus_jetstream.py`; here every branch of the policy runs against the handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from faststream import AckPolicy
from faststream.nats import JStream
from faststream.nats.message import NatsMessage
from pydantic import BaseModel

from calagent.contracts.bus import BusErrorReply, DeadLetter
from calagent.contracts.wire import Endpoint, Stream, deadletter
from calagent.runtime.bus import Bus, BusRequestError, RetryPolicy, TransientError
from calagent.runtime.settle import decoder_for

pytestmark = pytest.mark.unit


class Ask(BaseModel):
    n: int


class Answer(BaseModel):
    doubled: int


class Work(BaseModel):
    job: str


DOUBLE: Endpoint[Ask, Answer] = Endpoint("calagent.test.double", Ask, Answer, "doubles n")
WORK: Stream[Work] = Stream("calagent.test.work", Work, "CALAGENT_TEST", "jobs", durable="workers")


@pytest.mark.parametrize(
    ("deliveries", "delay"),
    [(1, 0.5), (2, 2.0), (3, 5.0), (4, 15.0), (5, None), (9, None)],
)
def test_a_failed_delivery_is_retried_with_backoff_until_the_last_one(
    deliveries: int, delay: float | None
) -> None:
    assert RetryPolicy(max_deliver=5, backoff=(0.5, 2.0, 5.0, 15.0)).nak_delay(deliveries) == delay


def test_a_short_backoff_repeats_its_last_step() -> None:
    policy = RetryPolicy(max_deliver=10, backoff=(1.0, 3.0))
    assert [policy.nak_delay(n) for n in range(1, 11)] == [1.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, None]


def test_an_outage_is_retried_for_its_time_budget_and_a_bad_message_only_max_deliver_times() -> None:
    policy = RetryPolicy(max_deliver=3, backoff=(0.25, 0.5, 1.0, 2.0, 3.0), transient_for=30.0)
    delays: list[float] = []
    deliveries = 1
    while (delay := policy.nak_delay(deliveries, transient=True)) is not None:
        delays.append(delay)
        deliveries += 1
    # The waits fill the budget (and not much more), so a turn is retried while it can be answered.
    assert 30.0 <= sum(delays) < 33.0
    assert policy.consumer_max_deliver == deliveries
    assert [policy.nak_delay(n) for n in (1, 2, 3)] == [0.25, 0.5, None]


def test_without_a_time_budget_transient_failures_use_max_deliver() -> None:
    policy = RetryPolicy(max_deliver=4, backoff=(0.1,))
    assert policy.transient_deliveries == policy.consumer_max_deliver == 4
    assert policy.nak_delay(4, transient=True) is None


class _OperationalError(Exception):
    pass


_OperationalError.__name__ = "OperationalError"
_OperationalError.__module__ = "sqlalchemy.exc"


def _caused(outer: Exception, inner: Exception) -> Exception:
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (ConnectionRefusedError(111, "refused"), True),
        (TimeoutError(), True),
        (TransientError("db down"), True),
        (BusRequestError("transient", "commands: database away"), True),
        (BusRequestError("timeout", "no answer"), True),
        (BusRequestError("internal", "a bug"), False),
        (BusRequestError("malformed", "bad body"), False),
        (_OperationalError("server closed the connection"), True),
        (_caused(RuntimeError("wrapped"), ConnectionResetError()), True),
        (ValueError("year 0 is out of range"), False),
        (OverflowError("date value out of range"), False),
        (KeyError("title"), False),
    ],
)
def test_only_an_unreachable_dependency_counts_as_transient(exc: Exception, transient: bool) -> None:
    from calagent.runtime.settle import is_transient

    assert is_transient(exc) is transient


def test_a_repeating_warning_is_folded_into_one_line_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from calagent.runtime.settle import RateLimitedLog

    limited = RateLimitedLog(logging.getLogger("calagent.test.limited"), every=60.0)
    with caplog.at_level(logging.WARNING, logger="calagent.test.limited"):
        for n in range(500):
            limited.warning("subject", "failure %s", n)
        limited.warning("other", "another subject")
    assert [r.getMessage() for r in caplog.records] == ["failure 0", "another subject"]


# ---- request-reply ---------------------------------------------------------------------------------


class Doubler:
    def __init__(self) -> None:
        self.seen: list[Ask] = []

    async def on_ask(self, ask: Ask) -> Answer:
        self.seen.append(ask)
        if ask.n == 13:
            raise TransientError("the database blinked")
        if ask.n == 666:
            raise RuntimeError("a bug")
        return Answer(doubled=ask.n * 2)


def letters_of(bus: Bus, service: str) -> list[DeadLetter]:
    """Records every dead letter `service` publishes on the in-memory broker."""
    seen: list[DeadLetter] = []

    # MANUAL: this recorder settles nothing, so every ack the test sees is the code's under test.
    @bus._broker.subscriber(
        deadletter(service).subject,
        stream=JStream("CALAGENT_DEADLETTER", declare=False),
        ack_policy=AckPolicy.MANUAL,
        # Decoded as the bus decodes what it serves (it runs no FastDepends to do it).
        decoder=decoder_for(DeadLetter),
    )
    async def on_letter(letter: DeadLetter) -> None:
        seen.append(letter)

    return seen


async def test_a_typed_request_gets_its_typed_reply() -> None:
    bus = Bus("nats://unused", "doubler")
    doubler = Doubler()
    bus.serve(DOUBLE, doubler.on_ask)
    async with bus.in_memory():
        answer = await bus.request(DOUBLE, Ask(n=21))
    assert answer == Answer(doubled=42)
    assert doubler.seen == [Ask(n=21)]


async def test_failures_become_error_replies_never_a_silent_timeout() -> None:
    bus = Bus("nats://unused", "doubler")
    bus.serve(DOUBLE, Doubler().on_ask)
    async with bus.in_memory():
        with pytest.raises(BusRequestError) as transient:
            await bus.request(DOUBLE, Ask(n=13))
        with pytest.raises(BusRequestError) as internal:
            await bus.request(DOUBLE, Ask(n=666))
    assert (transient.value.code, transient.value.message) == ("transient", "the database blinked")
    assert internal.value.code == "internal"
    assert "a bug" in internal.value.message


async def test_a_malformed_request_is_answered_malformed_and_dead_lettered() -> None:
    bus = Bus("nats://unused", "doubler")
    doubler = Doubler()
    bus.serve(DOUBLE, doubler.on_ask)
    letters = letters_of(bus, "doubler")
    async with bus.in_memory() as broker:
        reply = await broker.request(b'{"n": "many"}', DOUBLE.subject)
    error = BusErrorReply.model_validate_json(reply.body).bus_error
    assert error.code == "malformed"
    assert doubler.seen == []  # the handler never saw it
    [letter] = letters
    assert (letter.service, letter.subject, letter.reason) == ("doubler", DOUBLE.subject, "malformed")
    assert letter.payload == '{"n": "many"}'


# ---- JetStream settle policy -------------------------------------------------------------------------


class Worker:
    def __init__(self, fail_with: Exception | None = None) -> None:
        self.fail_with = fail_with
        self.done: list[Work] = []

    async def on_work(self, work: Work) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.done.append(work)


def only_subscriber_ack_policy(bus: Bus) -> AckPolicy:
    [subscriber] = bus._broker.subscribers
    policy: AckPolicy = subscriber.ack_policy
    return policy


async def test_the_consumer_settles_by_hand_never_by_the_framework_default() -> None:
    bus = Bus("nats://unused", "worker")
    bus.consume(WORK, Worker().on_work, policy=RetryPolicy())
    # MANUAL: FastStream's reject-on-error default would `term` a message on any exception.
    assert only_subscriber_ack_policy(bus) is AckPolicy.MANUAL


async def test_success_is_acked_failure_is_nacked_and_malformed_is_dead_lettered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    for name in ("ack", "nack", "reject"):
        monkeypatch.setattr(NatsMessage, name, _spy(calls, name, getattr(NatsMessage, name)))
    ok, failing = Worker(), Worker(fail_with=RuntimeError("database down"))
    results: dict[str, list[str]] = {}
    for case, worker, payload in (
        ("ok", ok, Work(job="a")),
        ("failing", failing, Work(job="b")),
        ("malformed", Worker(), b'{"job": 7}'),
    ):
        bus = Bus("nats://unused", "worker")
        letters = letters_of(bus, "worker")
        bus.consume(WORK, worker.on_work, policy=RetryPolicy(max_deliver=3, backoff=(0.1,)))
        calls.clear()
        async with bus.in_memory() as broker:
            await broker.publish(payload, WORK.subject, stream=WORK.stream)
        results[case] = [*calls, *(f"letter:{letter.reason}" for letter in letters)]
    assert ok.done == [Work(job="a")]
    assert results == {
        "ok": ["ack"],
        # The first delivery of three: redelivered after the backoff, nothing dead-lettered.
        "failing": ["nack(delay=0.1)"],
        # `reject` is JetStream's term: a body that is not a `Work` never comes back.
        "malformed": ["reject", "letter:malformed"],
    }


def _spy(
    calls: list[str], name: str, method: Callable[..., Awaitable[None]]
) -> Callable[..., Awaitable[None]]:
    async def spy(self: NatsMessage, *args: object, **kwargs: object) -> None:
        shown = ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        calls.append(f"{name}({shown})" if shown else name)
        await method(self, *args, **kwargs)

    return spy
