"""A change to a task, field by field (contract §21, §22): what `PATCH /v1/tasks/{id}` sets, and
what an edit made of the version it was edited from, to be made again on another version (the
server's, after both sides changed the task)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args

from calagent.contracts.tasks import TaskChangeOut, TaskField, TaskOut, TaskPatch

TASK_FIELDS: tuple[TaskField, ...] = get_args(TaskField)


def apply_patch(task: TaskOut, patch: TaskPatch, now: datetime) -> TaskOut:
    """`task` with the fields `patch` names set; `done` completes (or reopens) it at `now`."""
    # Over the wire an absent field arrives as null: null leaves a field as it is.
    changes: dict[str, Any] = patch.model_dump(exclude_none=True, exclude={"done"})
    if patch.done is True:
        changes.update(status="done", percent=100, completed_at=now)
    elif patch.done is False:
        changes.update(
            status="open", completed_at=None, percent=min(changes.get("percent", task.percent), 99)
        )
    return task.model_copy(update=changes)


def _same(field: TaskField, a: TaskOut, b: TaskOut) -> bool:
    if field == "done":
        return a.status == b.status
    if field == "due":
        # Instants as a task app shows them: a due read back from the server has no microseconds.
        return (a.due and a.due.replace(microsecond=0)) == (b.due and b.due.replace(microsecond=0))
    return bool(getattr(a, field) == getattr(b, field))


def patch_between(base: TaskOut | None, mine: TaskOut, theirs: TaskOut) -> TaskPatch:
    """What an edit of `base` made to give `mine`, as a patch: the fields it changed, with
    `mine`'s values. Without a base (an object never delivered), what `mine` says that `theirs`
    does not. A completion carries its percent with it (`done` sets it)."""
    since = base if base is not None else theirs
    asked = [name for name in TASK_FIELDS if not _same(name, mine, since)]
    values: dict[str, Any] = {}
    for name in asked:
        if name == "done":
            values["done"] = mine.status == "done"
        elif name == "percent" and "done" in asked:
            continue
        else:
            values[name] = getattr(mine, name)
    return TaskPatch.model_validate(values)


def patch_fields(patch: TaskPatch) -> tuple[TaskField, ...]:
    return tuple(name for name in TASK_FIELDS if getattr(patch, name) is not None)


def offered_change(theirs: TaskOut, patch: TaskPatch, now: datetime) -> TaskChangeOut | None:
    """Our change (`patch`) offered on the server's version (`theirs`): None when it asks for
    nothing the server's version does not already say."""
    after = apply_patch(theirs, patch, now)
    fields = tuple(name for name in patch_fields(patch) if not _same(name, after, theirs))
    if not fields:
        return None
    return TaskChangeOut(before=theirs, after=after, fields=fields)
