"""series, reminders, pending changes, feeds, automation plans

Events gain the zone they were made in (a series keeps its wall-clock time across DST), an RFC 5545
rule, excluded occurrences, overrides (series_id + recurrence_id) and a reminder. Stubs gain a kind
(create, change, plan) and the change they hold. Feeds are private subscription secrets (stored as
a hash); plans are automation offers that never run by themselves.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
STATUSES_0002 = (
    "status IN ('needs_date', 'needs_time', 'conflict', 'held', 'created', 'cancelled', 'expired', "
    "'superseded')"
)
STATUSES_0003 = (
    "status IN ('needs_date', 'needs_time', 'conflict', 'held', 'created', 'cancelled', 'expired', "
    "'superseded', 'updated', 'deleted', 'planned')"
)


def upgrade() -> None:
    op.add_column("events", sa.Column("tz", sa.String(64), nullable=True), schema=SCHEMA)
    op.add_column("events", sa.Column("rrule", sa.Text(), nullable=True), schema=SCHEMA)
    op.add_column(
        "events",
        sa.Column("exdates", postgresql.JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
        schema=SCHEMA,
    )
    op.add_column("events", sa.Column("series_id", sa.String(32), nullable=True), schema=SCHEMA)
    op.add_column(
        "events", sa.Column("recurrence_id", sa.DateTime(timezone=True), nullable=True), schema=SCHEMA
    )
    op.add_column("events", sa.Column("reminder_minutes", sa.Integer(), nullable=True), schema=SCHEMA)
    op.create_index("ix_events_user_series", "events", ["user_id", "series_id"], schema=SCHEMA)
    # Masters of a series are found by their first start, whatever the window: few rows per user.
    op.create_index(
        "ix_events_user_rrule",
        "events",
        ["user_id"],
        schema=SCHEMA,
        postgresql_where=sa.text("rrule IS NOT NULL"),
    )

    op.add_column(
        "stubs",
        sa.Column("kind", sa.String(16), nullable=False, server_default=sa.text("'create'")),
        schema=SCHEMA,
    )
    op.add_column("stubs", sa.Column("change", postgresql.JSONB(), nullable=True), schema=SCHEMA)
    op.drop_constraint("ck_stubs_status", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_status", "stubs", STATUSES_0003, schema=SCHEMA)
    op.create_check_constraint(
        "ck_stubs_kind", "stubs", "kind IN ('create', 'change', 'plan')", schema=SCHEMA
    )

    op.create_table(
        "feeds",
        sa.Column("user_id", sa.String(128), primary_key=True),
        # Only a hash of the secret is kept: the address itself is shown once, to its owner.
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("tz", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        schema=SCHEMA,
    )
    op.create_table(
        "plans",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("trigger", sa.Text(), nullable=False),
        sa.Column("steps", postgresql.JSONB(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stub_id", sa.String(32), nullable=True),
        sa.Column("created_by_key", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("status IN ('offered', 'confirmed', 'deleted')", name="ck_plans_status"),
        sa.UniqueConstraint("user_id", "created_by_key", name="uq_plans_user_key"),
        sa.Index("ix_plans_user", "user_id", "created_at"),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table("plans", schema=SCHEMA)
    op.drop_table("feeds", schema=SCHEMA)
    op.execute(
        "UPDATE commands.stubs SET status = 'cancelled' WHERE status IN ('updated', 'deleted', 'planned')"
    )
    op.drop_constraint("ck_stubs_kind", "stubs", schema=SCHEMA, type_="check")
    op.drop_constraint("ck_stubs_status", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_status", "stubs", STATUSES_0002, schema=SCHEMA)
    op.drop_column("stubs", "change", schema=SCHEMA)
    op.drop_column("stubs", "kind", schema=SCHEMA)
    op.drop_index("ix_events_user_rrule", "events", schema=SCHEMA)
    op.drop_index("ix_events_user_series", "events", schema=SCHEMA)
    for column in ("reminder_minutes", "recurrence_id", "series_id", "exdates", "rrule", "tz"):
        op.drop_column("events", column, schema=SCHEMA)
