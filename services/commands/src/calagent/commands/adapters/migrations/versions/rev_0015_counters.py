"""counter-proposals: the organizer's DECLINECOUNTER goes through the mail outbox (contract §20)

An attendee's COUNTER becomes a held move of the event (a `change` stub, no new column); turning
it down mails the proposer a DECLINECOUNTER (RFC 5546 §3.2.8), which the outbox now takes beside
REQUEST, CANCEL and REPLY. No rows change.

Revision ID: 0015c
Revises: 0014o
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015c"
down_revision: str | None = "0014o"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
METHODS_0006 = "method IN ('REQUEST', 'CANCEL', 'REPLY')"
METHODS_0014 = "method IN ('REQUEST', 'CANCEL', 'REPLY', 'DECLINECOUNTER')"


def upgrade() -> None:
    op.drop_constraint("ck_mail_outbox_method", "mail_outbox", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_mail_outbox_method", "mail_outbox", METHODS_0014, schema=SCHEMA)


def downgrade() -> None:
    op.execute("DELETE FROM commands.mail_outbox WHERE method = 'DECLINECOUNTER'")
    op.drop_constraint("ck_mail_outbox_method", "mail_outbox", schema=SCHEMA, type_="check")
    op.create_check_constraint("ck_mail_outbox_method", "mail_outbox", METHODS_0006, schema=SCHEMA)
