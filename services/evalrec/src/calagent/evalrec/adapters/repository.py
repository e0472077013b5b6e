"""PostgreSQL storage of turn records: idempotent writes, timeline and report reads."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Boolean, Date, DateTime, Float, Integer, Text, bindparam, func, select, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.contracts.evalrec import Timeline
from calagent.contracts.turns import Segment, TurnRecord
from calagent.evalrec.adapters.models import model_usage, segments, turns
from calagent.evalrec.domain.report import SegmentFact, ToolCallFact, TurnFacts, measured_total
from calagent.evalrec.domain.timeline import assemble_timeline
from calagent.evalrec.domain.usage import UsageFact

# A turn record in one statement (PostgreSQL runs each data-modifying CTE exactly once, all on one
# snapshot). Segments go in even when the turn row already existed, and their unique key makes a
# repeat a no-op: a redelivered record changes nothing. Segment and model-call lists arrive as
# parallel arrays, so the statement's text, and its prepared plan, is the same for every record.
SAVE_TURN = text(
    """
WITH turn AS (
    INSERT INTO evalrec.turns (
        turn_id, user_id, conversation_id, channel, tz, text, outcome, intent, flags, model_calls,
        total_ms, cold_start, reply, replaced_reply, tool_calls, error, repairs, occurred_at,
        recorded_at
    ) VALUES (
        :turn_id, :user_id, :conversation_id, :channel, :tz, :text, :outcome, :intent, :flags,
        :model_calls, :total_ms, :cold_start, :reply, :replaced_reply, :tool_calls, :error, :repairs,
        :occurred_at, :recorded_at
    )
    ON CONFLICT (turn_id) DO NOTHING
    RETURNING turn_id
), agent_segments AS (
    INSERT INTO evalrec.segments (turn_id, source, name, start_ms, ms)
    SELECT CAST(:turn_id AS text), 'agent', s.name, s.start_ms, s.ms
    FROM unnest(
        CAST(:segment_names AS text[]),
        CAST(:segment_starts AS float8[]),
        CAST(:segment_ms AS float8[])
    ) AS s(name, start_ms, ms)
    ON CONFLICT ON CONSTRAINT uq_segments_turn_source_name_start DO NOTHING
), usage AS (
    INSERT INTO evalrec.model_usage (
        turn_id, seq, user_id, day, model, prompt_tokens, completion_tokens, cached_tokens, reported
    )
    SELECT
        CAST(:turn_id AS text), u.seq - 1, CAST(:user_id AS text), CAST(:day AS date), u.model,
        u.prompt, u.completion, u.cached, u.reported
    FROM unnest(
        CAST(:usage_models AS text[]),
        CAST(:usage_prompt AS int[]),
        CAST(:usage_completion AS int[]),
        CAST(:usage_cached AS int[]),
        CAST(:usage_reported AS boolean[])
    ) WITH ORDINALITY AS u(model, prompt, completion, cached, reported, seq)
    ON CONFLICT ON CONSTRAINT pk_model_usage DO NOTHING
)
SELECT count(*) FROM turn
"""
).bindparams(
    bindparam("flags", type_=ARRAY(Text)),
    bindparam("repairs", type_=ARRAY(Text)),
    bindparam("tool_calls", type_=JSONB),
    bindparam("occurred_at", type_=DateTime(timezone=True)),
    bindparam("recorded_at", type_=DateTime(timezone=True)),
    bindparam("day", type_=Date),
    bindparam("segment_names", type_=ARRAY(Text)),
    bindparam("segment_starts", type_=ARRAY(Float)),
    bindparam("segment_ms", type_=ARRAY(Float)),
    bindparam("usage_models", type_=ARRAY(Text)),
    bindparam("usage_prompt", type_=ARRAY(Integer)),
    bindparam("usage_completion", type_=ARRAY(Integer)),
    bindparam("usage_cached", type_=ARRAY(Integer)),
    bindparam("usage_reported", type_=ARRAY(Boolean)),
)


class SqlTurnRepository:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        # A single statement is its own transaction: no BEGIN and COMMIT round trips around it.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def save_turn(self, record: TurnRecord, recorded_at: datetime) -> bool:
        """Store the agent's record once; True when it was new. A redelivery changes nothing.

        One statement, outside an explicit transaction: the turn row, its segments and its model
        calls go in together or not at all, in one round trip instead of a BEGIN, three inserts
        and a COMMIT."""
        env = record.envelope
        day = env.occurred_at.astimezone(ZoneInfo(env.tz)).date()
        usage = record.model_usage
        params: dict[str, Any] = {
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
            "segment_names": [s.name for s in record.segments],
            "segment_starts": [s.start_ms for s in record.segments],
            "segment_ms": [s.ms for s in record.segments],
            "day": day,
            "usage_models": [u.model for u in usage],
            "usage_prompt": [u.prompt_tokens for u in usage],
            "usage_completion": [u.completion_tokens for u in usage],
            "usage_cached": [u.cached_tokens for u in usage],
            "usage_reported": [u.reported for u in usage],
        }
        async with self._autocommit.connect() as conn:
            inserted = (await conn.execute(SAVE_TURN, params)).scalar_one()
        return bool(inserted)

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
