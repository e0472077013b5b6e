"""One chat turn from the gateway's side: hand it to the agent, wait for its answer, exactly once.

A `client_message_id` names one message (contract §11): before any layer below runs, the key is
claimed for this request's fingerprint in a JetStream KV bucket shared by every gateway replica (see
`KeyClaims`). The same key with a different message is refused (`IdempotencyKeyReusedError`, 409)
before anything is published; only a request that matches the claim goes on.

Idempotency (invariant 9) then has three layers, cheapest first:

1. in-process: a retry that arrives while the first request with the same `client_message_id` is
   still running awaits the first request's future instead of publishing again;
2. a short-lived in-process cache of answers already given (the JetStream dedup window long);
3. across gateway replicas and restarts: the agent is asked (`AGENT_TURN_LOOKUP`) for the stored
   answer of that key. Whatever it says, the turn is published with `Nats-Msg-Id` = the keyed turn
   id (derived from user and key, length-prefixed so no two pairs share it), so
   JetStream drops a duplicate inside its window, and the agent itself processes one turn per
   (user, key) outside it. A duplicate that nobody runs (the agent says so: no live claim) was
   given up on, e.g. after a database outage outlasted its retries; it is published once more
   under a fresh dedup id, so the client's retry runs it instead of waiting for nothing. A keyed turn's id is derived from (user, key), so a retry waits on the
   *same* events subject as the original; while the original may have finished before this wait
   began, the lookup is polled as well.

Progress events of every turn arrive through one subscription per process (`TURN_EVENTS`, no
queue group, in order of arrival); each waiting turn registers its queue under its turn id before
it publishes, so an agent that answers at once does not answer into the void. Only a turn a client
follows as it runs (SSE: `run` was given a sink) is published with `stream`, and only such a turn
gets `turn.started`, `tool.called` and `reply.delta`; every turn gets its `turn.done`.

Per-user ordering: one `asyncio.Lock` per user in this process, held from publishing a turn until
its `turn.done` (or the deadline), so one user's turns never interleave through one gateway. The
agent serialises per user as well, which covers several gateway replicas and turns whose wait timed
out here but are still running there.

Latency stamps (`received_ms`, `published_ms`, …) are epoch milliseconds from `time.time()`: they
measure segments only and are never business time, which comes from the injected clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from nats.errors import NoRespondersError
from nats.js.errors import (
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NoStreamResponseError,
    ServiceUnavailableError,
)
from nats.js.kv import KeyValue
from opentelemetry import propagate
from opentelemetry.trace import Span

from calagent.contracts import subjects, wire
from calagent.contracts.display import Lang
from calagent.contracts.envelope import Channel, Envelope
from calagent.contracts.transport import Unwrapped
from calagent.contracts.turns import (
    DirectCall,
    TurnAnswer,
    TurnEvent,
    TurnLookup,
    TurnLookupResult,
    TurnRequested,
    turn_key,
)
from calagent.gateway.auth import Principal
from calagent.gateway.inprocess import ANSWER_CACHE_TTL_S, AnswerCache, UserLocks
from calagent.gateway.quotas import QuotaExceededError, Quotas
from calagent.runtime.bus import Bus, BusRequestError
from calagent.runtime.clock import Clock
from calagent.runtime.settings import Settings
from calagent.runtime.timeline import epoch_ms

log = logging.getLogger("calagent.gateway.turns")

LOOKUP_TIMEOUT_S = 2.0
LOOKUP_POLL_S = 0.5
PUBLISH_TIMEOUT_S = 5.0
# One attempt's wait within PUBLISH_TIMEOUT_S. A publish that reached a stream with no leader (its
# node just died, the others are electing one) is never answered; asking again every second, under
# the same dedup id, hands the turn over within a second of the new leader instead of after the
# whole timeout.
PUBLISH_ATTEMPT_S = 1.0
KEY_CLAIMS_BUCKET = subjects.GATEWAY_KEYS_BUCKET
KEY_CLAIM_TTL_S = ANSWER_CACHE_TTL_S

EventSink = Callable[[TurnEvent], None]
ClaimResult = Literal["new", "same", "other"]


def request_fingerprint(raw_text: str, conversation_id: str) -> str:
    """What a `client_message_id` is bound to: the message as the client sent it, in its conversation.

    The text is hashed before unwrapping, so a retry of the identical body always matches whatever
    the envelope rules become. `active_command_id` and `channel` are left out on purpose: they are
    context, not the message. A client retrying after the first attempt answered its stub has
    re-read `/v1/commands/active` and no longer names the stub, yet it is the same message and must
    get the first answer; the same words through another transport decide the same (invariant 7).
    """
    canonical = json.dumps([raw_text, conversation_id], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class IdempotencyKeyReusedError(Exception):
    def __init__(self, client_message_id: str) -> None:
        super().__init__(
            f"client_message_id {client_message_id!r} was already used for a different message; "
            "send a new client_message_id with a new message"
        )
        self.client_message_id = client_message_id


class TurnTimeoutError(Exception):
    def __init__(self, turn_id: str) -> None:
        super().__init__(f"turn {turn_id} got no answer in time")
        self.turn_id = turn_id


class AgentUnreachableError(Exception):
    """The turn could not be handed to JetStream (no stream, NATS down, publish timed out)."""


@dataclass
class ChatTurn:
    principal: Principal
    raw_text: str
    unwrapped: Unwrapped
    conversation_id: str
    channel: Channel
    client_message_id: str | None
    active_command_id: str | None
    received_ms: float
    turn_id: str = ""
    receive_span: Span | None = None
    # A command without the model (`POST /v1/commands`), and the language its answer is written in.
    direct: DirectCall | None = None
    lang: Lang | None = None
    # Set once the turn is in the agent's hands (published, or joined to an earlier identical one):
    # the SSE path waits for it so a failure to publish can still become an HTTP status.
    accepted: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        if not self.turn_id:
            self.turn_id = turn_key(self.principal.user_id, self.client_message_id)

    def end_receive(self) -> None:
        span, self.receive_span = self.receive_span, None
        if span is not None:
            span.end()


@dataclass(frozen=True)
class TurnOutcome:
    answer: TurnAnswer
    # True when this request did not wait for a turn of its own (a retry answered from the first).
    replayed: bool = False
    tokens: int = 0  # what the turn's model calls used, as the agent measured


class KeyClaims:
    """Which message each (user, client_message_id) belongs to, shared by all gateway replicas.

    Why a KV bucket and not the layers below: the in-process future and answer cache exist in one
    replica only, JetStream's dedup drops a duplicate without saying what it carried, and the agent
    knows a key only once the turn reached it. Two first requests on two replicas must agree on one
    winner before either publishes; `kv.create` is create-only on the server, so exactly one claim
    succeeds and the loser reads the winner's fingerprint. Entries live as long as the turns
    stream's duplicate window; after that the agent's own per-key claim still keeps a reused key
    from writing anything (it answers with the first turn's answer instead of 409).
    """

    def __init__(self, bus: Bus) -> None:
        self._bus = bus

    async def _bucket(self) -> KeyValue:
        # Replicated like the streams: a claim must outlive the node that stored it.
        return await self._bus.key_value(
            KEY_CLAIMS_BUCKET,
            ttl=KEY_CLAIM_TTL_S,
            description="gateway: the message each client_message_id was first used for",
        )

    async def claim(self, key: str, fingerprint: str) -> ClaimResult:
        """`new` when `key` is now bound to `fingerprint`, `same` when it already was (a retry),
        `other` when it is bound to another message."""
        try:
            kv = await self._bucket()
            for _ in range(3):
                try:
                    await kv.create(key, fingerprint.encode())
                    return "new"
                except KeyWrongLastSequenceError:
                    pass
                try:
                    entry = await kv.get(key)
                except KeyNotFoundError:
                    continue  # expired between the two calls: claim it afresh
                return "same" if entry.value == fingerprint.encode() else "other"
        except Exception as exc:
            # Unchecked keys would let a reused key through; refuse the turn as not deliverable.
            raise AgentUnreachableError(f"could not check the client_message_id: {exc!r}") from exc
        raise AgentUnreachableError("could not check the client_message_id: the claim kept changing")

    async def release(self, key: str) -> None:
        """Forget a claim whose message was refused before it was published (over a quota), so the
        client's retry is judged afresh rather than as a retry of an admitted message."""
        try:
            await (await self._bucket()).delete(key)
        except Exception:
            log.warning("could not release the claim of %s", key, exc_info=True)


def _retrieve(fut: asyncio.Future[TurnOutcome]) -> None:
    # A failed first request with no concurrent duplicate must not log "exception never retrieved".
    if not fut.cancelled():
        fut.exception()


class TurnRunner:
    def __init__(self, bus: Bus, settings: Settings, clock: Clock) -> None:
        """Wires the turn path on `bus` (the events subscription, the turns publisher): called
        before the bus starts."""
        self.bus = bus
        self.settings = settings
        self.clock = clock
        self.locks = UserLocks()
        self.answers = AnswerCache()
        self.claims = KeyClaims(bus)
        self.quotas = Quotas(bus, settings, clock)
        self.turns = bus.stream_publisher(wire.TURN_REQUESTED)
        self._inflight: dict[str, asyncio.Future[TurnOutcome]] = {}
        self._waiting: dict[str, asyncio.Queue[TurnEvent]] = {}
        bus.listen(wire.TURN_EVENTS, self.on_event)

    async def on_event(self, event: TurnEvent) -> None:
        queue = self._waiting.get(event.turn_id)
        if queue is not None:
            queue.put_nowait(event)

    async def run(self, turn: ChatTurn, sink: EventSink | None = None) -> TurnOutcome:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.turn_timeout_s
        if turn.client_message_id is None:
            return await self._publish_and_wait(turn, deadline, sink, poll=False)

        # Every layer below is keyed by the turn's key, derived from (user, client_message_id):
        # subject-safe, and one user's key never meets another's.
        key = turn.turn_id
        claimed = await self.claims.claim(key, request_fingerprint(turn.raw_text, turn.conversation_id))
        if claimed == "other":
            raise IdempotencyKeyReusedError(turn.client_message_id)
        first = self._inflight.get(key)
        if first is not None:
            turn.accepted.set()
            try:
                outcome = await asyncio.wait_for(asyncio.shield(first), deadline - loop.time())
            except TimeoutError as exc:
                raise TurnTimeoutError(turn.turn_id) from exc
            return TurnOutcome(answer=outcome.answer, replayed=True)
        cached = self.answers.get(key)
        if cached is not None:
            turn.accepted.set()
            return TurnOutcome(answer=cached, replayed=True)

        fut: asyncio.Future[TurnOutcome] = loop.create_future()
        fut.add_done_callback(_retrieve)
        self._inflight[key] = fut
        try:
            # A retry of a message already admitted is not counted against the user's rate again.
            outcome = await self._keyed(turn, deadline, sink, admit=claimed == "new")
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except BaseException as exc:
            if isinstance(exc, QuotaExceededError) and claimed == "new":
                await self.claims.release(turn.turn_id)
            fut.set_exception(exc)
            raise
        else:
            if outcome.answer.retry_after_s is None:
                # A turn refused because the model is down is not the message's answer: a retry runs it.
                self.answers.put(key, outcome.answer)
            fut.set_result(outcome)
            return outcome
        finally:
            self._inflight.pop(key, None)

    async def _keyed(
        self, turn: ChatTurn, deadline: float, sink: EventSink | None, *, admit: bool
    ) -> TurnOutcome:
        found = await self._lookup(turn, deadline)
        if found is not None and found.answer is not None:
            turn.accepted.set()
            return TurnOutcome(answer=found.answer, replayed=True)
        pending = found is not None and found.pending
        # The agent answered and nobody runs this turn: a duplicate ack below then means only that
        # an earlier copy was given up on (an outage outlasted its retries) or is still queued.
        idle = found is not None and not found.pending
        return await self._publish_and_wait(turn, deadline, sink, poll=pending, idle=idle, admit=admit)

    async def _lookup(self, turn: ChatTurn, deadline: float) -> TurnLookupResult | None:
        timeout = min(LOOKUP_TIMEOUT_S, deadline - asyncio.get_running_loop().time())
        if timeout <= 0:
            return None
        try:
            return await self.bus.request(
                wire.AGENT_TURN_LOOKUP,
                TurnLookup(user_id=turn.principal.user_id, turn_key=turn.turn_id),
                timeout=timeout,
            )
        except BusRequestError as exc:
            # No agent to ask is not a reason to refuse the turn: JetStream dedup still holds.
            log.info("turn lookup unavailable (%s); publishing with the dedup id", exc.code)
            return None

    async def _publish_and_wait(
        self,
        turn: ChatTurn,
        deadline: float,
        sink: EventSink | None,
        *,
        poll: bool,
        idle: bool = False,
        admit: bool = True,
    ) -> TurnOutcome:
        loop = asyncio.get_running_loop()
        user_id = turn.principal.user_id
        if admit:
            # Budgets and rates before anything is published (contract §17): a refusal writes nothing.
            await self.quotas.admit(user_id, turn.principal.tz)
        try:
            async with self.locks.hold(user_id, deadline - loop.time()):
                outcome = await self._locked_turn(turn, deadline, sink, poll=poll, idle=idle)
        except TimeoutError as exc:
            # Either waiting for the user's previous turn or for this one's answer ran out.
            raise TurnTimeoutError(turn.turn_id) from exc
        if not outcome.replayed:
            await self.quotas.charge(user_id, turn.principal.tz, outcome.tokens)
        return outcome

    async def _locked_turn(
        self, turn: ChatTurn, deadline: float, sink: EventSink | None, *, poll: bool, idle: bool
    ) -> TurnOutcome:
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[TurnEvent] = asyncio.Queue()
        # Registered before publishing: an agent that answers at once must not answer into the void.
        self._waiting[turn.turn_id] = events
        try:
            # A sink means a client follows the turn's progress; without one only `turn.done` comes.
            duplicate = await self._publish(turn, deadline, turn.turn_id, stream=sink is not None)
            # Republished at most once per request, under a fresh dedup id, when JetStream says it
            # has this turn and the agent says nobody runs it: a turn dropped after an outage must
            # not stay "a duplicate" for the whole dedup window. A second copy is harmless: the
            # agent claims (user, key) under the user's lease, so only one copy ever runs and the
            # other answers with the stored result.
            republished = False
            if duplicate and idle:
                await self._republish(turn, deadline, stream=sink is not None)
                republished = True
            turn.end_receive()
            turn.accepted.set()
            poll = poll or duplicate
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TurnTimeoutError(turn.turn_id)
                try:
                    event = await asyncio.wait_for(
                        events.get(), min(remaining, LOOKUP_POLL_S) if poll else remaining
                    )
                except TimeoutError:
                    if poll and turn.client_message_id is not None:
                        found = await self._lookup(turn, deadline)
                        if found is not None and found.answer is not None:
                            return TurnOutcome(answer=found.answer, replayed=True)
                        if duplicate and not republished and found is not None and not found.pending:
                            await self._republish(turn, deadline, stream=sink is not None)
                            republished = True
                    continue
                if event.type == "turn.done":
                    if event.answer is None:
                        log.warning("turn.done without an answer for %s; still waiting", turn.turn_id)
                        continue
                    return TurnOutcome(answer=event.answer, tokens=event.tokens)
                if sink is not None:
                    sink(event)
        finally:
            if self._waiting.get(turn.turn_id) is events:
                del self._waiting[turn.turn_id]

    async def _republish(self, turn: ChatTurn, deadline: float, *, stream: bool) -> None:
        """Publish a turn JetStream holds but nobody runs once more, under a fresh dedup id."""
        await self._publish(turn, deadline, f"{turn.turn_id}.{uuid.uuid4().hex}", stream=stream)

    async def _publish(self, turn: ChatTurn, deadline: float, msg_id: str, *, stream: bool) -> bool:
        """Publish the turn; returns whether JetStream saw it before."""
        loop = asyncio.get_running_loop()
        # The turn's trace context, kept in the envelope for whoever reads the turn later (the
        # record); the message itself carries it in its headers.
        trace_headers: dict[str, str] = {}
        propagate.inject(trace_headers)
        envelope = Envelope(
            turn_id=turn.turn_id,
            user_id=turn.principal.user_id,
            conversation_id=turn.conversation_id,
            occurred_at=self.clock.now(),
            tz=turn.principal.tz,
            channel=turn.channel,
            trace_headers=trace_headers,
            lang=turn.lang,
        )
        # Stamped here, once per publish: the agent's record takes the gateway's receive segment
        # (received → published) from these two.
        published_ms = epoch_ms()
        request = TurnRequested(
            envelope=envelope,
            text=turn.unwrapped.text,
            raw_text=turn.raw_text,
            quoted=turn.unwrapped.quoted,
            forwarded=turn.unwrapped.forwarded,
            third_party=turn.unwrapped.third_party,
            promoted=turn.unwrapped.promoted,
            client_message_id=turn.client_message_id,
            active_command_id=turn.active_command_id,
            direct=turn.direct,
            received_ms=turn.received_ms,
            published_ms=published_ms,
            stream=stream,
        )
        give_up = loop.time() + max(0.1, min(PUBLISH_TIMEOUT_S, deadline - loop.time()))
        # The ack says whether this was a duplicate, and a duplicate means the answer may already
        # exist. Trace context rides in the headers (FastStream's telemetry middleware).
        while True:
            attempt = max(0.1, min(PUBLISH_ATTEMPT_S, give_up - loop.time()))
            try:
                ack = await self.turns.publish(request, msg_id=msg_id, timeout=attempt)
                return bool(ack.duplicate)
            except (TimeoutError, NoRespondersError, NoStreamResponseError, ServiceUnavailableError) as exc:
                # Unanswered, or JetStream unavailable for the moment: again, until the budget is
                # spent. An attempt that did land makes the next one a duplicate, which says so.
                if loop.time() + 0.05 >= give_up:
                    raise AgentUnreachableError(f"could not hand the turn to the agent: {exc!r}") from exc
                await asyncio.sleep(0.05)
            except Exception as exc:
                raise AgentUnreachableError(f"could not hand the turn to the agent: {exc!r}") from exc
