"""sync health: bounded deliveries, errors in our words, and deletions withheld (contract §22)

`caldav_outbox.refusals` counts the attempts the server answered with a failure (5xx, 408, 429)
or that failed in our own code: at `CALAGENT_CALDAV_MAX_ATTEMPTS` the delivery ends `rejected`
instead of being tried again (an attempt that reached no server is not one it refused).
`caldav_accounts.sync_error`/`delivery_error` (and when) keep the last failure of each, in our
words, for `GET /v1/accounts`. `caldav_calendars.withheld` keeps the events a calendar stopped
showing that are not removed here until the user answers the offer that names them.

Revision ID: 0017x
Revises: 0016p
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0017x"
down_revision: str | None = "0016p"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
ACCOUNT_COLUMNS = ("sync_error", "delivery_error")


def upgrade() -> None:
    op.add_column(
        "caldav_outbox",
        sa.Column("refusals", sa.Integer(), nullable=False, server_default=sa.text("0")),
        schema=SCHEMA,
    )
    for name in ACCOUNT_COLUMNS:
        op.add_column("caldav_accounts", sa.Column(name, sa.Text(), nullable=True), schema=SCHEMA)
        op.add_column(
            "caldav_accounts",
            sa.Column(f"{name}_at", sa.DateTime(timezone=True), nullable=True),
            schema=SCHEMA,
        )
    op.add_column("caldav_calendars", sa.Column("withheld", JSONB(), nullable=True), schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("caldav_calendars", "withheld", schema=SCHEMA)
    for name in reversed(ACCOUNT_COLUMNS):
        op.drop_column("caldav_accounts", f"{name}_at", schema=SCHEMA)
        op.drop_column("caldav_accounts", name, schema=SCHEMA)
    op.drop_column("caldav_outbox", "refusals", schema=SCHEMA)
