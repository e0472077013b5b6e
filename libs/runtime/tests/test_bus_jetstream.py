"""The settle policy on a real JetStream: delivery counts, backoff between redeliveries, the last
delivery dead-lettered, `in_progress` holding a long message, replicas sharing one durable."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError
from pydantic import BaseModel

from calagent.contracts.bus import DeadLetter
from calagent.contracts.wire import Endpoint, Stream, deadletter
from calagent.runtime.bus import Bus, BusRequestError, RetryPolicy

pytestmark = pytest.mark.integration

TEST_STREAM = "CALAGENT_TEST_POLICY"


class Job(BaseModel):
    name: str


@dataclass
class Worker:
    """Fails the first `failures` deliveries of each job, then succeeds; records when it ran."""

    failures: int = 0
    pause_s: float = 0.0
    runs: list[tuple[str, float]] = field(default_factory=list)
    done: list[str] = field(default_factory=list)

    async def on_job(self, job: Job) -> None:
        self.runs.append((job.name, time.monotonic()))
        await asyncio.sleep(self.pause_s)
        if sum(name == job.name for name, _ in self.runs) <= self.failures:
            raise RuntimeError(f"{job.name} failed transiently")
        self.done.append(job.name)


@dataclass
class Setup:
    nats_url: str
    service: str
    stream: Stream[Job]
    letters: asyncio.Queue[DeadLetter]
    admin: NatsClient
    buses: list[Bus] = field(default_factory=list)
    # The stream sequence of the last message published: settled only once it is acked.
    last_seq: int = 0

    async def consumer(self, worker: Worker, policy: RetryPolicy) -> Bus:
        bus = Bus(self.nats_url, self.service)
        bus.consume(self.stream, worker.on_job, policy=policy)
        await bus.start()
        self.buses.append(bus)
        return bus

    async def publish(self, payload: bytes) -> None:
        ack = await self.admin.jetstream().publish(self.stream.subject, payload, stream=TEST_STREAM)
        self.last_seq = ack.seq

    async def settled(self, within_s: float = 10.0) -> None:
        deadline = time.monotonic() + within_s
        js = self.admin.jetstream()
        while time.monotonic() < deadline:
            info = await js.consumer_info(TEST_STREAM, self.stream.durable or "")
            # Its counts alone read empty just after a publish, before the consumer has counted the
            # message (seen twice in full runs: zero or one run, then "settled"): the ack floor
            # reaching the last message published is what says it was delivered and settled.
            if (
                info.ack_floor.stream_seq >= self.last_seq
                and not info.num_pending
                and not info.num_ack_pending
            ):
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the consumer did not settle in time")


@pytest.fixture
async def setup(nats_url: str) -> AsyncIterator[Setup]:
    admin = await nats.connect(nats_url)
    js = admin.jetstream()
    try:
        await js.stream_info(TEST_STREAM)
    except NotFoundError:
        await js.add_stream(StreamConfig(name=TEST_STREAM, subjects=["calagent.test.policy.>"]))
    tag = uuid.uuid4().hex[:8]
    service = f"policy-{tag}"
    stream = Stream(f"calagent.test.policy.{tag}", Job, TEST_STREAM, "test jobs", durable=f"workers-{tag}")
    letters: asyncio.Queue[DeadLetter] = asyncio.Queue()

    async def on_letter(msg: Msg) -> None:
        letters.put_nowait(DeadLetter.model_validate_json(msg.data))

    sub = await admin.subscribe(deadletter(service).subject, cb=on_letter)
    ready = Setup(nats_url, service, stream, letters, admin)
    try:
        yield ready
    finally:
        for bus in ready.buses:
            await bus.close()
        await sub.unsubscribe()
        await admin.close()


async def test_a_transient_failure_is_redelivered_after_its_backoff_and_then_acked(setup: Setup) -> None:
    worker = Worker(failures=2)
    await setup.consumer(worker, RetryPolicy(max_deliver=5, backoff=(0.3, 0.6), ack_wait=30))
    await setup.publish(Job(name="a").model_dump_json().encode())
    await setup.settled()
    times = [at for _, at in worker.runs]
    assert len(times) == 3
    assert worker.done == ["a"]
    # Never terminated on the exception: nacked with the policy's delay each time.
    assert times[1] - times[0] >= 0.3 * 0.9
    assert times[2] - times[1] >= 0.6 * 0.9
    assert setup.letters.empty()


async def test_the_last_allowed_delivery_is_dead_lettered_and_never_retried(setup: Setup) -> None:
    worker = Worker(failures=99)
    await setup.consumer(worker, RetryPolicy(max_deliver=3, backoff=(0.1,), ack_wait=30))
    await setup.publish(Job(name="doomed").model_dump_json().encode())
    letter = await asyncio.wait_for(setup.letters.get(), 10)
    await setup.settled()
    await asyncio.sleep(0.5)  # a fourth delivery would come by now
    assert len(worker.runs) == 3
    assert (letter.service, letter.subject, letter.reason, letter.deliveries) == (
        setup.service,
        setup.stream.subject,
        "exhausted",
        3,
    )
    assert "doomed failed transiently" in letter.error
    assert Job.model_validate_json(letter.payload) == Job(name="doomed")


async def test_a_malformed_message_is_dead_lettered_at_once(setup: Setup) -> None:
    worker = Worker()
    await setup.consumer(worker, RetryPolicy(max_deliver=5, backoff=(0.1,), ack_wait=30))
    await setup.publish(b'{"name": 12}')
    letter = await asyncio.wait_for(setup.letters.get(), 10)
    await setup.settled()
    await asyncio.sleep(0.3)
    assert worker.runs == []
    assert (letter.reason, letter.deliveries, letter.payload) == ("malformed", 1, '{"name": 12}')


async def test_progress_keeps_a_long_message_with_its_consumer(setup: Setup) -> None:
    # ack_wait is 1 s and the work takes 2.5 s: without progress JetStream would redeliver it.
    slow = Worker(pause_s=2.5)
    await setup.consumer(slow, RetryPolicy(max_deliver=5, ack_wait=1.0, progress_every=0.3))
    await setup.publish(Job(name="long").model_dump_json().encode())
    await setup.settled(within_s=15)
    assert [name for name, _ in slow.runs] == ["long"]


async def test_without_progress_a_long_message_is_redelivered(setup: Setup) -> None:
    # The control for the test above: the same work and ack_wait, no progress reports.
    slow = Worker(pause_s=2.5)
    await setup.consumer(slow, RetryPolicy(max_deliver=5, ack_wait=1.0, progress_every=None))
    await setup.publish(Job(name="long").model_dump_json().encode())
    await setup.settled(within_s=15)
    assert len(slow.runs) >= 2


async def test_replicas_share_one_durable_and_each_message_runs_once(setup: Setup) -> None:
    first, second = Worker(pause_s=0.05), Worker(pause_s=0.05)
    policy = RetryPolicy(ack_wait=30)
    await setup.consumer(first, policy)
    await setup.consumer(second, policy)
    for i in range(40):
        await setup.publish(Job(name=f"j{i}").model_dump_json().encode())
    await setup.settled(within_s=20)
    assert sorted(first.done + second.done) == sorted(f"j{i}" for i in range(40))
    assert first.done and second.done


class Ping(BaseModel):
    pass


NOBODY: Endpoint[Ping, Ping] = Endpoint("calagent.test.nobody", Ping, Ping, "served by nobody")
SLOW: Endpoint[Ping, Ping] = Endpoint("calagent.test.slow", Ping, Ping, "answers late")


async def test_requests_say_unavailable_or_timeout(setup: Setup) -> None:
    server = Bus(setup.nats_url, setup.service)

    async def late(ping: Ping) -> Ping:
        await asyncio.sleep(2)
        return ping

    server.serve(SLOW, late)
    await server.start()
    setup.buses.append(server)
    client = await Bus.connect(setup.nats_url, "probe")
    setup.buses.append(client)
    with pytest.raises(BusRequestError) as unavailable:
        await client.request(NOBODY, Ping(), timeout=0.5)
    with pytest.raises(BusRequestError) as timeout:
        await client.request(SLOW, Ping(), timeout=0.5)
    assert (unavailable.value.code, timeout.value.code) == ("unavailable", "timeout")
