"""calendars, events, command stubs, idempotency

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
ACTIVE_SQL = "status IN ('needs_date', 'needs_time', 'conflict', 'held')"


def _tstz(name: str, *, nullable: bool = False, default_now: bool = False) -> sa.Column[object]:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=sa.func.now() if default_now else None,
    )


def upgrade() -> None:
    op.create_table(
        "calendars",
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        _tstz("created_at", default_now=True),
        sa.PrimaryKeyConstraint("user_id", "name", name="pk_calendars"),
        schema=SCHEMA,
    )
    op.create_table(
        "events",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        _tstz("start_at"),
        _tstz("end_at"),
        sa.Column("all_day", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        sa.Column("calendar", sa.String(100), nullable=False),
        sa.Column("completed", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        sa.Column("created_by_turn", sa.String(64), nullable=True),
        sa.Column("created_by_key", sa.String(200), nullable=True),
        _tstz("created_at", default_now=True),
        _tstz("updated_at", default_now=True),
        sa.CheckConstraint("end_at > start_at", name="ck_events_end_after_start"),
        sa.UniqueConstraint("user_id", "created_by_key", name="uq_events_user_key"),
        schema=SCHEMA,
    )
    op.create_index("ix_events_user_start", "events", ["user_id", "start_at"], schema=SCHEMA)
    op.create_table(
        "stubs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("slots", postgresql.JSONB(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("candidates", postgresql.JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column(
            "conflict_event_ids", postgresql.JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")
        ),
        sa.Column("hold_reason", sa.String(32), nullable=True),
        sa.Column("requested_hold", sa.String(32), nullable=True),
        sa.Column("confirmed", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        _tstz("proposed_start", nullable=True),
        _tstz("proposed_end", nullable=True),
        _tstz("expires_at"),
        sa.Column("created_by_turn", sa.String(64), nullable=True),
        _tstz("created_at"),
        _tstz("updated_at"),
        sa.CheckConstraint(
            "status IN ('needs_date', 'needs_time', 'conflict', 'held', 'created', 'cancelled', 'expired')",
            name="ck_stubs_status",
        ),
        schema=SCHEMA,
    )
    op.create_index(
        "uq_stubs_one_active",
        "stubs",
        ["user_id"],
        unique=True,
        schema=SCHEMA,
        postgresql_where=sa.text(ACTIVE_SQL),
    )
    op.create_table(
        "idempotency",
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("result", postgresql.JSONB(none_as_null=True), nullable=True),
        _tstz("created_at", default_now=True),
        sa.PrimaryKeyConstraint("user_id", "key", name="pk_idempotency"),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table("idempotency", schema=SCHEMA)
    op.drop_index("uq_stubs_one_active", table_name="stubs", schema=SCHEMA)
    op.drop_table("stubs", schema=SCHEMA)
    op.drop_index("ix_events_user_start", table_name="events", schema=SCHEMA)
    op.drop_table("events", schema=SCHEMA)
    op.drop_table("calendars", schema=SCHEMA)
