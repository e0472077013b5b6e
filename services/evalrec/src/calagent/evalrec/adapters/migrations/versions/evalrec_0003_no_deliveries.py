"""The gateway no longer reports its own record of a turn: the agent's record carries the gateway's
receive segment and the total from the gateway's receipt, so `deliveries` goes. Segments the gateway
reported before stay in `segments` (source "gateway") and still show on their turns' timelines.

Revision ID: evalrec_0003
Revises: evalrec_0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "evalrec_0003"
down_revision = "evalrec_0002"
branch_labels = None
depends_on = None

SCHEMA = "evalrec"


def upgrade() -> None:
    op.drop_table("deliveries", schema=SCHEMA)


def downgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("turn_id", sa.Text(), primary_key=True),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("total_ms", sa.Float(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        schema=SCHEMA,
    )
