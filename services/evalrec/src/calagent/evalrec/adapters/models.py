"""Tables of the eval recorder, all in its own `evalrec` schema (no other service reads them)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Date,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

SCHEMA = "evalrec"

metadata = MetaData(schema=SCHEMA)

# One row per turn the agent finished, written once: a redelivered record finds its row and leaves it.
turns = Table(
    "turns",
    metadata,
    Column("turn_id", Text, primary_key=True),
    Column("user_id", Text, nullable=False),
    Column("conversation_id", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("tz", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("intent", Text, nullable=False),
    Column("flags", ARRAY(Text), nullable=False, server_default="{}"),
    Column("model_calls", Integer, nullable=False, server_default="0"),
    Column("total_ms", Float, nullable=False, server_default="0"),
    Column("cold_start", Boolean, nullable=False, server_default="false"),
    Column("reply", Text, nullable=False),
    Column("replaced_reply", Text, nullable=True),
    Column("tool_calls", JSONB, nullable=False, server_default="[]"),
    Column("error", Text, nullable=True),
    Column("repairs", ARRAY(Text), nullable=False, server_default="{}"),
    Column("occurred_at", DateTime(timezone=True), nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Index("ix_turns_occurred_at", "occurred_at"),
    Index("ix_turns_user_id", "user_id"),
)

# The gateway's side of a turn, kept apart from `turns` so either record can arrive first without
# a half-filled turn row ever existing.
segments = Table(
    "segments",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("turn_id", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("start_ms", Float, nullable=False),
    Column("ms", Float, nullable=False),
    CheckConstraint("source IN ('agent', 'gateway')", name="ck_segments_source"),
    UniqueConstraint("turn_id", "source", "name", "start_ms", name="uq_segments_turn_source_name_start"),
)

# One row per model call, with the tokens the endpoint reported; `day` is the turn's date in the
# user's zone, so a user's "today" is theirs.
model_usage = Table(
    "model_usage",
    metadata,
    Column("turn_id", Text, primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("user_id", Text, nullable=False),
    Column("day", Date, nullable=False),
    Column("model", Text, nullable=False),
    Column("prompt_tokens", Integer, nullable=False),
    Column("completion_tokens", Integer, nullable=False),
    Column("cached_tokens", Integer, nullable=False),
    Column("reported", Boolean, nullable=False),
    Index("ix_model_usage_day_user", "day", "user_id"),
)
