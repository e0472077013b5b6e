"""stubs may end superseded: a new request replaced them

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
OLD = "status IN ('needs_date', 'needs_time', 'conflict', 'held', 'created', 'cancelled', 'expired')"
NEW = (
    "status IN ('needs_date', 'needs_time', 'conflict', 'held', 'created', 'cancelled', 'expired', "
    "'superseded')"
)


def upgrade() -> None:
    op.drop_constraint("ck_stubs_status", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_status", "stubs", NEW, schema=SCHEMA)


def downgrade() -> None:
    op.execute("UPDATE commands.stubs SET status = 'cancelled' WHERE status = 'superseded'")
    op.drop_constraint("ck_stubs_status", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_status", "stubs", OLD, schema=SCHEMA)
