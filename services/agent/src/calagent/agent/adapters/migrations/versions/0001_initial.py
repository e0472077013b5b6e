"""The chat archive, memories and turn answers.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SCHEMA = "agent"


def upgrade() -> None:
    op.create_table(
        "messages",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("conversation_id", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("turn_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("turn_id", "role", name="uq_messages_turn_role"),
        schema=SCHEMA,
    )
    op.create_index(
        "ix_messages_user_conv_time", "messages", ["user_id", "conversation_id", "created_at"], schema=SCHEMA
    )
    op.create_table(
        "memories",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("user_id", "idempotency_key", name="uq_memories_user_key"),
        schema=SCHEMA,
    )
    op.create_table(
        "turns",
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("turn_key", sa.String(200), nullable=False),
        sa.Column("turn_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("answer", JSONB, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "turn_key", name="pk_turns"),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table("turns", schema=SCHEMA)
    op.drop_table("memories", schema=SCHEMA)
    op.drop_table("messages", schema=SCHEMA)
