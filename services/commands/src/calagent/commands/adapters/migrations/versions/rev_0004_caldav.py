"""connected CalDAV accounts: accounts, their calendars, resources, the outbox

Accounts keep the password as a Fernet token (the key is outside the database). A resource maps a
local event or series to its object on the server (href, UID, ETag). The outbox gets a row in the
same transaction as every write that touched an event of a user with an account. Events gain the
state of their last delivery when the server refused it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    op.add_column("events", sa.Column("sync_state", sa.String(16), nullable=True), schema=SCHEMA)
    op.create_table(
        "caldav_accounts",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("username", sa.Text, nullable=False),
        sa.Column("secret", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=True),
        schema=SCHEMA,
    )
    op.create_index("ix_caldav_accounts_user", "caldav_accounts", ["user_id", "created_at"], schema=SCHEMA)
    op.create_table(
        "caldav_calendars",
        sa.Column(
            "account_id",
            sa.String(32),
            sa.ForeignKey(f"{SCHEMA}.caldav_accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("color", sa.String(32), nullable=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("is_default", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("sync_token", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("account_id", "url", name="pk_caldav_calendars"),
        schema=SCHEMA,
    )
    op.create_table(
        "caldav_resources",
        sa.Column("event_id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column(
            "account_id",
            sa.String(32),
            sa.ForeignKey(f"{SCHEMA}.caldav_accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("calendar_url", sa.Text, nullable=False),
        sa.Column("href", sa.Text, nullable=False),
        sa.Column("uid", sa.Text, nullable=False),
        sa.Column("etag", sa.Text, nullable=True),
        sa.Column("origin", sa.String(8), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("account_id", "href", name="uq_caldav_resources_href"),
        sa.CheckConstraint("origin IN ('local', 'remote')", name="ck_caldav_resources_origin"),
        schema=SCHEMA,
    )
    op.create_table(
        "caldav_outbox",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("event_id", sa.String(32), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.clock_timestamp()
        ),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column(
            "not_before", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.clock_timestamp()
        ),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("trace_context", postgresql.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        schema=SCHEMA,
    )
    op.create_index(
        "ix_caldav_outbox_due",
        "caldav_outbox",
        ["not_before"],
        schema=SCHEMA,
        postgresql_where=sa.text("delivered_at IS NULL"),
    )
    op.create_index("ix_caldav_outbox_user", "caldav_outbox", ["user_id", "id"], schema=SCHEMA)
    op.create_index(
        "ix_caldav_outbox_event",
        "caldav_outbox",
        ["event_id"],
        schema=SCHEMA,
        postgresql_where=sa.text("delivered_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("caldav_outbox", schema=SCHEMA)
    op.drop_table("caldav_resources", schema=SCHEMA)
    op.drop_table("caldav_calendars", schema=SCHEMA)
    op.drop_table("caldav_accounts", schema=SCHEMA)
    op.drop_column("events", "sync_state", schema=SCHEMA)
