"""tasks placed in free time (contract §21)

`tasks` keeps each of the user's tasks: its title, how many minutes it needs, its due and earliest
instants, priority 1 (high) … 4, the shortest and longest piece it may be placed in, whose hours
it uses (work or personal), whether it is done, how far along and when it was completed. An event
may now be a block of a task (`events.task_id`); no row changes.

Revision ID: 0018k
Revises: 0017x
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018k"
down_revision: str | None = "0017x"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "commands"


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("duration_minutes", sa.Integer(), nullable=False),
        sa.Column("due", sa.DateTime(timezone=True), nullable=True),
        sa.Column("earliest", sa.DateTime(timezone=True), nullable=True),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("chunk_minutes", sa.Integer(), nullable=False),
        sa.Column("max_chunk_minutes", sa.Integer(), nullable=False),
        sa.Column("hours", sa.String(8), nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("percent", sa.SmallInteger(), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("status IN ('open', 'done')", name="ck_tasks_status"),
        sa.CheckConstraint("hours IN ('work', 'personal')", name="ck_tasks_hours"),
        sa.CheckConstraint("priority BETWEEN 1 AND 4", name="ck_tasks_priority"),
        sa.CheckConstraint("percent BETWEEN 0 AND 100", name="ck_tasks_percent"),
        sa.CheckConstraint("chunk_minutes <= max_chunk_minutes", name="ck_tasks_chunks"),
        schema=SCHEMA,
    )
    op.create_index("ix_tasks_user", "tasks", ["user_id", "status"], schema=SCHEMA)
    op.add_column("events", sa.Column("task_id", sa.String(32), nullable=True), schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("events", "task_id", schema=SCHEMA)
    op.drop_index("ix_tasks_user", "tasks", schema=SCHEMA)
    op.drop_table("tasks", schema=SCHEMA)
