"""settings: each user's zone, address, language and working hours; free/busy sharing

`user_settings` holds what a user chose (a null column: the default — the token's zone, the
deployment's working hours). `sharing` says an owner lets another user see when the owner is busy
(`level` 'freebusy': busy spans, never what fills them).

Revision ID: 0008s
Revises: 0007c
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008s"
down_revision: str | None = "0007c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    op.create_table(
        "user_settings",
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("tz", sa.String(64), nullable=True),
        sa.Column("email", sa.String(254), nullable=True),
        sa.Column("language", sa.String(8), nullable=True),
        sa.Column("work_hours", postgresql.JSONB(none_as_null=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        schema=SCHEMA,
    )
    # A contact's address is matched to a user without case (contract §16).
    op.create_index(
        "ix_user_settings_email",
        "user_settings",
        [sa.text("lower(email)")],
        schema=SCHEMA,
        postgresql_where=sa.text("email IS NOT NULL"),
    )
    op.create_table(
        "sharing",
        sa.Column("owner_id", sa.String(128), nullable=False),
        sa.Column("with_user_id", sa.String(128), nullable=False),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("owner_id", "with_user_id", name="pk_sharing"),
        sa.CheckConstraint("level IN ('freebusy')", name="ck_sharing_level"),
        sa.CheckConstraint("owner_id <> with_user_id", name="ck_sharing_other"),
        schema=SCHEMA,
    )
    op.create_index("ix_sharing_with", "sharing", ["with_user_id"], schema=SCHEMA)


def downgrade() -> None:
    op.drop_table("sharing", schema=SCHEMA)
    op.drop_table("user_settings", schema=SCHEMA)
