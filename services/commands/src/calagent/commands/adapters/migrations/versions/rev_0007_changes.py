"""changes: every committed change to a user's events, with the rows before and after

`changes` holds one row per change (one command, or one resource of a sync), `change_rows` the
rows it touched, each as the whole stored row before and after (`to_jsonb`: UID, object, people,
everything an undo must give back). A trigger on `events` writes both in the transaction of the
change itself, whichever path wrote it: a command sets `calagent.change` (id, source, turn, scope,
the change it undoes) for its transaction; a write without it (the CalDAV sync, a disconnect) is
a change of source `sync`, one per resource. A row written back to what it was before within the
same transaction, or one whose only difference is bookkeeping (the object text, timestamps,
delivery state), is pruned at commit by a deferred trigger, and a change left without rows with it.

Revision ID: 0007c
Revises: 0006p
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007c"
down_revision: str | None = "0006p"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"
# The ARRAY[...] below lists the columns that say how a row was kept, not what the event is: a
# difference in them alone is no change the user made or can take back (the same list as
# `domain.changelog.BOOKKEEPING`).

LOG_FUNCTION = """
CREATE FUNCTION commands.log_event_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    ctx jsonb := nullif(current_setting('calagent.change', true), '')::jsonb;
    before_row jsonb;
    after_row jsonb;
    subject jsonb;
    change text;
BEGIN
    IF TG_OP <> 'INSERT' THEN before_row := to_jsonb(OLD); END IF;
    IF TG_OP <> 'DELETE' THEN after_row := to_jsonb(NEW); END IF;
    IF TG_OP = 'UPDATE' AND (before_row - ARRAY['ical', 'updated_at', 'created_at', 'sync_state', 'created_by_turn', 'created_by_key']) = (after_row - ARRAY['ical', 'updated_at', 'created_at', 'sync_state', 'created_by_turn', 'created_by_key']) THEN
        RETURN NULL;
    END IF;
    subject := coalesce(after_row, before_row);
    IF ctx IS NULL THEN
        change := md5(txid_current()::text || ':' || coalesce(subject->>'series_id', subject->>'id'));
    ELSE
        change := ctx->>'id';
    END IF;
    INSERT INTO commands.changes (id, user_id, source, turn_id, scope, undoes, at)
    VALUES (
        change, subject->>'user_id', coalesce(ctx->>'source', 'sync'), ctx->>'turn_id',
        ctx->>'scope', ctx->>'undoes', coalesce((ctx->>'at')::timestamptz, now())
    )
    ON CONFLICT (id) DO NOTHING;
    INSERT INTO commands.change_rows (change_id, event_id, before, after)
    VALUES (change, subject->>'id', before_row, after_row)
    ON CONFLICT (change_id, event_id) DO UPDATE SET after = EXCLUDED.after;
    RETURN NULL;
END
$fn$
"""

PRUNE_FUNCTION = """
CREATE FUNCTION commands.prune_change_row() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM commands.change_rows r
    WHERE r.seq = NEW.seq
      AND (r.before - ARRAY['ical', 'updated_at', 'created_at', 'sync_state', 'created_by_turn', 'created_by_key']) IS NOT DISTINCT FROM (r.after - ARRAY['ical', 'updated_at', 'created_at', 'sync_state', 'created_by_turn', 'created_by_key']);
    IF FOUND THEN
        DELETE FROM commands.changes c
        WHERE c.id = NEW.change_id
          AND NOT EXISTS (SELECT 1 FROM commands.change_rows r WHERE r.change_id = c.id);
    END IF;
    RETURN NULL;
END
$fn$
"""


def upgrade() -> None:
    op.create_table(
        "changes",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("seq", sa.BigInteger(), sa.Identity(), nullable=False, unique=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("turn_id", sa.String(64), nullable=True),
        sa.Column("scope", sa.String(16), nullable=True),
        sa.Column("undoes", sa.String(32), nullable=True),
        sa.Column("undone_by", sa.String(32), nullable=True),
        sa.CheckConstraint("source IN ('chat', 'api', 'sync')", name="ck_changes_source"),
        schema=SCHEMA,
    )
    op.create_index("ix_changes_user_seq", "changes", ["user_id", "seq"], schema=SCHEMA)
    op.create_index("ix_changes_user_turn", "changes", ["user_id", "turn_id"], schema=SCHEMA)
    op.create_table(
        "change_rows",
        sa.Column("seq", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column(
            "change_id",
            sa.String(32),
            sa.ForeignKey(f"{SCHEMA}.changes.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("event_id", sa.String(32), nullable=False),
        sa.Column("before", postgresql.JSONB(), nullable=True),
        sa.Column("after", postgresql.JSONB(), nullable=True),
        sa.UniqueConstraint("change_id", "event_id", name="uq_change_rows_event"),
        schema=SCHEMA,
    )
    op.execute(LOG_FUNCTION)
    op.execute(PRUNE_FUNCTION)
    op.execute(
        f"CREATE TRIGGER events_change_log AFTER INSERT OR UPDATE OR DELETE ON {SCHEMA}.events "
        f"FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.log_event_change()"
    )
    op.execute(
        f"CREATE CONSTRAINT TRIGGER change_rows_prune AFTER INSERT ON {SCHEMA}.change_rows "
        f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.prune_change_row()"
    )


def downgrade() -> None:
    op.execute(f"DROP TRIGGER IF EXISTS change_rows_prune ON {SCHEMA}.change_rows")
    op.execute(f"DROP TRIGGER IF EXISTS events_change_log ON {SCHEMA}.events")
    op.drop_table("change_rows", schema=SCHEMA)
    op.drop_table("changes", schema=SCHEMA)
    op.execute(f"DROP FUNCTION IF EXISTS {SCHEMA}.prune_change_row()")
    op.execute(f"DROP FUNCTION IF EXISTS {SCHEMA}.log_event_change()")
