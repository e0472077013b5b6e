"""Tasks over the bus with PostgreSQL (contract §21): `add_task` resolves its date symbols through
the time service and places the task as blocks; a read of what is not done carries the open tasks;
`complete_task` frees the blocks not yet begun; another user's task is not found."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import datetime, timedelta

import pytest

from calagent.contracts import wire
from calagent.contracts.commands import (
    AddTaskCommand,
    CompleteTaskCommand,
    PrepareChange,
    ProposeTimesCommand,
    RevertChange,
)
from calagent.contracts.people import PeopleRequest, ReceiveMail
from calagent.contracts.queries import QueryRange, QueryResult
from calagent.contracts.tasks import BlockMove, SaveTask, TaskFields, TaskOut
from calagent.contracts.tools import AddTask, ProposeTimes, UpdateSchedule

from .conftest import NOW, System, envelope
from .test_commands_bus import create, merge

pytestmark = pytest.mark.integration

FRIDAY_NOON = datetime.fromisoformat("2026-09-25T12:00:00+08:00")


def key() -> str:
    return uuid.uuid4().hex


async def test_a_task_is_added_placed_read_as_open_and_completed(system: System, user: str) -> None:
    args = AddTask(title="季度报告", duration_minutes=180, due="D+1", due_time="12:00", max_chunk_minutes=90)
    added = await system.execute(AddTaskCommand(envelope=envelope(user), idempotency_key=key(), args=args))
    assert (added.status, added.persisted) == ("created", True), added
    assert added.task is not None and added.task.due == FRIDAY_NOON and not added.task.at_risk
    assert [b.task_id for b in added.blocks] == [added.task.id, added.task.id]
    assert all(b.kind == "task_block" and b.start >= NOW and b.end <= FRIDAY_NOON for b in added.blocks)
    assert sum((b.end - b.start).total_seconds() for b in added.blocks) == 180 * 60

    def read(incomplete_only: bool) -> QueryRange:
        return QueryRange(
            envelope=envelope(user), start_symbol="D", end_symbol="D+2", incomplete_only=incomplete_only
        )

    open_ = await system.query(read(True))
    assert [t.title for t in open_.tasks] == ["季度报告"]
    assert {e.id for e in open_.events} == {b.id for b in added.blocks}
    assert (await system.query(read(False))).tasks == ()

    other = await system.execute(
        CompleteTaskCommand(envelope=envelope(f"{user}-x"), idempotency_key=key(), task_id=added.task.id)
    )
    assert other.error is not None and other.error.code == "not_found"
    done = await system.execute(
        CompleteTaskCommand(envelope=envelope(user), idempotency_key=key(), task_id=added.task.id)
    )
    assert done.status == "updated" and done.task is not None and done.task.status == "done"
    after = await system.query(read(True))
    assert (after.tasks, after.events) == ((), ())


async def test_a_due_already_past_is_refused_and_nothing_is_kept(system: System, user: str) -> None:
    args = AddTask(title="旧事", duration_minutes=60, due="D-1")
    refused = await system.execute(AddTaskCommand(envelope=envelope(user), idempotency_key=key(), args=args))
    assert refused.error is not None and refused.error.code == "invalid_time"
    assert (
        await system.query(
            QueryRange(envelope=envelope(user), start_symbol="D", end_symbol="D+1", incomplete_only=True)
        )
    ).tasks == ()


async def test_tasks_saved_at_once_never_get_the_same_time(system: System, user: str) -> None:
    # Each placement reads the free time and writes into it: under the user's lock, one at a time.
    saves = [
        SaveTask(
            envelope=envelope(user),
            op="create",
            fields=TaskFields(title=f"任务{i}", duration_minutes=60, due=FRIDAY_NOON),
        )
        for i in range(4)
    ]
    results = await asyncio.gather(*(system.query(s) for s in saves))
    assert all(r.error is None for r in results)
    blocks = (
        await system.query(
            QueryRange(envelope=envelope(user), start_symbol="D", end_symbol="D+2", incomplete_only=True)
        )
    ).events
    assert len({b.task_id for b in blocks}) == 4
    spans = sorted((b.start, b.end) for b in blocks)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans)), spans


async def test_a_meeting_that_leaves_a_task_no_other_room_turns_its_block_busy(
    system: System, user: str
) -> None:
    # Two hours due at 14:00, placed 10:00–12:00: 12:00–14:00 is still another place for it.
    saved = await system.query(
        SaveTask(
            envelope=envelope(user),
            op="create",
            fields=TaskFields(
                title="周报", duration_minutes=120, due=datetime.fromisoformat("2026-09-24T14:00:00+08:00")
            ),
        )
    )
    [task] = saved.tasks
    sql = "SELECT transparent FROM commands.events WHERE task_id = :t"
    assert await system.scalar(sql, t=task.id) is True
    # A meeting 11:00–13:00 on the block leaves only 13:00–14:00 elsewhere: the block shows busy,
    # and stays where it is until the re-plan offered is confirmed.
    met = await system.execute(create(user, title="评审", date="D", time="11:00", end_time="13:00"))
    assert met.status == "created" and met.replan is not None, met
    assert await system.scalar(sql, t=task.id) is False
    assert await system.scalar("SELECT count(*) FROM commands.events WHERE task_id = :t", t=task.id) == 1


async def save(system: System, user: str, title: str, start: str, end: str, minutes: int = 60) -> QueryResult:
    """A task that may only go in [start, end) (its `earliest` and `due`), posted to be placed there."""
    return await system.query(
        SaveTask(
            envelope=envelope(user),
            op="create",
            fields=TaskFields(
                title=title,
                duration_minutes=minutes,
                earliest=datetime.fromisoformat(start),
                due=datetime.fromisoformat(end),
            ),
        )
    )


async def placed(system: System, user: str, title: str, start: str, end: str, minutes: int = 60) -> TaskOut:
    """A task that may only go in [start, end), placed there."""
    [task] = (await save(system, user, title, start, end, minutes)).tasks
    return task


async def block_spans(system: System, task_id: str) -> list[tuple[datetime, datetime]]:
    rows = await system.rows(
        "SELECT start_at, end_at FROM commands.events WHERE task_id = :t ORDER BY start_at", t=task_id
    )
    return [(r.start_at, r.end_at) for r in rows]


async def test_a_weekly_meeting_whose_second_occurrence_lands_on_a_block_offers_its_replan(
    system: System, user: str
) -> None:
    # Room only on Friday 2 October: the block is 09:00–10:00 there.
    task = await placed(system, user, "月报", "2026-10-02T00:00:00+08:00", "2026-10-02T18:00:00+08:00")
    friday_nine = datetime.fromisoformat("2026-10-02T09:00:00+08:00")
    assert await block_spans(system, task.id) == [(friday_nine, friday_nine + timedelta(hours=1))]
    # A weekly Friday 09:00 meeting from tomorrow: its first occurrence is clear of the block, its
    # second lands on it.
    series = await system.execute(
        create(user, title="周会", date="D+1", time="09:00", end_time="10:00", recurrence="FREQ=WEEKLY")
    )
    assert series.stub is not None and series.stub.hold_reason == "recurrence_plan", series
    met = await system.execute(merge(user, series.stub.id, confirm=True))
    assert met.status == "created", met
    assert met.replan is not None and met.replan.replan is not None, met
    [move] = met.replan.replan.moves
    assert (move.task_id, move.old_start) == (task.id, friday_nine)
    assert move.new_start is not None and move.new_start >= friday_nine + timedelta(hours=1)
    # Nothing moved before the user's word.
    assert await block_spans(system, task.id) == [(friday_nine, friday_nine + timedelta(hours=1))]


async def test_a_booked_time_the_attendee_chose_on_a_block_offers_its_replan(
    system: System, user: str
) -> None:
    # Room all Friday: the block 09:00–10:00 is free (transparent), so Friday's first free time
    # proposed to someone outside is that hour.
    task = await placed(system, user, "月报", "2026-09-25T00:00:00+08:00", "2026-09-25T18:00:00+08:00")
    friday_nine = datetime.fromisoformat("2026-09-25T09:00:00+08:00")
    assert await block_spans(system, task.id) == [(friday_nine, friday_nine + timedelta(hours=1))]
    args = ProposeTimes(
        title="聊一聊", attendee="wangwu@example.com", start="D+1", end="D+2", duration_minutes=60
    )
    proposed = await system.execute(
        ProposeTimesCommand(envelope=envelope(user), idempotency_key=key(), args=args)
    )
    assert proposed.stub is not None, proposed
    sent = await system.execute(merge(user, proposed.stub.id, confirm=True))
    assert sent.persisted, sent
    row = (
        await system.rows(
            "SELECT p.message_id, p.slots, m.address FROM commands.proposals p"
            " JOIN commands.mailboxes m ON m.user_id = p.user_id WHERE p.user_id = :u",
            u=user,
        )
    )[0]
    assert datetime.fromisoformat(row.slots[0]["start"]) == friday_nine, row.slots
    # The tentative holds of the times proposed keep their time from blocks: the block under the
    # first is offered a place clear of every hold, and nothing moves before the user's word.
    assert sent.replan is not None and sent.replan.replan is not None, sent
    [offered] = sent.replan.replan.moves
    assert (offered.task_id, offered.old_start) == (task.id, friday_nine), offered
    assert offered.new_start is not None and offered.new_end is not None, offered
    holds = [(datetime.fromisoformat(s["start"]), datetime.fromisoformat(s["end"])) for s in row.slots]
    assert all(offered.new_end <= start or end <= offered.new_start for start, end in holds), (offered, holds)
    assert await block_spans(system, task.id) == [(friday_nine, friday_nine + timedelta(hours=1))]
    # The attendee answers the proposal's mail naming its first time: a held booking.
    booking = await first_time_chosen(system, row.address, row.message_id)
    booked = await system.execute(merge(user, booking, confirm=True))
    assert booked.status == "created", booked
    # Booked onto the block: the block's re-plan is offered beside the receipt, nothing moved yet.
    assert booked.replan is not None and booked.replan.replan is not None, booked
    [move] = booked.replan.replan.moves
    assert (move.task_id, move.old_start) == (task.id, friday_nine)
    assert await block_spans(system, task.id) == [(friday_nine, friday_nine + timedelta(hours=1))]


async def first_time_chosen(system: System, address: str, message_id: str) -> str:
    """wangwu answers the proposal mailed from `address` (its `message_id`) naming its first time:
    the held booking's id."""
    answer = ReceiveMail(
        recipient=address,
        mail_from="wangwu@example.com",
        from_address="wangwu@example.com",
        message_id=f"<{key()}@example.com>",
        received_at=NOW,
        in_reply_to=(message_id,),
        body="1",
    )
    told = await system.client.request(wire.PEOPLE_MANAGE, PeopleRequest(command=answer), timeout=15)
    assert told.inbound is not None and told.inbound.command_id is not None, told
    return told.inbound.command_id


async def test_a_meeting_brought_back_by_an_undo_onto_a_block_placed_since_offers_its_replan(
    system: System, user: str
) -> None:
    made = await system.execute(create(user, title="评审", date="D+1", time="09:00", end_time="10:00"))
    assert made.event is not None and made.change_id is not None, made
    held = await system.execute(
        PrepareChange(envelope=envelope(user), idempotency_key=key(), action="delete", event_id=made.event.id)
    )
    assert held.stub is not None, held
    gone = await system.execute(merge(user, held.stub.id, confirm=True))
    assert gone.status == "deleted" and gone.change_id is not None, gone
    # The meeting's hour is free now: a task with room all Friday is placed there.
    task = await placed(system, user, "月报", "2026-09-25T00:00:00+08:00", "2026-09-25T18:00:00+08:00")
    friday_nine = datetime.fromisoformat("2026-09-25T09:00:00+08:00")
    assert await block_spans(system, task.id) == [(friday_nine, friday_nine + timedelta(hours=1))]
    # Undoing the delete brings the meeting back onto the block: its re-plan is offered, the
    # block stays until the user says so.
    undone = await system.execute(
        RevertChange(envelope=envelope(user), idempotency_key=key(), change_id=gone.change_id)
    )
    assert undone.status == "created" and undone.event is not None, undone
    assert undone.replan is not None and undone.replan.replan is not None, undone
    [move] = undone.replan.replan.moves
    assert (move.task_id, move.old_start) == (task.id, friday_nine), move
    assert move.new_start is not None and move.new_start >= friday_nine + timedelta(hours=1), move
    assert await block_spans(system, task.id) == [(friday_nine, friday_nine + timedelta(hours=1))]
    confirmed = await system.execute(merge(user, undone.replan.id, confirm=True))
    assert confirmed.persisted, confirmed
    assert await block_spans(system, task.id) == [(move.new_start, move.new_start + timedelta(hours=1))]


async def test_undoing_an_added_task_removes_the_task_and_every_block_of_it(
    system: System, user: str
) -> None:
    args = AddTask(title="季度报告", duration_minutes=180, due="D+1", due_time="12:00", max_chunk_minutes=90)
    added = await system.execute(AddTaskCommand(envelope=envelope(user), idempotency_key=key(), args=args))
    assert added.task is not None and len(added.blocks) == 2 and added.change_id is not None, added
    undone = await system.execute(
        RevertChange(envelope=envelope(user), idempotency_key=key(), change_id=added.change_id)
    )
    assert undone.persisted, undone
    assert await system.scalar("SELECT count(*) FROM commands.tasks WHERE user_id = :u", u=user) == 0
    blocks = "SELECT count(*) FROM commands.events WHERE user_id = :u AND task_id IS NOT NULL"
    assert await system.scalar(blocks, u=user) == 0
    # The next, unrelated write places nothing again and offers nothing.
    other = await system.execute(create(user, title="午饭", date="D", time="12:00"))
    assert other.status == "created" and other.replan is None, other
    assert await system.scalar(blocks, u=user) == 0
    assert await system.scalar("SELECT count(*) FROM commands.events WHERE user_id = :u", u=user) == 1
    # Undoing the undo would bring back blocks of a task that is no more: refused, nothing written.
    again = await system.execute(
        RevertChange(envelope=envelope(user), idempotency_key=key(), change_id=undone.change_id)
    )
    assert again.error is not None and not again.persisted, again
    assert await system.scalar(blocks, u=user) == 0


async def test_a_meeting_beside_a_block_that_takes_its_tasks_other_room_turns_it_busy_and_back(
    system: System, user: str
) -> None:
    # An hour due Friday 12:00, from Friday on: placed 09:00–10:00, and 10:00–12:00 is still room.
    task = await placed(system, user, "周报", "2026-09-25T00:00:00+08:00", "2026-09-25T12:00:00+08:00")
    sql = "SELECT transparent FROM commands.events WHERE task_id = :t"
    assert await system.scalar(sql, t=task.id) is True
    # A meeting 10:00–12:00 touches no block, but leaves the task no other place: busy.
    met = await system.execute(create(user, title="评审", date="D+1", time="10:00", end_time="12:00"))
    assert met.status == "created" and met.replan is None and met.event is not None, met
    assert await system.scalar(sql, t=task.id) is False
    # The meeting removed frees that room again: free.
    held = await system.execute(
        PrepareChange(envelope=envelope(user), idempotency_key=key(), action="delete", event_id=met.event.id)
    )
    assert held.stub is not None, held
    gone = await system.execute(merge(user, held.stub.id, confirm=True))
    assert gone.status == "deleted", gone
    assert await system.scalar(sql, t=task.id) is True


async def test_a_weekly_meeting_moved_as_a_whole_onto_a_later_block_offers_its_replan(
    system: System, user: str
) -> None:
    task = await placed(system, user, "月报", "2026-10-02T00:00:00+08:00", "2026-10-02T18:00:00+08:00")
    friday_nine = datetime.fromisoformat("2026-10-02T09:00:00+08:00")
    series = await system.execute(
        create(user, title="周会", date="D+1", time="15:00", end_time="16:00", recurrence="FREQ=WEEKLY")
    )
    assert series.stub is not None, series
    made = await system.execute(merge(user, series.stub.id, confirm=True))
    assert made.event is not None and made.replan is None, made
    # The whole series moved to 09:00 through its first occurrence: its second lands on the block.
    held = await system.execute(
        PrepareChange(
            envelope=envelope(user),
            idempotency_key=key(),
            action="update",
            event_id=made.event.id,
            update=UpdateSchedule(event_id=made.event.id, time="09:00", end_time="10:00"),
            scope="all",
        )
    )
    assert held.stub is not None, held
    moved = await system.execute(merge(user, held.stub.id, confirm=True))
    assert moved.status == "updated", moved
    assert moved.replan is not None and moved.replan.replan is not None, moved
    [move] = moved.replan.replan.moves
    assert (move.task_id, move.old_start) == (task.id, friday_nine)


async def moved_as_the_rows_say(system: System, moved: tuple[BlockMove, ...], other: TaskOut) -> None:
    """`moved` is the one block of `other` moved from Thursday 10:00 to where its row now is."""
    [move] = moved
    [(start, end)] = await block_spans(system, other.id)
    block_id = await system.scalar("SELECT id FROM commands.events WHERE task_id = :t", t=other.id)
    assert (move.task_id, move.title, move.block_id) == (other.id, other.title, block_id)
    assert (move.old_start, move.old_end) == (NOW, NOW + timedelta(hours=1))
    assert (
        (move.new_start, move.new_end) == (start, end) == (NOW + timedelta(hours=1), NOW + timedelta(hours=2))
    )


async def test_a_task_placed_by_moving_another_tasks_block_lists_the_move(system: System, user: str) -> None:
    # "周报" takes Thursday 10:00–11:00, the only hour a task due at 11:00 has: placing that task
    # moves "周报" to 11:00 (greedy over both), and the result says so (§21: never silently).
    weekly = await placed(system, user, "周报", "2026-09-24T00:00:00+08:00", "2026-09-25T18:00:00+08:00")
    args = AddTask(title="急事", duration_minutes=60, due="D", due_time="11:00")
    added = await system.execute(AddTaskCommand(envelope=envelope(user), idempotency_key=key(), args=args))
    assert added.status == "created" and added.task is not None and not added.task.at_risk, added
    assert [(b.start, b.end) for b in added.blocks] == [(NOW, NOW + timedelta(hours=1))]
    await moved_as_the_rows_say(system, added.moved_blocks, weekly)

    # The same through `POST /v1/tasks`'s path.
    other = f"{user}-api"
    weekly = await placed(system, other, "周报", "2026-09-24T00:00:00+08:00", "2026-09-25T18:00:00+08:00")
    saved = await save(system, other, "急事", "2026-09-24T00:00:00+08:00", "2026-09-24T11:00:00+08:00")
    assert saved.error is None, saved
    await moved_as_the_rows_say(system, saved.moved_blocks, weekly)
