"""cards: the address books of connected accounts (CardDAV, RFC 6352), read as contacts

`caldav_books` holds each account's address books with the change token the server gave last
(DAV:sync-token, else CS:getctag): an unchanged token means nothing to read. `caldav_cards` holds
one row per vCard: its name, addresses and nicknames as read, the ETag it had. Both go with their
account (ON DELETE CASCADE).

Revision ID: 0010v
Revises: 0009m
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010v"
down_revision: str | None = "0009m"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
EMPTY = sa.text("'[]'::jsonb")


def upgrade() -> None:
    op.create_table(
        "caldav_books",
        sa.Column(
            "account_id",
            sa.String(32),
            sa.ForeignKey(f"{SCHEMA}.caldav_accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("token", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("account_id", "url", name="pk_caldav_books"),
        schema=SCHEMA,
    )
    op.create_table(
        "caldav_cards",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column(
            "account_id",
            sa.String(32),
            sa.ForeignKey(f"{SCHEMA}.caldav_accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("book_url", sa.Text, nullable=False),
        sa.Column("href", sa.Text, nullable=False),
        sa.Column("etag", sa.Text, nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("emails", postgresql.JSONB(), nullable=False, server_default=EMPTY),
        sa.Column("aliases", postgresql.JSONB(), nullable=False, server_default=EMPTY),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("account_id", "href", name="uq_caldav_cards_href"),
        schema=SCHEMA,
    )
    op.create_index("ix_caldav_cards_user", "caldav_cards", ["user_id", "created_at"], schema=SCHEMA)


def downgrade() -> None:
    op.drop_table("caldav_cards", schema=SCHEMA)
    op.drop_table("caldav_books", schema=SCHEMA)
