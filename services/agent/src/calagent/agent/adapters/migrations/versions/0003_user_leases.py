"""Per-user turn leases: ordering without holding a connection for the length of a turn.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SCHEMA = "agent"


def upgrade() -> None:
    op.create_table(
        "user_leases",
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("holder", sa.String(32), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table("user_leases", schema=SCHEMA)
