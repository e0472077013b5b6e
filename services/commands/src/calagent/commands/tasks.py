"""The user's tasks (contract §21): kept, changed and removed on `/v1/tasks` (the query path's
writes, like deleting a plan), and read with how each open one fares when placed in the user's
free time: a task whose minutes do not all fit before its due is `at_risk` by the minutes missing.

Placing is `domain.placement`'s (greedy, then CP-SAT within `CALAGENT_PLAN_BUDGET_S`); free time is
the user's working hours (their settings; personal tasks: `DEFAULT_PERSONAL_WEEK`) minus what
their events keep busy (`freetime`). Blocks are not written yet: this reads how a plan would fare."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from calagent.commands.config import CommandConfig
from calagent.commands.domain.freetime import person_of
from calagent.commands.domain.placement import DEFAULT_PERSONAL_WEEK, Problem, TaskSpec, free_windows, plan
from calagent.commands.domain.settings import StoredSettings
from calagent.commands.ports import Store, UnitOfWork
from calagent.commands.queries import query_error
from calagent.commands.reads import events_in
from calagent.commands.txn import new_id
from calagent.contracts.queries import QueryResult
from calagent.contracts.tasks import ListTasks, SaveTask, TaskOut
from calagent.runtime.clock import Clock

# How far ahead a task with no due is placed, and the furthest any plan looks.
UNDATED_HORIZON = timedelta(days=28)
LONGEST_HORIZON = timedelta(days=92)
NOT_FOUND = "no task with that id"


def spec_of(task: TaskOut) -> TaskSpec:
    left = round(task.duration_minutes * (100 - task.percent) / 100)
    return TaskSpec(
        id=task.id,
        minutes=left,
        due=task.due,
        earliest=task.earliest,
        priority=task.priority,
        chunk_min=task.chunk_minutes,
        chunk_max=task.max_chunk_minutes,
        hours=task.hours,
    )


class Tasks:
    def __init__(self, store: Store, config: CommandConfig, clock: Clock) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self.budget_s = config.plan_budget_s

    async def problem(self, uow: UnitOfWork, user_id: str, tasks: list[TaskOut], tz: ZoneInfo) -> Problem:
        now = self.clock.now()
        dues = [t.due for t in tasks if t.due is not None]
        end = max([now + UNDATED_HORIZON, *dues])
        end = min(end, now + LONGEST_HORIZON)
        saved = (await uow.settings.settings_of([user_id])).get(user_id, StoredSettings())
        events = await events_in(uow, user_id, now, end, incomplete_only=True)
        weeks = {"work": saved.week(self.config.working_hours), "personal": DEFAULT_PERSONAL_WEEK}
        free = {
            kind: tuple(
                free_windows(person_of(events, tz=tz, week=week).busy, tz=tz, week=week, start=now, end=end)
            )
            for kind, week in weeks.items()
        }
        return Problem(tasks=tuple(spec_of(t) for t in tasks), free=free, start=now, end=end)

    async def with_risk(
        self, uow: UnitOfWork, user_id: str, tasks: list[TaskOut], tz: ZoneInfo
    ) -> list[TaskOut]:
        open_ = [t for t in tasks if t.status == "open"]
        if not open_:
            return tasks
        placed = plan(await self.problem(uow, user_id, open_, tz), self.budget_s)
        return [
            t.model_copy(update={"at_risk": True, "missing_minutes": placed.missing[t.id]})
            if t.id in placed.missing
            else t
            for t in tasks
        ]

    async def list_tasks(self, query: ListTasks, tz: ZoneInfo) -> QueryResult:
        user_id = query.envelope.user_id
        async with self.store.unit_of_work() as uow:
            found = await uow.tasks.list_tasks(user_id, open_only=query.incomplete_only)
            return QueryResult(tasks=tuple(await self.with_risk(uow, user_id, found, tz)), db_ms=uow.db_ms)

    async def save_task(self, query: SaveTask, tz: ZoneInfo) -> QueryResult:
        user_id = query.envelope.user_id
        now = self.clock.now()
        async with self.store.unit_of_work() as uow:
            if query.op == "create":
                if query.fields is None:
                    return query_error("invalid_arguments", "a new task needs its fields")
                task = TaskOut(
                    id=new_id(),
                    **query.fields.model_dump(),
                    status="open",
                    percent=0,
                    completed_at=None,
                )
                await uow.tasks.insert_task(user_id, task, now)
            else:
                current = {t.id: t for t in await uow.tasks.list_tasks(user_id)}.get(query.task_id or "")
                if current is None:
                    return query_error("not_found", NOT_FOUND)
                if query.op == "delete":
                    await uow.tasks.delete_task(user_id, current.id)
                    await uow.commit()
                    return QueryResult(deleted=True, db_ms=uow.db_ms)
                task = patched(current, query, now)
                await uow.tasks.update_task(user_id, task, now)
            [shown] = await self.with_risk(uow, user_id, [task], tz)
            await uow.commit()
            return QueryResult(tasks=(shown,), db_ms=uow.db_ms)


def patched(task: TaskOut, query: SaveTask, now: datetime) -> TaskOut:
    patch = query.patch
    if patch is None:
        return task
    # Over the wire an absent field arrives as null: null leaves a field as it is.
    changes = patch.model_dump(exclude_none=True, exclude={"done"})
    if patch.done is True:
        changes.update(status="done", percent=100, completed_at=now)
    elif patch.done is False:
        changes.update(
            status="open", completed_at=None, percent=min(changes.get("percent", task.percent), 99)
        )
    return task.model_copy(update=changes)
