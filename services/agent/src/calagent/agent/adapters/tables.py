"""The agent's own tables (schema `agent`): the chat archive, memories, and turn answers."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB

SCHEMA = "agent"
metadata = MetaData(schema=SCHEMA)

messages = Table(
    "messages",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("user_id", String(128), nullable=False),
    Column("conversation_id", String(128), nullable=False),
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("turn_id", String(64), nullable=False),
    # The stub this assistant message offered (held write, conflicting time): the timed gate
    # answers it only when it is the last thing the assistant said.
    Column("offer_command_id", String(64), nullable=True),
    # Whose words an assistant message quoted besides the user's (contract §19), if anyone's: the
    # model reads the message again by that source, never by its text.
    Column("third_party", Text, nullable=True),
    # Authoritative server time of the message: what session segments are cut by.
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("turn_id", "role", name="uq_messages_turn_role"),
    Index("ix_messages_user_conv_time", "user_id", "conversation_id", "created_at"),
)

memories = Table(
    "memories",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("user_id", String(128), nullable=False),
    Column("content", Text, nullable=False),
    Column("idempotency_key", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("user_id", "idempotency_key", name="uq_memories_user_key"),
)

turns = Table(
    "turns",
    metadata,
    Column("user_id", String(128), nullable=False),
    Column("turn_key", String(200), nullable=False),
    Column("turn_id", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("answer", JSONB, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("user_id", "turn_key", name="pk_turns"),
)

user_leases = Table(
    "user_leases",
    metadata,
    Column("user_id", String(128), primary_key=True),
    Column("holder", String(32), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)
