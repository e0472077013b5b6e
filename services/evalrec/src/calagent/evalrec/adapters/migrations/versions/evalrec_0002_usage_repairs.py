"""Tokens per model call and the repairs of each turn's tool calls (contract §17).

Revision ID: evalrec_0002
Revises: evalrec_0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "evalrec_0002"
down_revision = "evalrec_0001"
branch_labels = None
depends_on = None

SCHEMA = "evalrec"


def upgrade() -> None:
    op.add_column(
        "turns",
        sa.Column("repairs", postgresql.ARRAY(sa.Text()), nullable=False, server_default="{}"),
        schema=SCHEMA,
    )
    op.create_table(
        "model_usage",
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("reported", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("turn_id", "seq", name="pk_model_usage"),
        schema=SCHEMA,
    )
    op.create_index("ix_model_usage_day_user", "model_usage", ["day", "user_id"], schema=SCHEMA)


def downgrade() -> None:
    op.drop_index("ix_model_usage_day_user", table_name="model_usage", schema=SCHEMA)
    op.drop_table("model_usage", schema=SCHEMA)
    op.drop_column("turns", "repairs", schema=SCHEMA)
