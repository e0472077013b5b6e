"""An assistant message remembers whose words it quoted besides the user's (contract §19): an
invitation, an event someone else organizes or a card. The model reads it again by that source,
never by its text. Older rows have none and are replayed as they are.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SCHEMA = "agent"


def upgrade() -> None:
    op.add_column("messages", sa.Column("third_party", sa.Text, nullable=True), schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("messages", "third_party", schema=SCHEMA)
