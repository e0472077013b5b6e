"""events keep the user's object: UID, place, notes, URL and the iCalendar text

Every event gets the UID it was born with: a local event keeps the `<id>@calagent` it has always
been written with, one that came from a connected calendar the server's UID (from its resource),
an override its series'. Place, notes (DESCRIPTION) and URL become columns; `ical` holds the
object a change is patched into (filled by the next sync or delivery; empty until then). A row
written without a UID (by hand, in SQL) is read as `<id>@calagent`.

Revision ID: 0005f
Revises: 0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005f"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    for name in ("uid", "location", "notes", "url", "ical"):
        op.add_column("events", sa.Column(name, sa.Text, nullable=True), schema=SCHEMA)
    op.execute(
        """
        UPDATE commands.events e
           SET uid = coalesce(r.uid, e.id || '@calagent')
          FROM commands.events s
          LEFT JOIN commands.caldav_resources r ON r.event_id = s.id
         WHERE s.id = coalesce(e.series_id, e.id)
        """
    )
    # An override whose series is gone stands on its own, under its own id.
    op.execute("UPDATE commands.events SET uid = id || '@calagent' WHERE uid IS NULL")
    op.create_index("ix_events_user_uid", "events", ["user_id", "uid"], schema=SCHEMA)


def downgrade() -> None:
    op.drop_index("ix_events_user_uid", table_name="events", schema=SCHEMA)
    for name in ("ical", "url", "notes", "location", "uid"):
        op.drop_column("events", name, schema=SCHEMA)
