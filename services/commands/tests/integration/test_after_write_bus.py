"""Every path that writes reaches the one step after a write (`tasks.replans.Replans.after_write`,
contract §21), on real NATS and PostgreSQL: each command type and each kind of answered stub is
listed here, and each that lands an event lands one on a task's block and gets that block's
re-plan offered beside its receipt. The sync paths (the inbound sync, a conflict the server's
version wins) are the CalDAV end-to-end tests' (`tests/e2e/test_task_blocks_sync.py`)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import pytest

from calagent.contracts import wire
from calagent.contracts.commands import (
    CommandResult,
    PrepareChange,
    ProposeTimesCommand,
    RevertChange,
    StubKind,
    StubOut,
)
from calagent.contracts.people import GetMailAddress, PeopleRequest, ReceiveMail
from calagent.contracts.tools import ProposeTimes, UpdateSchedule

from .conftest import NOW, System, envelope
from .test_commands_bus import create, key, merge
from .test_tasks_bus import block_spans, first_time_chosen, placed

pytestmark = pytest.mark.integration

FRIDAY_NINE = datetime.fromisoformat("2026-09-25T09:00:00+08:00")
BLOCK = (FRIDAY_NINE, FRIDAY_NINE + timedelta(hours=1))

# A path to a write that lands an event on Friday 09:00–10:00, where the task's one block lies;
# it answers with the receipt that carries the re-plan.
Landing = Callable[[System, str], Awaitable[CommandResult]]


async def by_create(system: System, user: str) -> CommandResult:
    return await system.execute(create(user, title="评审", date="D+1", time="09:00", end_time="10:00"))


async def by_confirmed_create(system: System, user: str) -> CommandResult:
    # Held on someone else's words (contract §9), run on the user's word.
    held = await system.execute(
        create(user, title="评审", date="D+1", time="09:00", end_time="10:00", hold="third_party_content")
    )
    assert held.stub is not None and held.stub.kind == "create", held
    return await system.execute(merge(user, held.stub.id, confirm=True))


async def by_confirmed_change(system: System, user: str) -> CommandResult:
    made = await system.execute(create(user, title="评审", date="D+1", time="15:00", end_time="16:00"))
    assert made.event is not None and made.replan is None, made
    return await move(system, user, made.event.id, "09:00", "10:00")


async def by_undo(system: System, user: str) -> CommandResult:
    # Moved off the block, then the move undone: the event comes back onto it.
    made = await by_create(system, user)
    assert made.event is not None and made.replan is not None, made
    moved = await move(system, user, made.event.id, "15:00", "16:00")
    assert moved.status == "updated" and moved.change_id is not None and moved.replan is None, moved
    return await system.execute(
        RevertChange(envelope=envelope(user), idempotency_key=key(), change_id=moved.change_id)
    )


async def move(system: System, user: str, event_id: str, time: str, end_time: str) -> CommandResult:
    """The event moved to `time`–`end_time` the same day: the change held, then confirmed."""
    update = UpdateSchedule(event_id=event_id, time=time, end_time=end_time)
    held = await system.execute(
        PrepareChange(
            envelope=envelope(user), idempotency_key=key(), action="update", event_id=event_id, update=update
        )
    )
    assert held.stub is not None and held.stub.kind == "change", held
    return await system.execute(merge(user, held.stub.id, confirm=True))


async def by_sent_proposal(system: System, user: str) -> CommandResult:
    # Friday's first free hour is the (free) block's: the first tentative hold lands on it.
    args = ProposeTimes(
        title="聊一聊", attendee="wangwu@example.com", start="D+1", end="D+2", duration_minutes=60
    )
    proposed = await system.execute(
        ProposeTimesCommand(envelope=envelope(user), idempotency_key=key(), args=args)
    )
    assert proposed.stub is not None and proposed.stub.kind == "proposal", proposed
    return await system.execute(merge(user, proposed.stub.id, confirm=True))


async def by_booking(system: System, user: str) -> CommandResult:
    sent = await by_sent_proposal(system, user)
    assert sent.replan is not None, sent
    [row] = await system.rows(
        "SELECT p.message_id, m.address FROM commands.proposals p"
        " JOIN commands.mailboxes m ON m.user_id = p.user_id WHERE p.user_id = :u",
        u=user,
    )
    # The attendee names the first time proposed: a held booking.
    booking = await first_time_chosen(system, row.address, row.message_id)
    assert await stub_kind(system, booking) == "booking"
    return await system.execute(merge(user, booking, confirm=True))


async def by_accepted_invitation(system: System, user: str) -> CommandResult:
    offered = await invited(system, user, FRIDAY_NINE)
    return await system.execute(merge(user, offered, confirm=True))


# Every command type and stub kind whose answer writes an event, by the path that lands it.
LANDING: dict[str, Landing] = {
    "PrepareOrCreate": by_create,
    "MergeStub:create": by_confirmed_create,
    "MergeStub:change": by_confirmed_change,
    "RevertChange": by_undo,
    "MergeStub:proposal": by_sent_proposal,
    "MergeStub:booking": by_booking,
    "MergeStub:invitation": by_accepted_invitation,
}
# The rest write no event of the user's, only stubs, tasks or blocks: why each has nothing to land.
LANDS_NOTHING: dict[str, str] = {
    "PrepareChange": "holds the change as a stub; MergeStub:change runs it",
    "ProposePlan": "holds a plan as a stub",
    "MergeStub:plan": "a plan is kept as a stub, not as events",
    "ProposeTimesCommand": "holds the times as a stub; MergeStub:proposal writes their holds",
    "CancelStub": "ends a stub (declining an invitation or a counter-proposal answers by mail)",
    "AddTaskCommand": "places blocks, whose TRANSP its placement decides (test_tasks_bus)",
    "CompleteTaskCommand": "frees blocks, whose TRANSP its placement decides (test_tasks_bus)",
    "MergeStub:replan": "moves blocks only: a re-plan never offers another (tested below)",
    "MergeStub:task_change": "writes a task and its blocks (tests/e2e/test_task_sync.py)",
}


def test_every_command_type_and_stub_kind_is_listed(system: System) -> None:
    assert system.app.service is not None
    commands = {t.__name__ for t in system.app.service.writes.handlers if t.__name__ != "MergeStub"}
    kinds = {f"MergeStub:{kind}" for kind in get_args(StubKind)}
    assert set(LANDING).isdisjoint(LANDS_NOTHING)
    assert set(LANDING) | set(LANDS_NOTHING) == commands | kinds


@pytest.mark.parametrize("path", sorted(LANDING))
async def test_an_event_landing_on_a_block_through_each_path_offers_its_replan(
    system: System, user: str, path: str
) -> None:
    # An hour that may go anywhere on Friday: placed 09:00–10:00, free (others may take it).
    task = await placed(system, user, "月报", "2026-09-25T00:00:00+08:00", "2026-09-25T18:00:00+08:00")
    assert await block_spans(system, task.id) == [BLOCK]
    landed = await LANDING[path](system, user)
    assert landed.persisted, landed
    move = only_move(landed.replan)
    assert (move.task_id, (move.old_start, move.old_end)) == (task.id, BLOCK), move
    assert move.new_start is not None and move.new_start >= BLOCK[1], move
    # Nothing moved before the user's word.
    assert await block_spans(system, task.id) == [BLOCK]


async def test_a_confirmed_replan_moves_its_blocks_and_offers_no_other(system: System, user: str) -> None:
    task = await placed(system, user, "月报", "2026-09-25T00:00:00+08:00", "2026-09-25T18:00:00+08:00")
    landed = await by_create(system, user)
    assert landed.replan is not None, landed
    move = only_move(landed.replan)
    confirmed = await system.execute(merge(user, landed.replan.id, confirm=True))
    assert (confirmed.status, confirmed.replan) == ("updated", None), confirmed
    assert move.new_start is not None and move.new_end is not None
    assert await block_spans(system, task.id) == [(move.new_start, move.new_end)]
    held = "SELECT count(*) FROM commands.stubs WHERE user_id = :u AND kind = 'replan' AND status = 'held'"
    assert await system.scalar(held, u=user) == 0


def only_move(replan: StubOut | None) -> Any:
    assert replan is not None and replan.replan is not None, replan
    [move] = replan.replan.moves
    return move


async def stub_kind(system: System, stub_id: str) -> str | None:
    value: str | None = await system.scalar("SELECT kind FROM commands.stubs WHERE id = :i", i=stub_id)
    return value


async def invited(system: System, user: str, start: datetime, *, at: datetime = NOW) -> str:
    """An invitation from a stranger for an hour at `start`, received at `at`: its stub's id."""
    mine = await system.client.request(
        wire.PEOPLE_MANAGE, PeopleRequest(command=GetMailAddress(envelope=envelope(user))), timeout=15
    )
    address = mine.address
    assert address is not None, mine
    organizer = f"boss-{user}@example.com"
    begin, end = (
        (start + delta).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        for delta in (timedelta(0), timedelta(hours=1))
    )
    body = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//example//organizer//EN\r\nMETHOD:REQUEST\r\n"
        f"BEGIN:VEVENT\r\nUID:{uuid.uuid4()}@example.com\r\nDTSTAMP:20260924T010000Z\r\nSEQUENCE:0\r\n"
        f"DTSTART:{begin}\r\nDTEND:{end}\r\nSUMMARY:季度评审\r\nORGANIZER:mailto:{organizer}\r\n"
        f"ATTENDEE;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:{address}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    mail = ReceiveMail(
        recipient=address,
        mail_from=organizer,
        from_address=organizer,
        message_id=f"<{key()}@example.com>",
        received_at=at,
        calendar=body,
    )
    told = await system.client.request(wire.PEOPLE_MANAGE, PeopleRequest(command=mail), timeout=15)
    assert told.inbound is not None and told.inbound.command_id is not None, told
    assert await stub_kind(system, told.inbound.command_id) == "invitation"
    return told.inbound.command_id
