"""sync progress: how far an account's sync is (issue 44 item 9, contract §22)

`caldav_accounts.sync_calendars_done`/`sync_calendars_total`/`sync_events` say how many of the
account's calendars the running (or the last) sync has read whole, and how many events it has
read so far: one UPDATE per calendar, so a first sync of many calendars shows on the page how far
it is instead of nothing for a minute. Null until the account's first sync starts.

Revision ID: 0024p
Revises: 0023r
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024p"
down_revision: str | None = "0023r"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
COLUMNS = ("sync_calendars_done", "sync_calendars_total", "sync_events")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("caldav_accounts", sa.Column(name, sa.Integer(), nullable=True), schema=SCHEMA)


def downgrade() -> None:
    for name in reversed(COLUMNS):
        op.drop_column("caldav_accounts", name, schema=SCHEMA)
