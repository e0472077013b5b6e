"""owned calendars: whether a connected calendar is the user's own, carried to what it brings

`caldav_calendars.owned` says whether the account's login owns the calendar or someone shares it
with the user (read from DAV:owner and DAV:share-access when the account is connected);
`events.foreign_calendar` marks an event that arrived from a calendar the user does not own: its
text is someone else's words (contract §19). Calendars connected before are taken as the user's
own, as they were until now.

Revision ID: 0014o
Revises: 0013t
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014o"
down_revision: str | None = "0013t"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    op.add_column(
        "caldav_calendars",
        sa.Column("owned", sa.Boolean(), nullable=False, server_default=sa.text("true")),
        schema=SCHEMA,
    )
    op.add_column(
        "events",
        sa.Column("foreign_calendar", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_column("events", "foreign_calendar", schema=SCHEMA)
    op.drop_column("caldav_calendars", "owned", schema=SCHEMA)
