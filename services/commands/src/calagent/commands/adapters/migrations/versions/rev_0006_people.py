"""people: contacts, attendees, the user's mail address, the mail outbox

Events carry their attendees (name, address, answer) and organizer. A stub may wait for an
attendee (`needs_attendee`, an active status: the partial unique index of active stubs is rebuilt
with it) with the candidates a name matched, and names the recipients of the invitations a
confirmation will send. `mailboxes` holds each user's private address; `mail_outbox` the iMIP
messages committed with the write that caused them, each with its stable Message-ID.

Revision ID: 0006p
Revises: 0005f
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006p"
down_revision: str | None = "0005f"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
ACTIVE_0005 = "status IN ('needs_date', 'needs_time', 'conflict', 'held')"
ACTIVE_0006 = "status IN ('needs_date', 'needs_time', 'needs_attendee', 'conflict', 'held')"
STATUSES_0005 = (
    "status IN ('needs_date', 'needs_time', 'conflict', 'held', 'created', 'cancelled', 'expired', "
    "'superseded', 'updated', 'deleted', 'planned')"
)
STATUSES_0006 = (
    "status IN ('needs_date', 'needs_time', 'needs_attendee', 'conflict', 'held', 'created', "
    "'cancelled', 'expired', 'superseded', 'updated', 'deleted', 'planned')"
)
EMPTY = sa.text("'[]'::jsonb")


def upgrade() -> None:
    op.add_column(
        "events",
        sa.Column("attendees", postgresql.JSONB(), nullable=False, server_default=EMPTY),
        schema=SCHEMA,
    )
    op.add_column("events", sa.Column("organizer", sa.Text(), nullable=True), schema=SCHEMA)
    for name in ("attendee_candidates", "recipients"):
        op.add_column(
            "stubs", sa.Column(name, postgresql.JSONB(), nullable=False, server_default=EMPTY), schema=SCHEMA
        )
    op.add_column("stubs", sa.Column("attendee_query", sa.Text(), nullable=True), schema=SCHEMA)
    op.drop_constraint("ck_stubs_status", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_status", "stubs", STATUSES_0006, schema=SCHEMA)
    op.drop_index("uq_stubs_one_active", table_name="stubs", schema=SCHEMA)
    op.create_index(
        "uq_stubs_one_active",
        "stubs",
        ["user_id"],
        unique=True,
        schema=SCHEMA,
        postgresql_where=sa.text(ACTIVE_0006),
    )
    op.create_table(
        "contacts",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("aliases", postgresql.JSONB(), nullable=False, server_default=EMPTY),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Index("ix_contacts_user", "user_id", "created_at"),
        schema=SCHEMA,
    )
    op.create_table(
        "mailboxes",
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("address", sa.String(254), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        schema=SCHEMA,
    )
    op.create_table(
        "mail_outbox",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("event_uid", sa.Text(), nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("sender", sa.String(254), nullable=False),
        sa.Column("recipient", sa.String(254), nullable=False),
        sa.Column("message_id", sa.String(300), nullable=False, unique=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.clock_timestamp()
        ),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column(
            "not_before", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.clock_timestamp()
        ),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("trace_context", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.CheckConstraint("method IN ('REQUEST', 'CANCEL', 'REPLY')", name="ck_mail_outbox_method"),
        sa.Index("ix_mail_outbox_due", "not_before", postgresql_where=sa.text("sent_at IS NULL")),
        sa.Index("ix_mail_outbox_user", "user_id", "id"),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table("mail_outbox", schema=SCHEMA)
    op.drop_table("mailboxes", schema=SCHEMA)
    op.drop_table("contacts", schema=SCHEMA)
    op.execute("UPDATE commands.stubs SET status = 'cancelled' WHERE status = 'needs_attendee'")
    op.drop_index("uq_stubs_one_active", table_name="stubs", schema=SCHEMA)
    op.create_index(
        "uq_stubs_one_active",
        "stubs",
        ["user_id"],
        unique=True,
        schema=SCHEMA,
        postgresql_where=sa.text(ACTIVE_0005),
    )
    op.drop_constraint("ck_stubs_status", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_status", "stubs", STATUSES_0005, schema=SCHEMA)
    op.drop_column("stubs", "attendee_query", schema=SCHEMA)
    for name in ("recipients", "attendee_candidates"):
        op.drop_column("stubs", name, schema=SCHEMA)
    op.drop_column("events", "organizer", schema=SCHEMA)
    op.drop_column("events", "attendees", schema=SCHEMA)
