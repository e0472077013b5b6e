"""The agent service: consumes turns from JetStream (a pull consumer shared by replicas) and is the
only caller of the model."""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.agent.adapters.clients import CommandsClient, TimeClient
from calagent.agent.adapters.failover import Endpoint, FailoverModel, ModelRetryPolicy
from calagent.agent.adapters.model import ModelClient, OpenAIModelClient
from calagent.agent.adapters.store import MIGRATIONS_DIR, SCHEMA, AgentStore, TurnStart
from calagent.agent.domain.circuit import Circuit
from calagent.agent.domain.context import user_content
from calagent.agent.loop import TurnRunner
from calagent.contracts import wire
from calagent.contracts.turns import (
    HistoryRequest,
    HistoryResult,
    TurnAnswer,
    TurnEvent,
    TurnLookup,
    TurnLookupResult,
    TurnRecord,
    TurnRequested,
)
from calagent.runtime.bus import Bus, RetryPolicy, StreamPublisher, TopicPublisher, instance_id
from calagent.runtime.clock import Clock, SystemClock
from calagent.runtime.db import database_state, make_engine, upgrade_async
from calagent.runtime.settings import Settings, load_settings

log = logging.getLogger("calagent.agent")


def turn_policy(settings: Settings) -> RetryPolicy:
    """How a turn's delivery is settled.

    A turn that fails unexpectedly is tried twice more, then dead-lettered. One that fails because
    the database or another service is away is retried with backoff for as long as its client can
    still be waiting for the answer (the turn timeout): an outage delays turns, it does not lose
    them (and a turn given up on is run again by the client's retry, see `on_lookup`). `ack_wait`
    is a few seconds because a running turn reports progress every two: a turn whose agent died is
    redelivered within seconds, not after the whole turn timeout.
    """
    return RetryPolicy(
        max_deliver=3,
        backoff=(0.25, 0.5, 1.0, 2.0, 3.0),
        ack_wait=6.0,
        progress_every=2.0,
        transient_for=settings.turn_timeout_s,
    )


def model_from_settings(settings: Settings) -> FailoverModel:
    """The primary endpoint, then the fallback (when configured), each behind its own circuit."""
    assert settings.openai_base_url is not None

    def endpoint(base_url: str, model: str, key: str) -> Endpoint:
        client = OpenAIModelClient(base_url, key, model, settings.model_timeout_s)
        return Endpoint(client, Circuit(settings.circuit_failures, settings.circuit_open_s))

    key = settings.openai_api_key or "not-needed"
    endpoints = [endpoint(settings.openai_base_url, settings.model, key)]
    if settings.fallback_model:
        base_url = settings.fallback_base_url or settings.openai_base_url
        endpoints.append(endpoint(base_url, settings.fallback_model, settings.fallback_api_key or key))
    policy = ModelRetryPolicy(attempts=settings.model_attempts, backoff_s=settings.model_backoff_s)
    return FailoverModel(endpoints, policy, default_budget_s=settings.model_timeout_s)


class AgentService:
    name = "agent"

    def __init__(self, settings: Settings, clock: Clock, model: ModelClient | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.model = model
        self.engine: AsyncEngine | None = None
        self.runner: TurnRunner | None = None
        self.store: AgentStore | None = None
        self.events: TopicPublisher[TurnEvent] | None = None
        self.records: StreamPublisher[TurnRecord] | None = None
        self._warm = False

    def wire(self, bus: Bus) -> None:
        self.events = bus.topic_publisher(wire.TURN_EVENTS)
        self.records = bus.stream_publisher(wire.TURN_RECORDED)
        bus.serve(wire.AGENT_TURN_LOOKUP, self.on_lookup)
        bus.serve(wire.AGENT_HISTORY, self.on_history)
        # A turn mostly waits for the model; what bounds the turns in flight is memory and the model
        # endpoint, not a small pool (the per-user lease holds no database connection meanwhile).
        bus.consume(
            wire.TURN_REQUESTED,
            self.on_turn,
            policy=turn_policy(self.settings),
            max_workers=self.settings.agent_concurrency,
        )

    async def start(self, bus: Bus) -> None:
        database_url = self.settings.require_database()
        await upgrade_async(database_url, MIGRATIONS_DIR, SCHEMA)
        self.engine = make_engine(database_url)
        self.store = AgentStore(self.engine)
        if self.model is None and self.settings.openai_base_url:
            self.model = model_from_settings(self.settings)
        if self.model is None:
            log.error(
                "no model endpoint configured (OPENAI_BASE_URL): every model turn answers model_unavailable"
            )
        self.runner = TurnRunner(
            clock=self.clock,
            model=self.model,
            commands=CommandsClient(bus),
            time=TimeClient(bus),
            store=self.store,
            session_gap_minutes=self.settings.session_gap_minutes,
            offer_window_minutes=self.settings.offer_window_minutes,
            turn_timeout_s=self.settings.turn_timeout_s,
            model_timeout_s=self.settings.model_timeout_s,
        )

    async def stop(self) -> None:
        if isinstance(self.model, FailoverModel):
            await self.model.close()
        if self.engine is not None:
            await self.engine.dispose()

    async def on_lookup(self, request: TurnLookup) -> TurnLookupResult:
        assert self.store is not None
        claim = await self.store.lookup_turn(request.user_id, request.turn_key)
        if claim is None:
            return TurnLookupResult()
        # `pending` only while someone works on it: a stalled claim asks the caller to publish again.
        return TurnLookupResult(answer=claim.answer, pending=claim.status == "running")

    async def on_history(self, request: HistoryRequest) -> HistoryResult:
        assert self.store is not None
        return await self.store.history_page(request)

    async def health(self) -> dict[str, str]:
        return {"database": await database_state(self.engine)}

    async def on_turn(self, turn: TurnRequested) -> None:
        assert self.store is not None and self.runner is not None
        assert self.events is not None and self.records is not None
        events, records, store = self.events, self.records, self.store
        env = turn.envelope
        # The gateway derived the turn's id from (user, client_message_id) when it has one: the one
        # key of the claim, of the writes' idempotency keys and of the lookup.
        turn_key = env.turn_id

        async def sink(event: TurnEvent) -> None:
            # Progress nobody follows is not sent: the gateway only waits for the answer.
            if turn.stream or event.type == "turn.done":
                await events.publish(env.turn_id, event)

        # Archived as the model will read it again: words that are not the user's stay marked so.
        archived = (
            user_content(turn.text, turn.quoted, turn.forwarded, promoted=True)
            if turn.promoted
            else turn.text
        )
        start = TurnStart(env.user_id, env.conversation_id, turn_key, env.turn_id, archived)
        async with self.store.turn(start, self.clock.now) as lease:
            claim = lease.claim
            if claim.status == "done" and claim.answer is not None:
                # A redelivered turn or a client retry: answer again, run nothing.
                await sink(TurnEvent(turn_id=env.turn_id, type="turn.done", answer=claim.answer))
                return

            async def finish(
                answer: TurnAnswer, offer_command_id: str | None, third_party: str | None
            ) -> None:
                # A turn refused at once (the model's circuit is open) leaves its claim unfinished,
                # so the client's retry after `Retry-After` runs it instead of replaying the refusal.
                await store.finish_turn(
                    lease,
                    turn_key,
                    answer,
                    self.clock.now(),
                    offer_command_id=offer_command_id,
                    third_party=third_party,
                    settled=answer.retry_after_s is None,
                )

            cold = not self._warm
            self._warm = True
            answer, record = await self.runner.run(
                turn, turn_key, sink, history=lease.history, finish=finish, cold_start=cold
            )
        log.info("turn %s processed by %s: %s", env.turn_id, instance_id(), answer.outcome)
        try:
            await records.publish(record, msg_id=f"record:{env.turn_id}")
        except Exception:
            log.exception("could not publish the record of turn %s", env.turn_id)


def create_app(settings: Settings | None = None, clock: Clock | None = None) -> AgentService:
    return AgentService(settings or load_settings(), clock or SystemClock())
