"""The agent's persistence: archive, memories, turn answers, and the per-user turn lock."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Row, Table, func, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.agent.adapters.tables import SCHEMA, memories, messages, turns
from calagent.agent.adapters.turn_statements import (
    ACQUIRE,
    CLAIMED,
    FINISH,
    LEASE_LIVE,
    LEASE_SECONDS,
    RELEASE,
    RENEW_HELD,
    START,
)
from calagent.agent.domain.context import replayed
from calagent.agent.domain.search import rank, search_terms
from calagent.agent.domain.session import ArchivedMessage
from calagent.contracts.turns import HistoryMessage, HistoryRequest, HistoryResult, TurnAnswer
from calagent.runtime.settle import RateLimitedLog

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

log = logging.getLogger("calagent.agent.store")
_renewals = RateLimitedLog(log)


@dataclass(frozen=True)
class TurnClaim:
    status: str  # "new" | "running" | "stalled" | "done"
    answer: TurnAnswer | None


@dataclass(frozen=True)
class TurnStart:
    """A turn as its first transaction takes it: whose, under which key, and the user's words."""

    user_id: str
    conversation_id: str
    turn_key: str
    turn_id: str
    text: str


@dataclass
class TurnLease:
    """The user's lease, held for one turn, and that turn's claim; with a claim to run, the
    conversation before this turn (oldest first, without this turn's own messages)."""

    user_id: str
    holder: str
    claim: TurnClaim
    history: list[ArchivedMessage] = field(default_factory=list)
    released: bool = False


def _claim(status: str, answer: Any) -> TurnClaim:
    if status == "done" and answer is not None:
        return TurnClaim("done", TurnAnswer.model_validate(answer))
    return TurnClaim("running", None)


def _like(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class AgentStore:
    def __init__(self, engine: AsyncEngine, lease_seconds: float = LEASE_SECONDS) -> None:
        self.engine = engine
        self.lease_seconds = lease_seconds
        # The leases held right now, all renewed by one task in one statement: with hundreds of
        # turns waiting for the model, one round trip every third of the lease time instead of a
        # transaction per turn.
        self._held: dict[int, TurnLease] = {}
        self._renewing: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def user_turn_lock(self, user_id: str) -> AsyncIterator[None]:
        """Two turns of one user never interleave (see `turn`), here without a turn claim."""
        lease = await self._acquire(user_id, None, None)
        async with self._renewed(lease):
            yield

    @asynccontextmanager
    async def turn(self, start: TurnStart, now: Callable[[], datetime]) -> AsyncIterator[TurnLease]:
        """Hold the user's lease, claim the turn, archive the user's message and read the history
        before it, in one statement (`START`): a crash before its commit leaves nothing, after it
        the redelivered turn finds its claim running and its message archived once (one message
        per turn and role).

        A lease row, not a lock held on a connection: a turn spends most of its life waiting for
        the model, and a connection held all that time would cap the turns in flight at the pool
        size. A second turn of the same user retries with a short backoff (rare: the gateway
        already orders a user's turns). The lease expires on the database's own clock, so a
        crashed holder cannot block its user. `finish_turn` gives it back with the answer.

        The claim and the message are stamped `now()` as of the attempt that takes the lease,
        which sees the user's previous turn ended: after its reply, however long this one waited.
        """
        lease = await self._acquire(start.user_id, start, now)
        async with self._renewed(lease):
            yield lease

    @asynccontextmanager
    async def _renewed(self, lease: TurnLease) -> AsyncIterator[None]:
        """Keep `lease` alive while the body runs, and give it back after (unless already)."""
        self._held[id(lease)] = lease
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.create_task(self._renew_held())
        try:
            yield
        finally:
            self._held.pop(id(lease), None)
            if not self._held and self._renewing is not None:
                self._renewing.cancel()
                self._renewing = None
            if not lease.released:
                async with self.engine.begin() as conn:
                    await conn.execute(RELEASE, {"user_id": lease.user_id, "holder": lease.holder})
                lease.released = True

    async def _renew_held(self) -> None:
        """Every third of the lease time, renew every lease still held, in one statement."""
        while self._held:
            await asyncio.sleep(self.lease_seconds / 3)
            held = [lease for lease in self._held.values() if not lease.released]
            if not held:
                continue
            params = {
                "users": [lease.user_id for lease in held],
                "holders": [lease.holder for lease in held],
                "ttl": self.lease_seconds,
            }
            try:
                async with self.engine.connect() as conn:
                    # One statement is its own transaction: no BEGIN and COMMIT around it.
                    auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
                    renewed = {(r.user_id, r.holder) for r in await auto.execute(RENEW_HELD, params)}
            except Exception as exc:
                # The database is away: the turns themselves will fail on their next statement
                # and be retried; nothing to do here but try again.
                _renewals.warning("renew", "could not renew the user leases: %r", exc)
                continue
            for lease in held:
                if (lease.user_id, lease.holder) not in renewed and not lease.released:
                    # Expired and taken over (this process stalled longer than the lease): the
                    # other holder runs the user's turns now; this turn's writes stay idempotent
                    # by key. Not renewed again.
                    log.warning("the lease of user %s was taken over while its turn ran", lease.user_id)
                    self._held.pop(id(lease), None)

    async def _acquire(
        self, user_id: str, start: TurnStart | None, now: Callable[[], datetime] | None
    ) -> TurnLease:
        holder = uuid.uuid4().hex
        delay = 0.005
        while True:
            if start is None or now is None:
                async with self.engine.begin() as conn:
                    got = (
                        await conn.execute(
                            ACQUIRE, {"user_id": user_id, "holder": holder, "ttl": self.lease_seconds}
                        )
                    ).first()
                if got is not None:
                    return TurnLease(user_id, holder, TurnClaim("new", None))
            else:
                lease = await self._start(holder, start, now())
                if lease is not None:
                    return lease
            await asyncio.sleep(delay)
            delay = min(0.2, delay * 2)

    async def _start(self, holder: str, start: TurnStart, at: datetime) -> TurnLease | None:
        """One attempt at a turn's start (`START`): the lease with the turn's claim, its message
        archived and the history before it; None while another turn holds the user."""
        params = {
            "user_id": start.user_id,
            "holder": holder,
            "ttl": self.lease_seconds,
            "conversation_id": start.conversation_id,
            "turn_key": start.turn_key,
            "turn_id": start.turn_id,
            "text": start.text,
            "at": at,
        }
        async with self.engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            rows = (await auto.execute(START, params)).all()
            first = rows[0]
            if first.holder is None:
                return None
            if first.claimed:
                claim = TurnClaim("new", None)
            elif first.prior_status is not None:
                claim = _claim(first.prior_status, first.prior_answer)
            else:
                # Claimed by another delivery of the turn that committed after this statement's
                # snapshot: read as it stands now.
                row = (await auto.execute(CLAIMED, params)).one()
                claim = _claim(row.status, row.answer)
        if claim.status == "done":
            # Answered already: replayed, nothing archived, no history needed.
            return TurnLease(start.user_id, holder, claim)
        history = [
            ArchivedMessage(r.role, r.content, r.created_at, r.offer_command_id, r.turn_id, r.third_party)
            for r in reversed(rows)
            if r.role is not None
        ]
        return TurnLease(start.user_id, holder, claim, history)

    async def finish_turn(
        self,
        lease: TurnLease,
        turn_key: str,
        answer: TurnAnswer,
        now: datetime,
        *,
        offer_command_id: str | None = None,
        third_party: str | None = None,
        settled: bool = True,
    ) -> None:
        """Archive the assistant's reply, store the answer and give the user's lease back, in one
        statement (one transaction, one round trip). Not `settled` (refused before running, to be
        run by the client's retry): the reply is archived but the claim stays unfinished.
        `third_party`: whose words the reply quoted besides the user's (contract §19)."""
        params = {
            "user_id": lease.user_id,
            "holder": lease.holder,
            "turn_key": turn_key,
            "conversation_id": answer.conversation_id,
            "turn_id": answer.turn_id,
            "content": answer.reply,
            "offer_command_id": offer_command_id,
            "third_party": third_party,
            "at": now,
            "answer": answer.model_dump_json(),
            "settled": settled,
        }
        async with self.engine.connect() as conn:
            # One statement is its own transaction: no BEGIN and COMMIT round trips around it.
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await auto.execute(FINISH, params)
        lease.released = True

    async def lookup_turn(self, user_id: str, turn_key: str) -> TurnClaim | None:
        """The claim of a turn, if any; a `running` claim whose user holds no live lease is
        reported as `stalled`: nobody works on it (its agent died or its message was given up),
        so a client's retry must run it again rather than wait for it."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(turns.c.status, turns.c.answer).where(
                        turns.c.user_id == user_id, turns.c.turn_key == turn_key
                    )
                )
            ).first()
            if row is None:
                return None
            claim = _claim(row.status, row.answer)
            if claim.status == "running":
                live = (await conn.execute(LEASE_LIVE, {"user_id": user_id})).first()
                if live is None:
                    return TurnClaim("stalled", None)
        return claim

    async def save_memory(self, user_id: str, content: str, key: str, at: datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(memories)
                .values(user_id=user_id, content=content, idempotency_key=key, created_at=at)
                .on_conflict_do_nothing(constraint="uq_memories_user_key")
            )

    async def search_memory(self, user_id: str, query: str) -> list[str]:
        terms = search_terms(query)
        if not terms:
            return []
        rows = await self._newest_matching(memories, terms, memories.c.user_id == user_id)
        return rank([r.content for r in rows], terms)

    async def search_archive(self, user_id: str, query: str, before_turn: str) -> list[str]:
        terms = search_terms(query)
        if not terms:
            return []
        rows = await self._newest_matching(
            messages, terms, messages.c.user_id == user_id, messages.c.turn_id != before_turn
        )
        # Each as the model reads it in the history: a reply that quoted someone else's text by
        # whose it was (contract §19), never the text.
        texts = [
            f"[{r.created_at.isoformat()}] {r.role}: "
            + replayed(
                ArchivedMessage(r.role, r.content, r.created_at, r.offer_command_id, r.turn_id, r.third_party)
            )
            for r in rows
        ]
        return rank(texts, terms)

    async def _newest_matching(
        self, table: Table, terms: list[str], *where: ColumnElement[bool]
    ) -> Sequence[Row[Any]]:
        """The newest rows of `table` (memories or messages) whose content holds any of `terms`;
        `rank` orders them by how many they hold."""
        async with self.engine.connect() as conn:
            return (
                await conn.execute(
                    select(table)
                    .where(*where, or_(*[table.c.content.ilike(_like(t)) for t in terms]))
                    .order_by(table.c.created_at.desc())
                    .limit(200)
                )
            ).all()

    async def history_page(self, request: HistoryRequest) -> HistoryResult:
        """One page of the caller's conversation for a client, each message with its turn's answer
        (outcome, the command it left pending, tool calls): the newest `limit` messages before
        `request.before`, returned oldest first."""
        query = (
            select(
                messages.c.id,
                messages.c.role,
                messages.c.content,
                messages.c.turn_id,
                messages.c.created_at,
                turns.c.answer,
            )
            .select_from(
                messages.outerjoin(
                    turns,
                    (turns.c.user_id == messages.c.user_id) & (turns.c.turn_id == messages.c.turn_id),
                )
            )
            .where(
                messages.c.user_id == request.user_id,
                messages.c.conversation_id == request.conversation_id,
            )
            .order_by(messages.c.id.desc())
            .limit(request.limit + 1)
        )
        if request.before is not None:
            query = query.where(messages.c.id < request.before)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        more = len(rows) > request.limit
        rows = rows[: request.limit]
        page: list[HistoryMessage] = []
        for row in reversed(rows):
            answer = TurnAnswer.model_validate(row.answer) if row.answer is not None else None
            mine = answer is not None and row.role == "assistant"
            page.append(
                HistoryMessage(
                    id=row.id,
                    role="assistant" if row.role == "assistant" else "user",
                    text=row.content,
                    turn_id=row.turn_id,
                    at=row.created_at,
                    outcome=answer.outcome if answer is not None else None,
                    command=answer.command if answer is not None else None,
                    tool_calls=answer.tool_calls if mine and answer is not None else (),
                    model_calls=answer.model_calls if mine and answer is not None else None,
                )
            )
        return HistoryResult(messages=tuple(page), before=page[0].id if more and page else None)

    async def count_messages(self, user_id: str) -> int:
        async with self.engine.connect() as conn:
            value = await conn.scalar(
                select(func.count()).select_from(messages).where(messages.c.user_id == user_id)
            )
        return int(value or 0)


__all__ = ["MIGRATIONS_DIR", "SCHEMA", "AgentStore", "TurnClaim", "TurnLease", "TurnStart"]
