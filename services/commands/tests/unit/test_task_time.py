"""How tasks lie in the user's time (contract §21), on values whose answer can be seen by hand:
the minutes a task still misses, the time placing one task may use, a due with and without its
time, and a re-plan told as each block's old and new time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from calagent.commands.domain.model import Event
from calagent.commands.tasks.domain.placement import Block
from calagent.commands.tasks.service import due_instant
from calagent.commands.tasks.time import Layout, moves_between
from calagent.contracts.tasks import TaskOut

pytestmark = pytest.mark.unit

SH = ZoneInfo("Asia/Shanghai")
MONDAY = datetime(2026, 9, 21, 0, 0, tzinfo=UTC)


def at(hour: int, minute: int = 0) -> datetime:
    return MONDAY + timedelta(hours=hour, minutes=minute)


def task(tid: str = "t1", minutes: int = 120, due: datetime | None = None, percent: int = 0) -> TaskOut:
    return TaskOut(
        id=tid,
        title=f"task {tid}",
        duration_minutes=minutes,
        due=due,
        earliest=None,
        priority=3,
        chunk_minutes=30,
        max_chunk_minutes=120,
        hours="work",
        status="open",
        percent=percent,
        completed_at=None,
    )


def block(bid: str, start: datetime, end: datetime, tid: str = "t1") -> Event:
    return Event(id=bid, user_id="u", title="b", start=start, end=end, calendar="工作", task_id=tid)


def layout(
    blocks: list[Event], busy: Sequence[tuple[datetime, datetime]] = (), begun: dict[str, int] | None = None
) -> Layout:
    return Layout(
        now=at(1),
        end=at(48),
        free={"work": ((at(1), at(9)),), "personal": ()},
        busy=tuple(busy),
        blocks=tuple(blocks),
        begun=begun or {},
    )


def test_a_task_misses_what_its_blocks_clear_of_busy_time_do_not_hold() -> None:
    blocks = [block("a", at(1), at(2)), block("b", at(3), at(4))]
    assert layout(blocks).missing(task()) == 0
    # A meeting over one block (a re-plan refused): that block's hour is missing.
    assert layout(blocks, busy=[(at(3, 30), at(4, 30))]).missing(task()) == 60
    # Time already spent in blocks begun before now, and the percent done, count as done.
    assert layout([block("a", at(1), at(2))], begun={"t1": 60}).missing(task()) == 0
    assert layout([], begun={}).missing(task(percent=50)) == 60


def test_a_due_day_without_a_time_is_due_by_its_end() -> None:
    friday = date(2026, 9, 25)
    assert due_instant(friday, None, SH) == datetime(2026, 9, 26, 0, 0, tzinfo=SH)
    assert due_instant(friday, "18:00", SH) == datetime(2026, 9, 25, 18, 0, tzinfo=SH)


def test_a_replan_is_told_as_each_blocks_old_and_new_time() -> None:
    before = [block("a", at(1), at(2)), block("b", at(3), at(4)), block("c", at(5), at(6), tid="t2")]
    after = [Block("t1", at(1), at(2)), Block("t1", at(7), at(8)), Block("t2", at(5), at(5, 30))]
    moves = moves_between(before, after, {"t1": "报告", "t2": "预算"})
    told = [(m.task_id, m.block_id, m.old_start, m.new_start, m.new_end) for m in moves]
    assert told == [("t1", "b", at(3), at(7), at(8)), ("t2", "c", at(5), at(5), at(5, 30))]
    # A block with nowhere to go is removed; a new piece has no old time.
    gone = moves_between([block("a", at(1), at(2))], [], {"t1": "报告"})
    assert [(m.block_id, m.new_start) for m in gone] == [("a", None)]
    added = moves_between([], [Block("t1", at(7), at(8))], {"t1": "报告"})
    assert [(m.block_id, m.old_start, m.new_start) for m in added] == [(None, None, at(7))]
