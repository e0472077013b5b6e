"""unlisted resources: objects we wrote that no listing has shown since (contract §22)

`caldav_resources.unlisted` is set by every write of ours and cleared when a sync's listing shows
the object as we hold it. A sync-token listing names what changed between two tokens, so an object
we made after the last token and the user's calendar app removed before the next one is named by
neither (Xandikos compares the two git trees); the next sync asks for each unlisted object by name.

Revision ID: 0020u
Revises: 0019v
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020u"
down_revision: str | None = "0019v"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    op.add_column(
        "caldav_resources",
        sa.Column("unlisted", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_column("caldav_resources", "unlisted", schema=SCHEMA)
