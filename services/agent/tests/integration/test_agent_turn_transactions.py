"""A turn's transactions on the agent's own database, counted on a real PostgreSQL: the lease, the
claim, the user's message and the history in one at the start; the reply, the answer and the
release in one at the end, before the client is told. A start that fails leaves nothing behind; a
turn redelivered after its start committed archives nothing twice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from sqlalchemy import event, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.agent.adapters.model import DeltaSink, ModelResponse, ModelToolCall
from calagent.agent.adapters.store import MIGRATIONS_DIR, SCHEMA, AgentStore
from calagent.agent.adapters.tables import messages, turns, user_leases
from calagent.agent.app import AgentService
from calagent.agent.loop import TurnRunner
from calagent.agent.ports import AgentCommand, AgentQuery
from calagent.contracts.commands import CommandResult, EventOut
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import QueryResult
from calagent.contracts.time import ParsedReply, SlotPatch
from calagent.contracts.turns import TurnEvent, TurnRecord, TurnRequested
from calagent.runtime.bus import StreamPublisher, TopicPublisher
from calagent.runtime.clock import FrozenClock
from calagent.runtime.db import make_engine, upgrade_async
from calagent.runtime.settings import Settings

pytestmark = pytest.mark.integration

NOW = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)
CREATE = {"title": "开会", "date": "D+1", "time": "15:00"}


class CreatingModel:
    """Asks for one create per call; fails its first `failures` calls."""

    model = "fake"

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.prompts: list[list[dict[str, Any]]] = []

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_delta: DeltaSink | None,
        *,
        budget_s: float | None = None,
    ) -> ModelResponse:
        self.prompts.append([dict(m) for m in messages])
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the agent died here")
        call = ModelToolCall(id="c0", name="prepare_or_create_schedule", arguments=json.dumps(CREATE))
        return ModelResponse(text="", tool_calls=[call], start_ms=0, first_token_ms=1, end_ms=2)


class FakeCommands:
    async def execute(self, command: AgentCommand) -> CommandResult:
        start = datetime.fromisoformat("2026-09-25T15:00:00+08:00")
        created = EventOut(
            id="e1",
            title="开会",
            start=start,
            end=start + timedelta(hours=1),
            calendar="工作",
            weekday=5,
            tz="Asia/Shanghai",
        )
        return CommandResult(status="created", persisted=True, event=created)

    async def query(self, query: AgentQuery) -> QueryResult:
        return QueryResult(calendars=("工作",))


class FakeTime:
    async def parse_reply(self, text: str, now: datetime, tz: str) -> ParsedReply:
        return ParsedReply(patch=SlotPatch(), complete=False)


class Published:
    """The turn events and records the agent publishes; on `turn.done`, what the database held
    at that moment (what a client told of the answer could read)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.events: list[TurnEvent] = []
        self.at_done: list[tuple[int, str | None]] = []

    async def publish(self, key: str, message: TurnEvent) -> None:
        self.events.append(message)
        if message.type == "turn.done":
            async with self.engine.connect() as conn:
                replies = await conn.scalar(
                    select(text("count(*)"))
                    .select_from(messages)
                    .where(messages.c.role == "assistant", messages.c.turn_id == key)
                )
                status = await conn.scalar(select(turns.c.status).where(turns.c.turn_id == key))
            self.at_done.append((int(replies or 0), status))


class Records:
    async def publish(self, message: TurnRecord, *, msg_id: str | None = None, timeout: float = 10.0) -> None:
        return None


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    await upgrade_async(database_url, MIGRATIONS_DIR, SCHEMA)
    engine = make_engine(database_url, pool_size=2)
    yield engine
    await engine.dispose()


@pytest.fixture
async def observer(database_url: str) -> AsyncIterator[AsyncEngine]:
    """The test's own connection to the database, beside the agent's engine whose work is counted."""
    engine = make_engine(database_url, pool_size=1)
    yield engine
    await engine.dispose()


def agent(engine: AsyncEngine, model: CreatingModel, observer: AsyncEngine) -> tuple[AgentService, Published]:
    clock = FrozenClock(NOW)
    service = AgentService(Settings(), clock, model)
    store = AgentStore(engine)
    service.engine, service.store = engine, store
    service.runner = TurnRunner(
        clock=clock,
        model=model,
        commands=FakeCommands(),
        time=FakeTime(),
        store=store,
        session_gap_minutes=120,
    )
    published = Published(observer)
    service.events = cast("TopicPublisher[TurnEvent]", published)
    service.records = cast("StreamPublisher[TurnRecord]", Records())
    return service, published


def turn(user: str, turn_id: str, words: str = "明天下午三点开会") -> TurnRequested:
    env = Envelope(turn_id=turn_id, user_id=user, conversation_id="c", occurred_at=NOW, tz="Asia/Shanghai")
    return TurnRequested(envelope=env, text=words, raw_text=words)


def count_begins(engine: AsyncEngine) -> list[str]:
    begun: list[str] = []
    event.listen(engine.sync_engine, "begin", lambda conn: begun.append("begin"))
    return begun


async def archived(engine: AsyncEngine, turn_id: str) -> list[tuple[str, str]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(messages.c.role, messages.c.content)
            .where(messages.c.turn_id == turn_id)
            .order_by(messages.c.id)
        )
        return [(r.role, r.content) for r in rows]


async def test_a_create_turn_costs_the_agent_two_transactions(
    engine: AsyncEngine, observer: AsyncEngine
) -> None:
    model = CreatingModel()
    service, published = agent(engine, model, observer)
    begun = count_begins(engine)
    await service.on_turn(turn("ann", "t1"))
    assert len(begun) <= 2
    # The second turn reads the first as its history, within the same two transactions.
    begun.clear()
    await service.on_turn(turn("ann", "t2", "后天下午三点开会"))
    assert len(begun) <= 2
    second = [m["content"] for m in model.prompts[1] if m["role"] in ("user", "assistant")]
    assert "明天下午三点开会" in "".join(c or "" for c in second)
    assert sum("后天下午三点开会" in (c or "") for c in second) == 1
    done = [e.answer for e in published.events if e.type == "turn.done"]
    assert len(done) == 2 and done[0] is not None
    assert await archived(engine, "t1") == [("user", "明天下午三点开会"), ("assistant", done[0].reply)]


def count_statements(engine: AsyncEngine) -> list[str]:
    run: list[str] = []
    event.listen(
        engine.sync_engine, "before_cursor_execute", lambda conn, cursor, statement, *a: run.append(statement)
    )
    return run


async def test_a_create_turn_costs_the_agent_two_statements(
    engine: AsyncEngine, observer: AsyncEngine
) -> None:
    # The start (lease, claim, the user's message, the history) is one round trip to the
    # database, and so is the end (reply, answer, release): no BEGIN and COMMIT around either.
    service, _ = agent(engine, CreatingModel(), observer)
    await service.on_turn(turn("eve", "eve-1"))
    run = count_statements(engine)
    await service.on_turn(turn("eve", "eve-2", "后天下午三点开会"))
    assert len(run) == 2, run
    assert [role for role, _ in await archived(engine, "eve-2")] == ["user", "assistant"]


async def test_the_answer_is_stored_before_the_client_is_told(
    engine: AsyncEngine, observer: AsyncEngine
) -> None:
    service, published = agent(engine, CreatingModel(), observer)
    await service.on_turn(turn("bea", "bea-1"))
    # When `turn.done` went out, the reply was in the archive and the claim answered: a client
    # reading its history or retrying its key right after finds both.
    assert published.at_done == [(1, "done")]
    async with engine.connect() as conn:
        held = select(text("count(*)")).select_from(user_leases).where(user_leases.c.user_id == "bea")
        assert await conn.scalar(held) == 0


async def test_a_start_that_fails_leaves_no_claim_and_no_lease(
    engine: AsyncEngine, observer: AsyncEngine
) -> None:
    service, _ = agent(engine, CreatingModel(), observer)

    def lose_the_archive(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "INSERT INTO agent.messages" in statement:
            raise ConnectionResetError("the database went away")

    event.listen(engine.sync_engine, "before_cursor_execute", lose_the_archive)
    with pytest.raises(Exception, match="went away"):
        await service.on_turn(turn("cat", "cat-1"))
    event.remove(engine.sync_engine, "before_cursor_execute", lose_the_archive)
    async with engine.connect() as conn:
        claims = select(text("count(*)")).select_from(turns).where(turns.c.user_id == "cat")
        assert await conn.scalar(claims) == 0
        held = select(text("count(*)")).select_from(user_leases).where(user_leases.c.user_id == "cat")
        assert await conn.scalar(held) == 0
    # Redelivered, the turn runs as a new one and archives its message once.
    await service.on_turn(turn("cat", "cat-1"))
    assert [role for role, _ in await archived(engine, "cat-1")] == ["user", "assistant"]


async def test_a_turn_redelivered_after_its_start_archives_nothing_twice(
    engine: AsyncEngine, observer: AsyncEngine
) -> None:
    model = CreatingModel(failures=1)
    service, published = agent(engine, model, observer)
    with pytest.raises(RuntimeError):
        await service.on_turn(turn("dan", "dan-1"))
    # The start committed: the claim runs and the user's message is archived.
    async with engine.connect() as conn:
        assert await conn.scalar(select(turns.c.status).where(turns.c.turn_id == "dan-1")) == "running"
    assert await archived(engine, "dan-1") == [("user", "明天下午三点开会")]
    await service.on_turn(turn("dan", "dan-1"))
    assert [role for role, _ in await archived(engine, "dan-1")] == ["user", "assistant"]
    # The redelivered run did not read its own message as history: the model saw it once.
    words = [m["content"] for m in model.prompts[1] if m["role"] == "user"]
    assert sum("明天下午三点开会" in (w or "") for w in words) == 1
    assert [e.type for e in published.events].count("turn.done") == 1
