"""waiting offers: an offer from outside waits beside the conversation as a stub of its own

An invitation or a sync conflict that arrives while the user's own request waits, or that a later
request sets aside, is a stub with `waiting_since` set: still answerable by its id (the page's
card), never the user's active stub, offered again once that one is settled (contract §19).
Invitations that waited on their mail record (`inbound_mail.offer`, verdict `waiting`) become such
stubs here, and the record keeps only what the mail became.

Revision ID: 0011w
Revises: 0010v
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011w"
down_revision: str | None = "0010v"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
ACTIVE = "status IN ('needs_date', 'needs_time', 'needs_attendee', 'conflict', 'held')"
END_WAITING = (
    "UPDATE commands.stubs SET status = 'expired' WHERE waiting_since IS NOT NULL "
    "AND status IN ('needs_date', 'needs_time', 'needs_attendee', 'conflict', 'held')"
)

# A waiting invitation's record becomes the stub its offer would have opened (`inbox._stub`): held,
# for the reason an invitation is held, until its event starts.
RECORDS_TO_STUBS = """
INSERT INTO commands.stubs (
    id, user_id, title, slots, status, hold_reason, requested_hold, proposed_start, proposed_end,
    expires_at, created_by_turn, created_at, updated_at, kind, change, waiting_since
)
SELECT
    substr(md5('waiting-' || m.id::text), 1, 32), m.user_id,
    left(m.offer -> 'invitation' ->> 'title', 200), '{}'::jsonb, 'held',
    'invitation_received', 'invitation_received',
    (m.offer -> 'invitation' ->> 'start')::timestamptz, (m.offer -> 'invitation' ->> 'end')::timestamptz,
    (m.offer -> 'invitation' ->> 'start')::timestamptz, 'mail-' || m.id::text,
    m.received_at, m.received_at, 'invitation', m.offer, m.received_at
FROM commands.inbound_mail m
WHERE m.verdict = 'waiting' AND m.offer IS NOT NULL
ORDER BY m.id
"""


def upgrade() -> None:
    op.add_column(
        "stubs", sa.Column("waiting_since", sa.DateTime(timezone=True), nullable=True), schema=SCHEMA
    )
    # The order stubs were opened in, whatever the clock said (a frozen clock gives them one time).
    op.add_column("stubs", sa.Column("seq", sa.BigInteger(), sa.Identity(), nullable=False), schema=SCHEMA)
    op.drop_index("uq_stubs_one_active", table_name="stubs", schema=SCHEMA)
    op.create_index(
        "uq_stubs_one_active",
        "stubs",
        ["user_id"],
        unique=True,
        schema=SCHEMA,
        postgresql_where=sa.text(f"{ACTIVE} AND waiting_since IS NULL"),
    )
    op.create_index(
        "ix_stubs_waiting",
        "stubs",
        ["user_id", "seq"],
        schema=SCHEMA,
        postgresql_where=sa.text("waiting_since IS NOT NULL"),
    )
    op.execute(RECORDS_TO_STUBS)
    op.drop_index("ix_inbound_mail_waiting", table_name="inbound_mail", schema=SCHEMA)
    op.drop_column("inbound_mail", "offer", schema=SCHEMA)


def downgrade() -> None:
    op.add_column("inbound_mail", sa.Column("offer", postgresql.JSONB(), nullable=True), schema=SCHEMA)
    op.create_index(
        "ix_inbound_mail_waiting",
        "inbound_mail",
        ["user_id", "id"],
        schema=SCHEMA,
        postgresql_where=sa.text("verdict = 'waiting'"),
    )
    # A waiting stub cannot go back to a record: it is ended, as a request nobody answered is.
    op.execute(END_WAITING)
    op.drop_index("ix_stubs_waiting", table_name="stubs", schema=SCHEMA)
    op.drop_index("uq_stubs_one_active", table_name="stubs", schema=SCHEMA)
    op.create_index(
        "uq_stubs_one_active",
        "stubs",
        ["user_id"],
        unique=True,
        schema=SCHEMA,
        postgresql_where=sa.text(ACTIVE),
    )
    op.drop_column("stubs", "seq", schema=SCHEMA)
    op.drop_column("stubs", "waiting_since", schema=SCHEMA)
