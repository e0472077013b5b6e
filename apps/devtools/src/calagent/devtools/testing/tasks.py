"""A task as the services hand it out (contract §21), for tests of code that reads one: every
field named, each test changing only the fields its case is about."""

from __future__ import annotations

from datetime import datetime

from calagent.contracts.tasks import TaskOut

DUE = datetime.fromisoformat("2026-09-25T18:00:00+08:00")


def task_out(**changes: object) -> TaskOut:
    fields: dict[str, object] = {
        "id": "t1",
        "title": "季度报告",
        "duration_minutes": 240,
        "due": DUE,
        "earliest": None,
        "priority": 3,
        "chunk_minutes": 30,
        "max_chunk_minutes": 120,
        "hours": "work",
        "status": "open",
        "percent": 0,
        "completed_at": None,
    }
    fields.update(changes)
    return TaskOut.model_validate(fields)
