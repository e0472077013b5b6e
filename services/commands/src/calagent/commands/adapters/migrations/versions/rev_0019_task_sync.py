"""tasks kept as VTODOs in the user's connected calendar (contract §21, §12)

A task now keeps the UID its object carries (`uid`), the object as the server last gave it or we
last wrote it (`ical`: the next change patches it, not rebuilds it) and whether the server refused
its last delivery (`sync_state`). Where it lives on the server is its `caldav_resources` row, as
for an event (`event_id` names the task). A CalDAV outbox row now says what it delivers
(`kind`: an event or series, or a task); every row so far is an event's.

Revision ID: 0019v
Revises: 0018k
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019v"
down_revision: str | None = "0018k"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    op.add_column("tasks", sa.Column("uid", sa.Text(), nullable=True), schema=SCHEMA)
    op.add_column("tasks", sa.Column("ical", sa.Text(), nullable=True), schema=SCHEMA)
    op.add_column("tasks", sa.Column("sync_state", sa.String(16), nullable=True), schema=SCHEMA)
    op.add_column(
        "caldav_outbox",
        sa.Column("kind", sa.String(8), nullable=False, server_default=sa.text("'event'")),
        schema=SCHEMA,
    )
    op.create_check_constraint(
        "ck_caldav_outbox_kind", "caldav_outbox", "kind IN ('event', 'task')", schema=SCHEMA
    )


def downgrade() -> None:
    op.execute("DELETE FROM commands.caldav_resources r USING commands.tasks t WHERE r.event_id = t.id")
    op.execute("DELETE FROM commands.caldav_outbox WHERE kind = 'task'")
    op.drop_constraint("ck_caldav_outbox_kind", "caldav_outbox", schema=SCHEMA, type_="check")
    op.drop_column("caldav_outbox", "kind", schema=SCHEMA)
    op.drop_column("tasks", "sync_state", schema=SCHEMA)
    op.drop_column("tasks", "ical", schema=SCHEMA)
    op.drop_column("tasks", "uid", schema=SCHEMA)
