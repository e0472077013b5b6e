"""The people tables of the `commands` schema (contract §16, §20): contacts, each user's private
address, the mail sent and received, and times proposed to someone outside. On the one `metadata`
of `tables`; Alembic migrations create them."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from calagent.commands.adapters.tables import metadata

contacts = Table(
    "contacts",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("name", String(200), nullable=False),
    Column("email", String(254), nullable=False),
    Column("aliases", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_contacts_user", "user_id", "created_at"),
)

# Each user's private address: the ORGANIZER of the invitations the assistant sends for them.
mailboxes = Table(
    "mailboxes",
    metadata,
    Column("user_id", String(128), primary_key=True),
    Column("address", String(254), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# The mail outbox: one iMIP message per recipient, rendered and committed with the write that
# caused it. The Message-ID is a digest of (event, sequence, method, recipient): the same message is
# never queued twice, and a retry after a lost acknowledgement carries the same id.
mail_outbox = Table(
    "mail_outbox",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("event_uid", Text, nullable=False),
    Column("method", String(16), nullable=False),
    Column("sequence", Integer, nullable=False),
    Column("sender", String(254), nullable=False),
    Column("recipient", String(254), nullable=False),
    Column("message_id", String(300), nullable=False, unique=True),
    Column("message", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.clock_timestamp()),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("not_before", DateTime(timezone=True), nullable=False, server_default=func.clock_timestamp()),
    Column("sent_at", DateTime(timezone=True), nullable=True),
    Column("last_error", Text, nullable=True),
    Column("trace_context", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    CheckConstraint(
        "method IN ('REQUEST', 'CANCEL', 'REPLY', 'DECLINECOUNTER')", name="ck_mail_outbox_method"
    ),
    Index("ix_mail_outbox_due", "not_before", postgresql_where=text("sent_at IS NULL")),
    Index("ix_mail_outbox_user", "user_id", "id"),
)

# Times proposed to someone outside (contract §20), once the user confirmed them: whom, the slots
# mailed (each held as a tentative event of the user's), the mail's Message-ID a reply names, and
# whether one was booked.
proposals = Table(
    "proposals",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("title", String(200), nullable=False),
    Column("attendee", JSONB, nullable=False),
    Column("duration_minutes", Integer, nullable=False),
    Column("slots", JSONB, nullable=False),
    Column("attendee_tz", String(64), nullable=True),
    Column("zone_source", String(8), nullable=True),
    Column("message_id", String(300), nullable=False),
    Column("state", String(8), nullable=False),
    Column("event_id", String(32), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("state IN ('open', 'booked')", name="ck_proposals_state"),
    Index("ix_proposals_message", "user_id", "message_id"),
)

# The zone the last REPLY or COUNTER of a person named (its DTSTART's TZID), per user and address.
attendee_zones = Table(
    "attendee_zones",
    metadata,
    Column("user_id", String(128), primary_key=True),
    Column("address", String(254), primary_key=True),
    Column("tz", String(64), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# What the user's private address received (contract §16), acted on or not: a message is acted on
# once per Message-ID, and one dropped (an unknown sender, a spoofed From, a REPLY from someone not
# invited) is still on record with its reason.
inbound_mail = Table(
    "inbound_mail",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("received_at", DateTime(timezone=True), nullable=False),
    Column("sender", String(254), nullable=False),
    Column("message_id", String(300), nullable=False),
    Column("method", String(16), nullable=True),
    Column("verdict", String(16), nullable=False),
    Column("reason", Text, nullable=True),
    UniqueConstraint("user_id", "message_id", name="uq_inbound_mail_message"),
)
