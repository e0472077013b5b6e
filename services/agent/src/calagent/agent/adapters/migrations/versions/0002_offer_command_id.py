"""An assistant message remembers the stub it offered (the timed gate).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SCHEMA = "agent"


def upgrade() -> None:
    op.add_column("messages", sa.Column("offer_command_id", sa.String(64), nullable=True), schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("messages", "offer_command_id", schema=SCHEMA)
