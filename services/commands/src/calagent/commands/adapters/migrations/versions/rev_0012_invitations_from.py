"""invitations_from: whose invitations received by mail are offered (contract §19)

`user_settings.invitations_from` is 'everyone' (a stranger's invitation is offered, marked as from
someone not in the contacts) or 'known' (only the user's own address's and their contacts'; a
stranger's is put on record, not offered); null is the default, 'everyone'. No rows change.

Revision ID: 0012i
Revises: 0011w
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012i"
down_revision: str | None = "0011w"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    op.add_column("user_settings", sa.Column("invitations_from", sa.String(8), nullable=True), schema=SCHEMA)
    op.create_check_constraint(
        "ck_user_settings_invitations_from",
        "user_settings",
        "invitations_from IN ('known', 'everyone')",
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_constraint("ck_user_settings_invitations_from", "user_settings", schema=SCHEMA)
    op.drop_column("user_settings", "invitations_from", schema=SCHEMA)
