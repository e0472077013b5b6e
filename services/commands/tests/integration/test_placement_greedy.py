"""The kept task plan is never worse than greedy (contract §21), checked against a greedy written
here without `tasks.domain.placement` or `domain.freetime`.

A random week of meetings is created, then tasks are posted one by one, earliest due first, through
`POST /v1/tasks`'s path (the command service over NATS and PostgreSQL). What the service kept is
read back from its tables and checked by `check_valid`, a quarter-hour reading of working hours and
meetings: every block inside working hours, clear of every meeting and every other block, after now
and the task's earliest, ending by its due, within the task's chunk bounds, two blocks of one task
never touching. The minutes the service reports missing must be no more than `independent_greedy`
leaves unplaced over the same week: earliest due first, each task in its earliest quarter hours,
each chunk as long as its bounds and the room allow.

`make test` runs a short profile; CALAGENT_PLACEMENT_EXAMPLES=200 runs a long one."""

from __future__ import annotations

import itertools
import os
import uuid
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from calagent.contracts.tasks import ListTasks, SaveTask, TaskFields

from .conftest import NOW, System, envelope
from .test_commands_bus import create

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("CALAGENT_PLACEMENT_EXAMPLES", "10"))
TZ = ZoneInfo("Asia/Shanghai")
QUARTER = timedelta(minutes=15)
# The deployment's working hours (CALAGENT_WORKING_HOURS' default), Monday to Friday.
WORK = (time(9), time(18))
WORKDAYS = range(1, 6)
DAYS = 7  # from NOW (Thursday 10:00) to the next Wednesday


@dataclass(frozen=True)
class Meeting:
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Task:
    name: str
    minutes: int
    due: datetime
    earliest: datetime | None
    priority: int
    chunk_min: int
    chunk_max: int


@dataclass(frozen=True)
class Week:
    meetings: tuple[Meeting, ...]
    tasks: tuple[Task, ...]  # earliest due first, as they are posted


def day_start(day: int) -> datetime:
    return datetime.combine(NOW.astimezone(TZ).date() + timedelta(days=day), time(0), tzinfo=TZ)


@st.composite
def weeks(draw: st.DrawFn) -> Week:
    meetings: list[Meeting] = []
    for day in range(DAYS):
        cursor = max(day_start(day) + timedelta(hours=8), NOW)
        for _ in range(draw(st.integers(0, 5))):
            start = cursor + QUARTER * draw(st.integers(0, 12))
            end = start + QUARTER * draw(st.integers(1, 10))
            if end > day_start(day) + timedelta(hours=19):
                break
            meetings.append(Meeting(start, end))
            cursor = end + QUARTER  # meetings never meet, so none is a conflict to confirm
    tasks: list[Task] = []
    for i in range(draw(st.integers(3, 8))):
        due_day = draw(st.integers(0, DAYS - 1))
        due = day_start(due_day) + timedelta(hours=draw(st.sampled_from([12, 15, 18, 24])))
        if due <= NOW + timedelta(hours=2):
            due = NOW + timedelta(hours=2)
        earliest = draw(st.none() | st.integers(0, due_day).map(day_start))
        chunk_min = draw(st.sampled_from([15, 30, 60]))
        priority = draw(st.integers(1, 4))
        if any((t.due, t.priority) == (due, priority) for t in tasks):
            continue  # beyond due and priority, the order is the service's own (by id)
        tasks.append(
            Task(
                name=f"t{i}",
                minutes=15 * draw(st.integers(1, 32)),
                due=due,
                earliest=earliest,
                priority=priority,
                chunk_min=chunk_min,
                chunk_max=max(chunk_min, draw(st.sampled_from([30, 60, 90, 120, 240]))),
            )
        )
    tasks.sort(key=lambda t: (t.due, t.priority))
    return Week(meetings=tuple(meetings), tasks=tuple(tasks))


def week_of(meetings: list[tuple[int, str, str]], tasks: list[tuple[int, str, int, int, int]]) -> Week:
    """A week written out: meetings as (day from NOW, start, end), tasks as (minutes, due,
    priority, chunk_min, chunk_max), earliest due first."""

    def at(day: int, clock: str) -> datetime:
        return datetime.combine(day_start(day).date(), time.fromisoformat(clock), tzinfo=TZ)

    return Week(
        meetings=tuple(Meeting(at(day, a), at(day, b)) for day, a, b in meetings),
        tasks=tuple(
            Task(f"t{i}", minutes, datetime.fromisoformat(due), None, priority, low, high)
            for i, (minutes, due, priority, low, high) in enumerate(tasks)
        ),
    )


# Found on main at 7a36d1d: each task placed for itself took the room a later one needed. The
# 255-minute task due Saturday was placed whole (45 + 30 minutes at the end) where greedy leaves it
# 15 short; that took Friday 13:00, pushed the 75-minute task to 15:15 and left the 315-minute
# task 75 minutes shorter: 60 more minutes unplaced than greedy.
A_WEEK_WHERE_PLACING_ONE_BY_ONE_LOST_AN_HOUR = week_of(
    [
        (0, "12:00", "14:00"),
        (0, "14:30", "14:45"),
        (0, "15:45", "16:45"),
        (1, "08:00", "08:30"),
        (1, "10:30", "12:00"),
        (1, "14:15", "15:15"),
        (1, "16:30", "18:30"),
        (4, "08:30", "10:30"),
        (4, "11:30", "12:00"),
        (4, "13:45", "15:45"),
        (4, "16:30", "17:30"),
        (5, "09:30", "11:15"),
    ],
    [
        (270, "2026-09-24T12:00:00+08:00", 1, 30, 60),
        (75, "2026-09-24T15:00:00+08:00", 3, 30, 30),
        (15, "2026-09-26T12:00:00+08:00", 3, 30, 240),
        (255, "2026-09-26T15:00:00+08:00", 4, 30, 60),
        (30, "2026-09-28T00:00:00+08:00", 4, 60, 90),
        (75, "2026-09-28T18:00:00+08:00", 1, 60, 60),
        (315, "2026-09-29T00:00:00+08:00", 1, 60, 90),
        (90, "2026-09-29T12:00:00+08:00", 2, 30, 30),
    ],
)


# ---- the reference: quarter hours, read without the service's code ---------------------------------


def quarters(until: datetime) -> list[datetime]:
    """Every quarter hour from NOW up to `until`."""
    count = (until - NOW) // QUARTER
    return [NOW + QUARTER * i for i in range(count)]


def at_work(quarter: datetime) -> bool:
    local = quarter.astimezone(TZ)
    return local.isoweekday() in WORKDAYS and WORK[0] <= local.time() < WORK[1]


def in_meeting(quarter: datetime, week: Week) -> bool:
    return any(m.start < quarter + QUARTER and quarter < m.end for m in week.meetings)


def allowed(quarter: datetime, task: Task, week: Week) -> bool:
    """May `task` use the quarter hour starting at `quarter`, other tasks aside?"""
    return (
        at_work(quarter)
        and not in_meeting(quarter, week)
        and quarter + QUARTER <= task.due
        and (task.earliest is None or quarter >= task.earliest)
    )


def independent_greedy(week: Week) -> int:
    """The minutes left unplaced when each task, earliest due first, takes its earliest free
    quarter hours in chunks as long as its bounds and the room allow, one quarter hour between
    two chunks of its own."""
    taken: set[datetime] = set()
    unplaced = 0
    for task in sorted(week.tasks, key=lambda t: (t.due, t.priority)):
        left = task.minutes
        shortest = min(task.chunk_min, task.minutes)
        free = [q for q in quarters(task.due) if allowed(q, task, week) and q not in taken]
        previous_end: datetime | None = None
        i = 0
        while i < len(free) and left > 0:
            run = [free[i]]
            while (
                i + len(run) < len(free)
                and free[i + len(run)] == run[-1] + QUARTER
                and 15 * len(run) < min(left, task.chunk_max)
            ):
                run.append(free[i + len(run)])
            if run[0] != previous_end and 15 * len(run) >= shortest:
                taken.update(run)
                left -= 15 * len(run)
                previous_end = run[-1] + QUARTER
                i += len(run)
            else:
                i += 1
        unplaced += left
    return unplaced


def check_valid(week: Week, blocks: dict[str, list[tuple[datetime, datetime]]]) -> None:
    """Every block where §21 lets it be (quarter hour by quarter hour)."""
    used: set[datetime] = set()
    for task in week.tasks:
        own = sorted(blocks.get(task.name, []))
        for start, end in own:
            length = (end - start) // timedelta(minutes=1)
            assert min(task.chunk_min, task.minutes) <= length <= task.chunk_max, (task, start, end)
            assert start >= NOW and (end - start) % QUARTER == timedelta(0), (task, start, end)
            quarter = start
            while quarter < end:
                assert allowed(quarter, task, week), (task, quarter)
                assert quarter not in used, (task, quarter)
                used.add(quarter)
                quarter += QUARTER
        assert all(e < s for (_, e), (s, _) in itertools.pairwise(own)), (task, own)
        assert sum((e - s) // timedelta(minutes=1) for s, e in own) <= task.minutes, (task, own)


# ---- the service ----------------------------------------------------------------------------------


async def post_week(system: System, user: str, week: Week) -> dict[str, str]:
    """The meetings created, then the tasks posted one by one; the task ids by name."""
    for meeting in week.meetings:
        day = (meeting.start.astimezone(TZ).date() - NOW.astimezone(TZ).date()).days
        made = await system.execute(
            create(
                user,
                title="会议",
                date=f"D+{day}",
                time=meeting.start.astimezone(TZ).strftime("%H:%M"),
                end_time=meeting.end.astimezone(TZ).strftime("%H:%M"),
            )
        )
        assert made.status == "created", made
    ids: dict[str, str] = {}
    for task in week.tasks:
        fields = TaskFields(
            title=task.name,
            duration_minutes=task.minutes,
            due=task.due,
            earliest=task.earliest,
            priority=task.priority,
            chunk_minutes=task.chunk_min,
            max_chunk_minutes=task.chunk_max,
        )
        saved = await system.query(SaveTask(envelope=envelope(user), op="create", fields=fields))
        assert saved.error is None, saved
        [out] = saved.tasks
        ids[out.id] = task.name
    return ids


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(week=A_WEEK_WHERE_PLACING_ONE_BY_ONE_LOST_AN_HOUR)
@given(week=weeks())
async def test_tasks_posted_earliest_due_first_leave_no_more_unplaced_than_an_independent_greedy(
    system: System, week: Week
) -> None:
    user = f"u-{uuid.uuid4().hex[:10]}"
    names = await post_week(system, user, week)
    rows = await system.rows(
        "SELECT task_id, start_at, end_at FROM commands.events WHERE user_id = :u AND task_id IS NOT NULL",
        u=user,
    )
    blocks: dict[str, list[tuple[datetime, datetime]]] = {}
    for row in rows:
        blocks.setdefault(names[row.task_id], []).append((row.start_at, row.end_at))
    check_valid(week, blocks)
    listed = await system.query(ListTasks(envelope=envelope(user), incomplete_only=True))
    missing = sum(t.missing_minutes or 0 for t in listed.tasks)
    placed = sum((e - s) // timedelta(minutes=1) for spans in blocks.values() for s, e in spans)
    assert missing == sum(t.minutes for t in week.tasks) - placed
    assert missing <= independent_greedy(week), (missing, independent_greedy(week))
