"""outside text: whether an event's text reached a connected calendar other than through this system

`events.outside_text` marks an event whose text came from a connected calendar and is not what
this system last wrote there: made in another app or by someone the calendar is shared with,
changed there since, or the server's version kept over ours in a conflict. Its text is someone
else's words (contract §19) even in a calendar the user owns. The rows a sync stored before are
marked (`created_by_turn` is the sync's): what the server sent was never compared with what we
had written, so none of it is known to be the user's.

Revision ID: 0022w
Revises: 0021t
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022w"
down_revision: str | None = "0021t"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    op.add_column(
        "events",
        sa.Column("outside_text", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        schema=SCHEMA,
    )
    op.execute("UPDATE commands.events SET outside_text = true WHERE created_by_turn = 'caldav-sync'")


def downgrade() -> None:
    op.drop_column("events", "outside_text", schema=SCHEMA)
