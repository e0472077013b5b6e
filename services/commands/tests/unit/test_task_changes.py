"""A change to a task field by field (contract §22): what an edit made of the version it was
edited from, made again on the server's version, and nothing else of ours."""

from __future__ import annotations

from datetime import datetime

import pytest

from calagent.commands.tasks.domain.changes import apply_patch, offered_change, patch_between
from calagent.contracts.tasks import TaskOut, TaskPatch
from calagent.devtools.testing.tasks import task_out

pytestmark = pytest.mark.unit

NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")


def task(**fields: object) -> TaskOut:
    return task_out(**{"title": "写周报", "duration_minutes": 60, **fields})


def test_only_the_fields_our_edit_made_land_on_the_servers_version() -> None:
    base, mine, theirs = task(), task(priority=1), task(title="写月报", duration_minutes=90)
    patch = patch_between(base, mine, theirs)
    assert patch == TaskPatch(priority=1)
    change = offered_change(theirs, patch, NOW)
    assert change is not None and change.after is not None
    assert change.fields == ("priority",)
    assert (change.after.title, change.after.duration_minutes, change.after.priority) == ("写月报", 90, 1)
    assert change.before == theirs


def test_a_completion_is_offered_as_done_with_its_percent() -> None:
    base = task(percent=40)
    mine = apply_patch(base, TaskPatch(done=True), NOW)
    patch = patch_between(base, mine, task(title="写月报", percent=40))
    assert patch == TaskPatch(done=True)
    change = offered_change(task(title="写月报", percent=40), patch, NOW)
    assert change is not None and change.after is not None and change.fields == ("done",)
    assert (change.after.status, change.after.percent, change.after.completed_at) == ("done", 100, NOW)


def test_a_change_the_server_already_says_is_not_offered() -> None:
    base, mine, theirs = task(), task(priority=1), task(priority=1, title="写月报")
    assert offered_change(theirs, patch_between(base, mine, theirs), NOW) is None


def test_without_a_base_what_ours_says_that_theirs_does_not() -> None:
    patch = patch_between(None, task(priority=1, title="写周报"), task(title="写月报"))
    assert patch == TaskPatch(title="写周报", priority=1)
