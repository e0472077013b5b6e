"""The `commands` schema. Alembic migrations create it; this metadata only describes it (the people
tables, on the same metadata, in `tables_people`)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

SCHEMA = "commands"
ACTIVE_SQL = "status IN ('needs_date', 'needs_time', 'needs_attendee', 'conflict', 'held')"
# The user's active stub: an active one not waiting beside the conversation.
OFFERED_SQL = f"{ACTIVE_SQL} AND waiting_since IS NULL"

metadata = MetaData(schema=SCHEMA)

calendars = Table(
    "calendars",
    metadata,
    Column("user_id", String(128), nullable=False),
    Column("name", String(100), nullable=False),
    Column("position", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("user_id", "name", name="pk_calendars"),
)

events = Table(
    "events",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("title", String(200), nullable=False),
    Column("start_at", DateTime(timezone=True), nullable=False),
    Column("end_at", DateTime(timezone=True), nullable=False),
    Column("all_day", Boolean, nullable=False, server_default=text("false")),
    Column("calendar", String(100), nullable=False),
    Column("completed", Boolean, nullable=False, server_default=text("false")),
    Column("created_by_turn", String(64), nullable=True),
    Column("created_by_key", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # The zone the event was made in: a series keeps its wall-clock time across DST changes.
    Column("tz", String(64), nullable=True),
    # A series master carries its RFC 5545 rule; start/end are its first occurrence.
    Column("rrule", Text, nullable=True),
    Column("exdates", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    # An override of one occurrence (RECURRENCE-ID): its master and the start it replaces.
    Column("series_id", String(32), nullable=True),
    Column("recurrence_id", DateTime(timezone=True), nullable=True),
    Column("reminder_minutes", Integer, nullable=True),
    # Set when the connected CalDAV server refused this event's last delivery ('rejected').
    Column("sync_state", String(16), nullable=True),
    # The UID the event was born with (an override: its series'); place, notes (DESCRIPTION), URL.
    Column("uid", Text, nullable=True),
    Column("location", Text, nullable=True),
    Column("notes", Text, nullable=True),
    Column("url", Text, nullable=True),
    # The iCalendar object written back on a change (patched, not rebuilt), on the row that owns
    # it: the last version read from the connected calendar or written to it.
    Column("ical", Text, nullable=True),
    # The people invited (name, address, answer) and who invites them (an address); contract §16.
    Column("attendees", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("organizer", Text, nullable=True),
    # How the event holds its owner's time (contract §20): marked free (TRANSP:TRANSPARENT), not
    # yet certain (STATUS:TENTATIVE).
    Column("transparent", Boolean, nullable=False, server_default=text("false")),
    Column("tentative", Boolean, nullable=False, server_default=text("false")),
    # It arrived from a connected calendar the user does not own: its text is someone else's
    # words (contract §19).
    Column("foreign_calendar", Boolean, nullable=False, server_default=text("false")),
    # Its text reached a connected calendar other than through this system (`Event.outside_text`).
    Column("outside_text", Boolean, nullable=False, server_default=text("false")),
    # A block of this task (contract §21).
    Column("task_id", String(32), nullable=True),
    # An event may end when it starts (RFC 5545 §3.6.1: a timed VEVENT without DTEND or DURATION).
    CheckConstraint("end_at >= start_at", name="ck_events_end_not_before_start"),
    # A second guard behind the idempotency table: one command key never writes two events.
    UniqueConstraint("user_id", "created_by_key", name="uq_events_user_key"),
    Index("ix_events_user_start", "user_id", "start_at"),
    Index("ix_events_user_series", "user_id", "series_id"),
    Index("ix_events_user_rrule", "user_id", postgresql_where=text("rrule IS NOT NULL")),
    Index("ix_events_user_uid", "user_id", "uid"),
)

stubs = Table(
    "stubs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("title", String(200), nullable=False),
    Column("slots", JSONB, nullable=False),
    Column("status", String(16), nullable=False),
    Column("candidates", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("conflict_event_ids", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("hold_reason", String(32), nullable=True),
    Column("requested_hold", String(32), nullable=True),
    Column("confirmed", Boolean, nullable=False, server_default=text("false")),
    Column("proposed_start", DateTime(timezone=True), nullable=True),
    Column("proposed_end", DateTime(timezone=True), nullable=True),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("created_by_turn", String(64), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # What the stub will do once complete and confirmed: create an event, change one (update or
    # delete, held for confirmation), or offer an automation plan.
    Column("kind", String(16), nullable=False, server_default=text("'create'")),
    Column("change", JSONB, nullable=True),
    # `needs_attendee`: the name asked for and the contacts it matched (none, or several).
    Column("attendee_query", Text, nullable=True),
    Column("attendee_candidates", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    # Whom the confirmation will send invitations (or cancellations) to.
    Column("recipients", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    # An offer from outside waiting beside the conversation since then (contract §19): answerable
    # by its id, never the user's active stub, offered again once that one is settled.
    Column("waiting_since", DateTime(timezone=True), nullable=True),
    # The order stubs were opened in, whatever the clock said (a frozen clock gives them one time).
    Column("seq", BigInteger, Identity(), nullable=False),
    CheckConstraint(
        "status IN ('needs_date', 'needs_time', 'needs_attendee', 'conflict', 'held', 'created', "
        "'cancelled', 'expired', 'superseded', 'updated', 'deleted', 'planned')",
        name="ck_stubs_status",
    ),
    CheckConstraint(
        "kind IN ('create', 'change', 'plan', 'invitation', 'proposal', 'booking', 'replan', 'task_change')",
        name="ck_stubs_kind",
    ),
    # At most one active stub per user, enforced by the database as well as by the code.
    Index("uq_stubs_one_active", "user_id", unique=True, postgresql_where=text(OFFERED_SQL)),
    Index("ix_stubs_waiting", "user_id", "seq", postgresql_where=text("waiting_since IS NOT NULL")),
)

idempotency = Table(
    "idempotency",
    metadata,
    Column("user_id", String(128), nullable=False),
    Column("key", String(200), nullable=False),
    Column("result", JSONB(none_as_null=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("user_id", "key", name="pk_idempotency"),
)

feeds = Table(
    "feeds",
    metadata,
    Column("user_id", String(128), primary_key=True),
    # Only a hash of the secret is kept: the address itself is shown once, to its owner.
    Column("secret_hash", String(64), nullable=False, unique=True),
    Column("tz", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

plans = Table(
    "plans",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("trigger", Text, nullable=False),
    Column("steps", JSONB, nullable=False),
    Column("status", String(16), nullable=False),
    Column("stub_id", String(32), nullable=True),
    Column("created_by_key", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("status IN ('offered', 'confirmed', 'deleted')", name="ck_plans_status"),
    UniqueConstraint("user_id", "created_by_key", name="uq_plans_user_key"),
    Index("ix_plans_user", "user_id", "created_at"),
)

# ---- connected CalDAV accounts (contract §12) ---------------------------------------------------

caldav_accounts = Table(
    "caldav_accounts",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("url", Text, nullable=False),
    Column("username", Text, nullable=False),
    # The password as a Fernet token; the key lives outside the database.
    Column("secret", LargeBinary, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Inbound sync: the replica that holds the account until `lease_until` (one syncs it at a time).
    Column("lease_owner", String(64), nullable=True),
    Column("lease_until", DateTime(timezone=True), nullable=True),
    Column("last_synced_at", DateTime(timezone=True), nullable=True),
    # The last failure of a sync and of a delivery, in our words (never the server's), and when:
    # what `GET /v1/accounts` shows (contract §22). A later success of the same kind clears it.
    Column("sync_error", Text, nullable=True),
    Column("sync_error_at", DateTime(timezone=True), nullable=True),
    Column("delivery_error", Text, nullable=True),
    Column("delivery_error_at", DateTime(timezone=True), nullable=True),
    # How far the running (or the last) sync is: calendars read whole of all, events read so far
    # (caldav/progress.py; issue 44 item 9). Null before the first sync starts.
    Column("sync_calendars_done", Integer, nullable=True),
    Column("sync_calendars_total", Integer, nullable=True),
    Column("sync_events", Integer, nullable=True),
    Index("ix_caldav_accounts_user", "user_id", "created_at"),
)

caldav_calendars = Table(
    "caldav_calendars",
    metadata,
    Column(
        "account_id",
        String(32),
        ForeignKey("caldav_accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("url", Text, nullable=False),
    Column("name", String(100), nullable=False),
    Column("color", String(32), nullable=True),
    Column("position", Integer, nullable=False),
    Column("is_default", Boolean, nullable=False, server_default=text("false")),
    # The login's own calendar; False: someone else's, shared with the user (contract §19).
    Column("owned", Boolean, nullable=False, server_default=text("true")),
    # RFC 6578 sync token of the last inbound sync (None: not synced yet, or not offered).
    Column("sync_token", Text, nullable=True),
    # Events this calendar stopped showing that are kept here until the user answers the offer
    # naming them (a calendar that suddenly looks empty, an object gone under our write): see
    # caldav/withheld.py. None: nothing withheld.
    Column("withheld", JSONB, nullable=True),
    # The objects of this calendar a sync skipped or read only in part, with why (caldav/notes.py).
    Column("object_notes", JSONB, nullable=True),
    PrimaryKeyConstraint("account_id", "url", name="pk_caldav_calendars"),
)

# One calendar object resource on the server per local event or series (master and overrides), or
# per task (a VTODO; `event_id` names the task): where it lives, its UID and its last ETag.
caldav_resources = Table(
    "caldav_resources",
    metadata,
    Column("event_id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column(
        "account_id",
        String(32),
        ForeignKey("caldav_accounts.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("calendar_url", Text, nullable=False),
    Column("href", Text, nullable=False),
    Column("uid", Text, nullable=False),
    Column("etag", Text, nullable=True),
    # 'local': the assistant wrote it first; 'remote': it came from the account.
    Column("origin", String(8), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # Written by us since a listing last showed it: the next sync asks for it by name (a sync-token
    # listing names neither an object made after its token nor its removal before the next one).
    Column("unlisted", Boolean, nullable=False, server_default=text("false")),
    UniqueConstraint("account_id", "href", name="uq_caldav_resources_href"),
    CheckConstraint("origin IN ('local', 'remote')", name="ck_caldav_resources_origin"),
)

# The transactional outbox: a row per event (or series) a committed write touched, written in the
# same transaction. It names the resource, not the change: the worker sends the state the database
# holds when it delivers, so rows that pile up while the server is down collapse into one PUT.
caldav_outbox = Table(
    "caldav_outbox",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("event_id", String(32), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.clock_timestamp()),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    # The attempts the server answered with a failure (or our own code failed): bounded by
    # CALAGENT_CALDAV_MAX_ATTEMPTS, after which the delivery ends 'rejected'.
    Column("refusals", Integer, nullable=False, server_default=text("0")),
    Column("not_before", DateTime(timezone=True), nullable=False, server_default=func.clock_timestamp()),
    Column("delivered_at", DateTime(timezone=True), nullable=True),
    # 'delivered', 'rejected' (403 and the like: shown on the event), 'conflict' (412: the server's
    # version won, the assistant's change is offered again), 'dropped' (no account any more).
    Column("outcome", String(16), nullable=True),
    Column("last_error", Text, nullable=True),
    # When a 'rejected' or 'conflict' outcome was told to the user (in the next turn's receipt).
    Column("reported_at", DateTime(timezone=True), nullable=True),
    # W3C trace context of the write that committed it: its delivery is a span of the same trace.
    Column("trace_context", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    # What `event_id` names: an event or series ('event'), or a task kept as a VTODO ('task').
    Column("kind", String(8), nullable=False, server_default=text("'event'")),
    CheckConstraint("kind IN ('event', 'task')", name="ck_caldav_outbox_kind"),
    Index("ix_caldav_outbox_due", "not_before", postgresql_where=text("delivered_at IS NULL")),
    Index("ix_caldav_outbox_event", "event_id", postgresql_where=text("delivered_at IS NULL")),
    # A user's rows: notices for the next turn, a disconnect's leftovers.
    Index("ix_caldav_outbox_user", "user_id", "id"),
)

# The address books of connected accounts (CardDAV) with the change token read last, and their
# vCards as the user's read-only contacts (contract §16).
caldav_books = Table(
    "caldav_books",
    metadata,
    Column("account_id", String(32), ForeignKey("caldav_accounts.id", ondelete="CASCADE"), nullable=False),
    Column("url", Text, nullable=False),
    # DAV:sync-token, else CS:getctag: the same token again means the book did not change.
    Column("token", Text, nullable=True),
    PrimaryKeyConstraint("account_id", "url", name="pk_caldav_books"),
)

caldav_cards = Table(
    "caldav_cards",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("account_id", String(32), ForeignKey("caldav_accounts.id", ondelete="CASCADE"), nullable=False),
    Column("book_url", Text, nullable=False),
    Column("href", Text, nullable=False),
    Column("etag", Text, nullable=True),
    Column("name", String(200), nullable=False),
    # The address the card prefers (TYPE=pref, else its first); `emails` every address it has.
    Column("email", String(254), nullable=False),
    Column("emails", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("aliases", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("account_id", "href", name="uq_caldav_cards_href"),
    Index("ix_caldav_cards_user", "user_id", "created_at"),
)

# ---- the change log (contract §15) --------------------------------------------------------------
# Written by the `events` trigger of migration 0007c in the transaction of each change; the store
# only reads it, marks what an undo reverted, and names the change a command's writes belong to.

changes = Table(
    "changes",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("seq", BigInteger, Identity(), nullable=False, unique=True),
    Column("user_id", String(128), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("source", String(16), nullable=False),
    Column("turn_id", String(64), nullable=True),
    Column("scope", String(16), nullable=True),
    # The change this one reverted (an undo), and the undo that reverted this one.
    Column("undoes", String(32), nullable=True),
    Column("undone_by", String(32), nullable=True),
    CheckConstraint("source IN ('chat', 'api', 'sync')", name="ck_changes_source"),
    Index("ix_changes_user_seq", "user_id", "seq"),
    Index("ix_changes_user_turn", "user_id", "turn_id"),
)

change_rows = Table(
    "change_rows",
    metadata,
    Column("seq", BigInteger, Identity(), primary_key=True),
    Column("change_id", String(32), ForeignKey("changes.id", ondelete="CASCADE"), nullable=False),
    Column("event_id", String(32), nullable=False),
    # The whole stored row (`to_jsonb`) before and after; None: it did not exist.
    Column("before", JSONB(none_as_null=True), nullable=True),
    Column("after", JSONB(none_as_null=True), nullable=True),
    UniqueConstraint("change_id", "event_id", name="uq_change_rows_event"),
)

# ---- settings and sharing (contract §16) ----------------------------------------------------------
# A null column is the default: the token's zone, the deployment's working hours.

user_settings = Table(
    "user_settings",
    metadata,
    Column("user_id", String(128), primary_key=True),
    Column("tz", String(64), nullable=True),
    Column("email", String(254), nullable=True),
    Column("language", String(8), nullable=True),
    Column("work_hours", JSONB(none_as_null=True), nullable=True),
    Column("buffer_minutes", Integer, nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("invitations_from", String(8), nullable=True),
    CheckConstraint("invitations_from IN ('known', 'everyone')", name="ck_user_settings_invitations_from"),
)
# A contact's address is matched to a user without case (contract §16).
Index(
    "ix_user_settings_email",
    func.lower(user_settings.c.email),
    postgresql_where=user_settings.c.email.isnot(None),
)

# The owner lets `with_user_id` see when the owner is busy, and nothing more.
sharing = Table(
    "sharing",
    metadata,
    Column("owner_id", String(128), primary_key=True),
    Column("with_user_id", String(128), primary_key=True),
    Column("level", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("level IN ('freebusy')", name="ck_sharing_level"),
    CheckConstraint("owner_id <> with_user_id", name="ck_sharing_other"),
    Index("ix_sharing_with", "with_user_id"),
)

# The user's tasks, placed in free time as blocks (events whose task_id names them; contract §21).
tasks = Table(
    "tasks",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False),
    Column("title", String(200), nullable=False),
    Column("duration_minutes", Integer, nullable=False),
    Column("due", DateTime(timezone=True), nullable=True),
    Column("earliest", DateTime(timezone=True), nullable=True),
    Column("priority", SmallInteger, nullable=False),
    Column("chunk_minutes", Integer, nullable=False),
    Column("max_chunk_minutes", Integer, nullable=False),
    Column("hours", String(8), nullable=False),
    Column("status", String(8), nullable=False),
    Column("percent", SmallInteger, nullable=False),
    Column("completed_at", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # Its VTODO in the user's connected calendar (contract §21): the UID, the object as last read
    # or written (patched on the next change, not rebuilt), and a refused delivery ('rejected').
    Column("uid", Text, nullable=True),
    Column("ical", Text, nullable=True),
    Column("sync_state", String(16), nullable=True),
    CheckConstraint("status IN ('open', 'done')", name="ck_tasks_status"),
    CheckConstraint("hours IN ('work', 'personal')", name="ck_tasks_hours"),
    CheckConstraint("priority BETWEEN 1 AND 4", name="ck_tasks_priority"),
    CheckConstraint("percent BETWEEN 0 AND 100", name="ck_tasks_percent"),
    CheckConstraint("chunk_minutes <= max_chunk_minutes", name="ck_tasks_chunks"),
    Index("ix_tasks_user", "user_id", "status"),
)
