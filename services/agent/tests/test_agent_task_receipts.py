"""Receipts of tasks (contract §21), written by code from the result: where a task's blocks went,
the minutes a task misses before its due, a held re-plan's blocks with their old and new times,
and open tasks in a read of what is not done."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest
from pydantic import ValidationError

from calagent.agent.domain.reads import query_receipt
from calagent.agent.domain.receipts import command_receipt, sync_notice_lines
from calagent.agent.domain.view import View
from calagent.contracts.commands import CommandResult, EventOut, LoggedChangeOut, StubOut, StubSlots
from calagent.contracts.queries import QueryResult, SyncNotice
from calagent.contracts.tasks import BlockMove, ReplanOut, TaskChangeOut, TaskOut
from calagent.devtools.testing.tasks import task_out

pytestmark = pytest.mark.unit

ZH = View("Asia/Shanghai", "zh", date(2026, 9, 24))
EN = View("Asia/Shanghai", "en", date(2026, 9, 24))
TEN = datetime.fromisoformat("2026-09-24T10:00:00+08:00")


def task(**fields: object) -> TaskOut:
    return task_out(**fields)


def block(start: datetime, hours: int) -> EventOut:
    return EventOut(
        id="b",
        title="季度报告",
        start=start,
        end=start + timedelta(hours=hours),
        calendar="工作",
        weekday=start.isoweekday(),
        tz="Asia/Shanghai",
        kind="task_block",
        task_id="t1",
    )


def block_move(title: str, old: datetime, new: datetime, hours: int) -> BlockMove:
    """A block of `hours` moved from `old` to `new`."""
    length = timedelta(hours=hours)
    return BlockMove(
        task_id="t1",
        title=title,
        block_id="b",
        old_start=old,
        old_end=old + length,
        new_start=new,
        new_end=new + length,
    )


def test_an_added_task_names_each_block_and_what_misses_its_due() -> None:
    placed = CommandResult(status="created", persisted=True, task=task(), blocks=(block(TEN, 2),))
    assert "10:00" in command_receipt(placed, ZH) and "12:00" in command_receipt(placed, ZH)
    short = task(at_risk=True, missing_minutes=180)
    text = command_receipt(CommandResult(status="created", persisted=True, task=short), ZH)
    assert "3 小时" in text
    assert "3 h" in command_receipt(CommandResult(status="created", persisted=True, task=short), EN)


def test_an_added_task_that_moved_another_tasks_block_names_it_with_its_old_and_new_time() -> None:
    # Contract §21: placing the new task moved "周报" from Thursday 10:00 to Friday 11:00.
    moved = block_move("周报", TEN, TEN + timedelta(days=1, hours=1), hours=1)
    placed = CommandResult(
        status="created", persisted=True, task=task(), blocks=(block(TEN, 1),), moved_blocks=(moved,)
    )
    zh, en = command_receipt(placed, ZH), command_receipt(placed, EN)
    assert "「周报」周四 9月24日 10:00–11:00 → 周五 9月25日 11:00–12:00" in zh, zh
    assert '"周报" Thu Sep 24 10:00–11:00 → Fri Sep 25 11:00–12:00' in en, en
    # Seen from another zone, the same block in that zone's hours (02:00 UTC is 10:00 in Shanghai).
    utc = command_receipt(placed, View("UTC", "en", date(2026, 9, 24)))
    assert "Thu Sep 24 02:00–03:00 → Fri Sep 25 03:00–04:00" in utc, utc


def test_a_held_replan_lists_each_blocks_old_and_new_time() -> None:
    move = block_move("季度报告", TEN, TEN + timedelta(hours=5), hours=2)
    stub = StubOut(
        id="s1",
        status="held",
        title="季度报告",
        slots=StubSlots(),
        expires_at=TEN,
        kind="replan",
        hold_reason="task_replan",
        replan=ReplanOut(moves=(move,)),
    )
    text = command_receipt(CommandResult(status="held", stub=stub), ZH)
    for clock in ("10:00", "12:00", "15:00", "17:00"):
        assert clock in text, text
    meeting = EventOut(
        id="e",
        title="开会",
        start=TEN,
        end=TEN + timedelta(hours=1),
        calendar="工作",
        weekday=4,
        tz="Asia/Shanghai",
    )
    created = command_receipt(CommandResult(status="created", persisted=True, event=meeting, replan=stub), EN)
    assert "15:00" in created and "开会" in created
    # An undo that brings the meeting back onto the block offers the same re-plan with its receipt.
    undid = LoggedChangeOut(id="c1", at=TEN, source="chat", kind="deleted", event_id="e")
    back = CommandResult(status="created", persisted=True, event=meeting, undid=undid, replan=stub)
    for view in (ZH, EN):
        text = command_receipt(back, view)
        assert "开会" in text and all(clock in text for clock in ("10:00", "12:00", "15:00", "17:00")), text


def test_our_removal_of_a_task_offered_again_names_the_task_held_and_removed() -> None:
    stub = StubOut(
        id="s1",
        status="held",
        title="季度报告",
        slots=StubSlots(),
        expires_at=TEN,
        kind="task_change",
        hold_reason="sync_conflict",
        task_change=TaskChangeOut(before=task(title="季度总结"), after=None),
    )
    for view in (ZH, EN):
        held = command_receipt(CommandResult(status="held", stub=stub), view)
        done = command_receipt(CommandResult(status="deleted", persisted=True, stub=stub), view)
        assert "季度总结" in held and "季度总结" in done and held != done


def test_a_read_of_what_is_not_done_lists_open_tasks_and_their_shortfall() -> None:
    result = QueryResult(
        range_start=TEN, range_end=TEN + timedelta(days=1), tasks=(task(at_risk=True, missing_minutes=90),)
    )
    text = query_receipt(result, ZH)
    assert "季度报告" in text and "1 小时 30 分钟" in text


def test_a_task_the_calendar_did_not_take_is_told_beside_an_event() -> None:
    notices = [
        SyncNotice(outcome="conflict", task=task(title="写月报")),
        SyncNotice(outcome="rejected", event=block(TEN, 1)),
        SyncNotice(outcome="rejected", task=task(title="交电费")),
    ]
    for view in (ZH, EN):
        lines = sync_notice_lines(notices, view).split("\n")
        assert len(lines) == 3
        assert "写月报" in lines[0] and "季度报告" in lines[1] and "交电费" in lines[2]
    with pytest.raises(ValidationError):
        SyncNotice(outcome="conflict")
    with pytest.raises(ValidationError):
        SyncNotice(outcome="conflict", task=task(), event=block(TEN, 1))
