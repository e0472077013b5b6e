"""proposals of times to people outside, and the zones their answers showed (contract §20)

`proposals` keeps each proposal the user confirmed: whom it asked, the slots mailed (each held as a
tentative event of the user's, `event_id`), the Message-ID of the mail (a reply names it in
In-Reply-To or References) and whether one was booked. `attendee_zones` keeps, per user and
address, the zone the last REPLY or COUNTER of that person named in its DTSTART's TZID: the zone
a later proposal writes its times in. A stub may now be a `proposal` (times to mail, held for the
user's word) or a `booking` (the time the attendee chose, held for the user's word), and the mail
outbox takes the proposal's mail (`PROPOSAL`, plain text, no iCalendar method). No rows change.

Revision ID: 0016p
Revises: 0015c
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016p"
down_revision: str | None = "0015c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
KINDS_0009 = "kind IN ('create', 'change', 'plan', 'invitation')"
KINDS_0015 = "kind IN ('create', 'change', 'plan', 'invitation', 'proposal', 'booking')"
METHODS_0014 = "method IN ('REQUEST', 'CANCEL', 'REPLY', 'DECLINECOUNTER')"
METHODS_0015 = "method IN ('REQUEST', 'CANCEL', 'REPLY', 'DECLINECOUNTER', 'PROPOSAL')"


def upgrade() -> None:
    op.create_table(
        "proposals",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("attendee", postgresql.JSONB(), nullable=False),
        sa.Column("duration_minutes", sa.Integer(), nullable=False),
        sa.Column("slots", postgresql.JSONB(), nullable=False),
        sa.Column("attendee_tz", sa.String(64), nullable=True),
        sa.Column("zone_source", sa.String(8), nullable=True),
        sa.Column("message_id", sa.String(300), nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("event_id", sa.String(32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("state IN ('open', 'booked')", name="ck_proposals_state"),
        schema=SCHEMA,
    )
    op.create_index("ix_proposals_message", "proposals", ["user_id", "message_id"], schema=SCHEMA)
    op.create_table(
        "attendee_zones",
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("address", sa.String(254), primary_key=True),
        sa.Column("tz", sa.String(64), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        schema=SCHEMA,
    )
    op.drop_constraint("ck_stubs_kind", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_kind", "stubs", KINDS_0015, schema=SCHEMA)
    op.drop_constraint("ck_mail_outbox_method", "mail_outbox", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_mail_outbox_method", "mail_outbox", METHODS_0015, schema=SCHEMA)


def downgrade() -> None:
    op.execute("DELETE FROM commands.mail_outbox WHERE method = 'PROPOSAL'")
    op.drop_constraint("ck_mail_outbox_method", "mail_outbox", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_mail_outbox_method", "mail_outbox", METHODS_0014, schema=SCHEMA)
    op.execute("DELETE FROM commands.stubs WHERE kind IN ('proposal', 'booking')")
    op.drop_constraint("ck_stubs_kind", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_kind", "stubs", KINDS_0009, schema=SCHEMA)
    op.drop_table("attendee_zones", schema=SCHEMA)
    op.drop_index("ix_proposals_message", "proposals", schema=SCHEMA)
    op.drop_table("proposals", schema=SCHEMA)
