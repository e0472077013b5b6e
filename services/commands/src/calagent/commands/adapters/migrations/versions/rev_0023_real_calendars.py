"""real calendars: what of a calendar's objects the sync could not read (contract §22), and events
that end when they start (contract §14)

`caldav_calendars.object_notes` holds, per calendar, the objects a sync skipped (a file no reader
takes: two DTSTARTs, a start that is text, two events under one UID) and those it read only in
part (a second RRULE, a rule it cannot follow), each as {href, uid, skipped, problem}; `GET
/v1/accounts` shows them as the account's warnings. A note goes when its object is read again or
is gone.

`ck_events_end_after_start` becomes `ck_events_end_not_before_start`: a timed VEVENT with neither
DTEND nor DURATION ends when it starts (RFC 5545 §3.6.1), a reminder-like entry that keeps no time.

Revision ID: 0023r
Revises: 0022w
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0023r"
down_revision: str | None = "0022w"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    op.add_column(
        "caldav_calendars",
        sa.Column("object_notes", postgresql.JSONB(), nullable=True),
        schema=SCHEMA,
    )
    op.drop_constraint("ck_events_end_after_start", "events", schema=SCHEMA, type_="check")
    op.create_check_constraint(
        "ck_events_end_not_before_start", "events", "end_at >= start_at", schema=SCHEMA
    )


def downgrade() -> None:
    op.drop_constraint("ck_events_end_not_before_start", "events", schema=SCHEMA, type_="check")
    # The older rule cannot hold an event that ends when it starts: it gets a minute.
    op.execute("UPDATE commands.events SET end_at = start_at + interval '1 minute' WHERE end_at = start_at")
    op.create_check_constraint("ck_events_end_after_start", "events", "end_at > start_at", schema=SCHEMA)
    op.drop_column("caldav_calendars", "object_notes", schema=SCHEMA)
