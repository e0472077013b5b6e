"""inbound mail: what the assistant's own mailbox received, and what became of it

`inbound_mail` keeps one row per message delivered to a user's private address (contract §16):
the sender, the Message-ID (unique per user: a message delivered twice is acted on once), and the
verdict (`offered`, `waiting`, `replied`, `turn`, `dropped`, …) with its reason, so a message that
was not acted on is still on record; an invitation `waiting` behind a request the user has open
keeps its offer until it comes up. A stub may now be an `invitation`: a REQUEST or CANCEL from someone
else, held until the user answers it.

Revision ID: 0009m
Revises: 0008s
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009m"
down_revision: str | None = "0008s"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
KINDS_0003 = "kind IN ('create', 'change', 'plan')"
KINDS_0009 = "kind IN ('create', 'change', 'plan', 'invitation')"


def upgrade() -> None:
    op.create_table(
        "inbound_mail",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sender", sa.String(254), nullable=False),
        sa.Column("message_id", sa.String(300), nullable=False),
        sa.Column("method", sa.String(16), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("offer", postgresql.JSONB(), nullable=True),
        sa.UniqueConstraint("user_id", "message_id", name="uq_inbound_mail_message"),
        schema=SCHEMA,
    )
    op.create_index(
        "ix_inbound_mail_waiting",
        "inbound_mail",
        ["user_id", "id"],
        schema=SCHEMA,
        postgresql_where=sa.text("verdict = 'waiting'"),
    )
    op.drop_constraint("ck_stubs_kind", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_kind", "stubs", KINDS_0009, schema=SCHEMA)


def downgrade() -> None:
    op.execute("DELETE FROM commands.stubs WHERE kind = 'invitation'")
    op.drop_constraint("ck_stubs_kind", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_kind", "stubs", KINDS_0003, schema=SCHEMA)
    op.drop_table("inbound_mail", schema=SCHEMA)
