"""Turns, gateway deliveries and latency segments.

Revision ID: evalrec_0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "evalrec_0001"
down_revision = None
branch_labels = None
depends_on = None

SCHEMA = "evalrec"


def upgrade() -> None:
    op.create_table(
        "turns",
        sa.Column("turn_id", sa.Text(), primary_key=True),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("tz", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("intent", sa.Text(), nullable=False),
        sa.Column("flags", postgresql.ARRAY(sa.Text()), nullable=False, server_default="{}"),
        sa.Column("model_calls", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("total_ms", sa.Float(), nullable=False, server_default="0"),
        sa.Column("cold_start", sa.Boolean(), nullable=False, server_default="false"),
        sa.Column("reply", sa.Text(), nullable=False),
        sa.Column("replaced_reply", sa.Text(), nullable=True),
        sa.Column("tool_calls", postgresql.JSONB(), nullable=False, server_default="[]"),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        schema=SCHEMA,
    )
    op.create_index("ix_turns_occurred_at", "turns", ["occurred_at"], schema=SCHEMA)
    op.create_index("ix_turns_user_id", "turns", ["user_id"], schema=SCHEMA)
    op.create_table(
        "deliveries",
        sa.Column("turn_id", sa.Text(), primary_key=True),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("total_ms", sa.Float(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        schema=SCHEMA,
    )
    op.create_table(
        "segments",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("start_ms", sa.Float(), nullable=False),
        sa.Column("ms", sa.Float(), nullable=False),
        sa.CheckConstraint("source IN ('agent', 'gateway')", name="ck_segments_source"),
        sa.UniqueConstraint(
            "turn_id", "source", "name", "start_ms", name="uq_segments_turn_source_name_start"
        ),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table("segments", schema=SCHEMA)
    op.drop_table("deliveries", schema=SCHEMA)
    op.drop_index("ix_turns_user_id", table_name="turns", schema=SCHEMA)
    op.drop_index("ix_turns_occurred_at", table_name="turns", schema=SCHEMA)
    op.drop_table("turns", schema=SCHEMA)
