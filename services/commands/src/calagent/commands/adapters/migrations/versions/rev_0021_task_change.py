"""task_change stubs: our change to a task offered again after a sync conflict (contract §22)

A task's conditional PUT that meets a new version on the server keeps the server's version and
offers the fields our change made as a held stub of kind `task_change`; confirming applies them
on top of the server's version.

Revision ID: 0021t
Revises: 0020u
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021t"
down_revision: str | None = "0020u"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
KINDS_BEFORE = "kind IN ('create', 'change', 'plan', 'invitation', 'proposal', 'booking', 'replan')"
KINDS = "kind IN ('create', 'change', 'plan', 'invitation', 'proposal', 'booking', 'replan', 'task_change')"


def upgrade() -> None:
    op.drop_constraint("ck_stubs_kind", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_kind", "stubs", KINDS, schema=SCHEMA)


def downgrade() -> None:
    op.execute("DELETE FROM commands.stubs WHERE kind = 'task_change'")
    op.drop_constraint("ck_stubs_kind", "stubs", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_stubs_kind", "stubs", KINDS_BEFORE, schema=SCHEMA)
