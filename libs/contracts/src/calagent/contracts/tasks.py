"""Tasks placed in free time (contract §21): what a client sends and reads on `/v1/tasks`, and the
queries that carry them to the commands service (`calagent.command.query`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from calagent.contracts.base import WireModel
from calagent.contracts.envelope import Envelope
from calagent.contracts.text import refuse_unstorable

TaskHours = Literal["work", "personal"]
TaskStatus = Literal["open", "done"]
# A task is placed in whole quarter hours; a day's work is the longest piece a task may be.
TASK_MINUTES_MAX = 100 * 60
CHUNK_MINUTES_DEFAULT = 30
MAX_CHUNK_MINUTES_DEFAULT = 120
# A title is stored and sent as it is typed: a NUL or a lone surrogate is refused where it enters.
TaskTitle = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(refuse_unstorable)]


class TaskFields(WireModel):
    """A task as the user asks for it (`POST /v1/tasks`). `due`: the instant it must be done by
    (none: whenever); `earliest`: not before."""

    title: TaskTitle
    duration_minutes: int = Field(ge=1, le=TASK_MINUTES_MAX)
    due: datetime | None = None
    earliest: datetime | None = None
    priority: int = Field(default=3, ge=1, le=4)
    chunk_minutes: int = Field(default=CHUNK_MINUTES_DEFAULT, ge=15, le=8 * 60)
    max_chunk_minutes: int = Field(default=MAX_CHUNK_MINUTES_DEFAULT, ge=15, le=8 * 60)
    hours: TaskHours = "work"

    @model_validator(mode="after")
    def _bounds(self) -> TaskFields:
        if self.max_chunk_minutes < self.chunk_minutes:
            raise ValueError("max_chunk_minutes must be at least chunk_minutes")
        if self.due is not None and self.due.tzinfo is None:
            raise ValueError("due must carry its UTC offset")
        if self.earliest is not None and self.earliest.tzinfo is None:
            raise ValueError("earliest must carry its UTC offset")
        if self.due is not None and self.earliest is not None and self.due <= self.earliest:
            raise ValueError("due must be after earliest")
        return self


class TaskPatch(WireModel):
    """`PATCH /v1/tasks/{id}`: the fields named change; `done` completes (or reopens) the task."""

    title: TaskTitle | None = None
    duration_minutes: int | None = Field(default=None, ge=1, le=TASK_MINUTES_MAX)
    due: datetime | None = None
    priority: int | None = Field(default=None, ge=1, le=4)
    percent: int | None = Field(default=None, ge=0, le=100)
    done: bool | None = None


class TaskOut(WireModel):
    id: str
    title: str
    duration_minutes: int
    due: datetime | None
    earliest: datetime | None
    priority: int
    chunk_minutes: int
    max_chunk_minutes: int
    hours: TaskHours
    status: TaskStatus
    percent: int
    completed_at: datetime | None
    # An open task whose minutes do not all fit before its due (contract §21), and by how much.
    at_risk: bool = False
    missing_minutes: int = 0


class BlockMove(WireModel):
    """One block of a re-plan offered (contract §21): where it is, and where it would go (None: it
    finds no place before its due and would be removed; `block_id` None: a new block)."""

    task_id: str
    title: str
    block_id: str | None
    old_start: datetime | None
    old_end: datetime | None
    new_start: datetime | None
    new_end: datetime | None


class ReplanOut(WireModel):
    """A re-plan of task blocks held for the user's word: each block's old and new time, and the
    tasks that would still miss minutes before their due."""

    moves: tuple[BlockMove, ...]
    missing: tuple[tuple[str, int], ...] = ()


# The fields of a task a change names (`TaskPatch`'s), one by one.
TaskField = Literal["title", "duration_minutes", "due", "priority", "percent", "done"]


class TaskChangeOut(WireModel):
    """A change to a task offered again after the connected calendar changed the task too
    (contract §22): the task as the server has it now (`before`), as it would be with our change
    (`after`), and the fields our change made — confirming applies only those, on top of `before`.
    A removal of ours is offered with `after` None and no fields: confirming removes the task."""

    before: TaskOut
    after: TaskOut | None
    fields: tuple[TaskField, ...] = ()


class ListTasks(WireModel):
    kind: Literal["tasks"] = "tasks"
    envelope: Envelope
    incomplete_only: bool = False


class SaveTask(WireModel):
    """Create, change or delete one of the caller's tasks (the query path's writes, like
    `DeletePlan`): `create` with `fields`, `patch` with `task_id` and `patch`, `delete` with
    `task_id`."""

    kind: Literal["save_task"] = "save_task"
    envelope: Envelope
    op: Literal["create", "patch", "delete"]
    task_id: str | None = Field(default=None, max_length=64)
    fields: TaskFields | None = None
    patch: TaskPatch | None = None
