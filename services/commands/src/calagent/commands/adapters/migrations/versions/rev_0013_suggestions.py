"""suggestions people trust: how an event holds its owner's time, and the buffer a user keeps

`events.transparent` (TRANSP:TRANSPARENT, an event marked free) and `events.tentative`
(STATUS:TENTATIVE) say how an event holds its owner's time when a suggestion counts it (contract
§20). Rows written before read as opaque and certain, RFC 5545's defaults: one read from a
connected calendar that says otherwise is read so when the server next changes its object.
`user_settings.buffer_minutes` is the free time a suggestion keeps around each busy span (none: 0).

Revision ID: 0013t
Revises: 0012i
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013t"
down_revision: str | None = "0012i"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    for name in ("transparent", "tentative"):
        op.add_column(
            "events",
            sa.Column(name, sa.Boolean(), nullable=False, server_default=sa.text("false")),
            schema=SCHEMA,
        )
    op.add_column("user_settings", sa.Column("buffer_minutes", sa.Integer(), nullable=True), schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("user_settings", "buffer_minutes", schema=SCHEMA)
    for name in ("tentative", "transparent"):
        op.drop_column("events", name, schema=SCHEMA)
