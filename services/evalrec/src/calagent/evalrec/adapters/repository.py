"""PostgreSQL storage of turn records: idempotent writes, timeline and report reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from calagent.contracts.evalrec import Timeline
from calagent.contracts.turns import Segment, TurnRecord
from calagent.evalrec.adapters.models import model_usage, segments, turns
from calagent.evalrec.domain.report import SegmentFact, ToolCallFact, TurnFacts, measured_total
from calagent.evalrec.domain.timeline import assemble_timeline
from calagent.evalrec.domain.usage import UsageFact


async def _insert_segments(
    conn: AsyncConnection, turn_id: str, source: str, items: Sequence[Segment]
) -> None:
    if not items:
        return
    rows = [
        {"turn_id": turn_id, "source": source, "name": s.name, "start_ms": s.start_ms, "ms": s.ms}
        for s in items
    ]
    await conn.execute(
        insert(segments).on_conflict_do_nothing(constraint="uq_segments_turn_source_name_start"), rows
    )


class SqlTurnRepository:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def save_turn(self, record: TurnRecord, recorded_at: datetime) -> bool:
        """Store the agent's record once; True when it was new. A redelivery changes nothing."""
        env = record.envelope
        row: dict[str, Any] = {
            "turn_id": env.turn_id,
            "user_id": env.user_id,
            "conversation_id": env.conversation_id,
            "channel": env.channel,
            "tz": env.tz,
            "text": record.text,
            "outcome": record.outcome,
            "intent": record.intent,
            "flags": list(record.flags),
            "model_calls": record.model_calls,
            "total_ms": record.total_ms,
            "cold_start": record.cold_start,
            "reply": record.reply,
            "replaced_reply": record.replaced_reply,
            "tool_calls": [call.model_dump(mode="json") for call in record.tool_calls],
            "error": record.error,
            "repairs": list(record.repairs),
            "occurred_at": env.occurred_at,
            "recorded_at": recorded_at,
        }
        async with self.engine.begin() as conn:
            result = await conn.execute(
                insert(turns).on_conflict_do_nothing(index_elements=["turn_id"]).returning(turns.c.turn_id),
                row,
            )
            inserted = result.first() is not None
            # Segments go in even when the turn row already existed: a crash between the two inserts
            # is impossible inside one transaction, and the unique key makes the repeat a no-op.
            await _insert_segments(conn, env.turn_id, "agent", record.segments)
            if record.model_usage:
                day = env.occurred_at.astimezone(ZoneInfo(env.tz)).date()
                await conn.execute(
                    insert(model_usage).on_conflict_do_nothing(constraint="pk_model_usage"),
                    [
                        {
                            "turn_id": env.turn_id,
                            "seq": seq,
                            "user_id": env.user_id,
                            "day": day,
                            "model": u.model,
                            "prompt_tokens": u.prompt_tokens,
                            "completion_tokens": u.completion_tokens,
                            "cached_tokens": u.cached_tokens,
                            "reported": u.reported,
                        }
                        for seq, u in enumerate(record.model_usage)
                    ],
                )
        return inserted

    async def usage(self, since: date, user_id: str | None) -> list[UsageFact]:
        """Model calls from `since` on, summed per (day, user, model)."""
        query = (
            select(
                model_usage.c.day,
                model_usage.c.user_id,
                model_usage.c.model,
                func.count(func.distinct(model_usage.c.turn_id)).label("turns"),
                func.count().label("calls"),
                func.sum(model_usage.c.prompt_tokens).label("prompt"),
                func.sum(model_usage.c.completion_tokens).label("completion"),
                func.sum(model_usage.c.cached_tokens).label("cached"),
                func.count().filter(model_usage.c.reported.is_(False)).label("unreported"),
            )
            .where(model_usage.c.day >= since)
            .group_by(model_usage.c.day, model_usage.c.user_id, model_usage.c.model)
        )
        if user_id is not None:
            query = query.where(model_usage.c.user_id == user_id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            UsageFact(
                day=r.day,
                user_id=r.user_id,
                model=r.model,
                turns=int(r.turns),
                model_calls=int(r.calls),
                prompt_tokens=int(r.prompt or 0),
                completion_tokens=int(r.completion or 0),
                cached_tokens=int(r.cached or 0),
                unreported_calls=int(r.unreported or 0),
            )
            for r in rows
        ]

    async def timeline(self, turn_id: str, user_id: str | None = None) -> Timeline | None:
        async with self.engine.connect() as conn:
            turn = (
                await conn.execute(
                    select(turns.c.user_id, turns.c.total_ms).where(turns.c.turn_id == turn_id)
                )
            ).first()
            if turn is None:
                return None
            # Another user's turn id is answered exactly like an unknown one: existence is not leaked.
            if user_id is not None and turn.user_id != user_id:
                return None
            rows = (
                await conn.execute(
                    select(segments.c.source, segments.c.name, segments.c.start_ms, segments.c.ms).where(
                        segments.c.turn_id == turn_id
                    )
                )
            ).all()
        return assemble_timeline(
            turn_id,
            total_ms=turn.total_ms,
            segments=[(r.source, Segment(name=r.name, start_ms=r.start_ms, ms=r.ms)) for r in rows],
        )

    async def recent_turns(self, max_turns: int) -> list[TurnFacts]:
        """The newest `max_turns` turns with every segment of each."""
        window = select(turns.c.turn_id).order_by(turns.c.occurred_at.desc()).limit(max_turns).subquery()
        async with self.engine.connect() as conn:
            turn_rows = (
                await conn.execute(select(turns).join(window, window.c.turn_id == turns.c.turn_id))
            ).all()
            segment_rows = (
                await conn.execute(
                    select(segments.c.turn_id, segments.c.name, segments.c.start_ms, segments.c.ms).join(
                        window, window.c.turn_id == segments.c.turn_id
                    )
                )
            ).all()
        by_turn: dict[str, list[SegmentFact]] = {}
        for s in segment_rows:
            by_turn.setdefault(s.turn_id, []).append(SegmentFact(name=s.name, start_ms=s.start_ms, ms=s.ms))
        facts = [
            TurnFacts(
                turn_id=r.turn_id,
                text=r.text,
                outcome=r.outcome,
                intent=r.intent,
                occurred_at=r.occurred_at,
                tz=r.tz,
                flags=tuple(r.flags),
                model_calls=r.model_calls,
                total_ms=measured_total(r.total_ms),
                cold_start=r.cold_start,
                tool_calls=tuple(
                    ToolCallFact(name=str(c.get("name", "")), result=str(c.get("result", "")))
                    for c in r.tool_calls
                ),
                segments=tuple(by_turn.get(r.turn_id, ())),
                replaced_reply=r.replaced_reply,
                error=r.error,
                repairs=tuple(r.repairs),
            )
            for r in turn_rows
        ]
        facts.sort(key=lambda f: (f.occurred_at, f.turn_id))
        return facts
