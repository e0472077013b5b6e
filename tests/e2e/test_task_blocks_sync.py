"""A change synced from the connected calendar that lands on a task's block (contract §21) moves
nothing: the blocks' fewest-moves re-plan is offered as one held change listing each block's old
and new time, and the blocks move only when the user confirms it. A real CalDAV server (Radicale);
the facts are read back from the API."""

# The fixtures imported from test_caldav are the test functions' parameters.
# ruff: noqa: F811
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import caldav
import pytest
from icalendar import Calendar
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script
from .test_caldav import (  # noqa: F401
    Remote,
    commands_app,
    connect,
    create_by_chat,
    eventually,
    outbox_drained,
    radicale,
    remote,
    scalar,
    stack,
    stack_db,
)

pytestmark = pytest.mark.e2e


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


def blocks_of(events: list[dict[str, Any]], task_id: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("kind") == "task_block" and e["task_id"] == task_id]


async def test_an_event_synced_onto_a_block_offers_the_replan_and_moves_only_on_confirm(
    stack: Stack, scripted: ScriptedModelServer, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    # Thursday 10:00 in Shanghai: the task's first block lies on Friday morning.
    response = await stack.client.post(
        "/v1/tasks",
        json={
            "title": "预算表",
            "duration_minutes": 60,
            "due": "2026-09-25T18:00:00+08:00",
            "earliest": "2026-09-25T00:00:00+08:00",
        },
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    task = response.json()
    [block] = blocks_of(await read_events(stack, user), task["id"])
    assert at(block["start"]) == at("2026-09-25T09:00:00+08:00"), block
    await outbox_drained(stack_db(stack), user)

    # The calendar app puts a meeting on Friday 09:00–10:00 (01:00–02:00 UTC).
    remote.add("standup-from-phone", "站会", "20260925T010000Z", "20260925T020000Z")
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def offered() -> bool:
        response = await stack.client.get("/v1/commands/active", headers=stack.headers(user))
        found = response.json()
        return found is not None and found.get("kind") == "replan"

    await eventually(offered, "the re-plan offer")
    offer = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    [move] = offer["replan"]["moves"]
    assert (move["block_id"], at(move["old_start"])) == (block["id"], at(block["start"]))
    assert move["new_start"] is not None and at(move["new_start"]) >= at("2026-09-25T10:00:00+08:00")
    # Nothing moved yet: the block still lies under the synced meeting.
    events = await read_events(stack, user)
    assert blocks_of(events, task["id"]) == [block]
    assert any(e["title"] == "站会" and e.get("kind", "event") == "event" for e in events)

    scripted.set_script(script(default="好的。"))
    confirmed = await stack.client.post(
        "/v1/commands",
        json={"tool": "confirm_command", "arguments": {"command_id": offer["id"]}},
        headers=stack.headers(user),
    )
    assert confirmed.json()["outcome"] == "updated", confirmed.text
    [moved] = blocks_of(await read_events(stack, user), task["id"])
    assert (moved["id"], at(moved["start"]), at(moved["end"])) == (
        block["id"],
        at(move["new_start"]),
        at(move["new_end"]),
    )


async def test_a_meeting_deleted_in_the_calendar_app_frees_the_block_here_and_on_the_server(
    stack: Stack, user: str, remote: Remote
) -> None:
    """Contract §21: a block shows busy only while its task has no other place; the room a meeting
    removed on the server leaves turns it free here, and that change of ours goes to the server."""
    await connect(stack, user, remote)
    db = stack_db(stack)
    # Friday 09:00–17:00 (01:00–09:00 UTC) taken by the app's meeting: of Friday's working hours
    # only 17:00–18:00 is left for the task.
    meeting_href = remote.add("offsite-from-phone", "外出培训", "20260925T010000Z", "20260925T090000Z")
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def arrived() -> bool:
        return any(e["title"] == "外出培训" for e in await read_events(stack, user))

    await eventually(arrived, "the meeting synced in")
    response = await stack.client.post(
        "/v1/tasks",
        json={
            "title": "预算表",
            "duration_minutes": 60,
            "due": "2026-09-25T18:00:00+08:00",
            "earliest": "2026-09-25T00:00:00+08:00",
        },
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    task = response.json()
    [block] = blocks_of(await read_events(stack, user), task["id"])
    assert at(block["start"]) == at("2026-09-25T17:00:00+08:00"), block
    transparent = "select transparent from commands.events where id = :b"
    assert await scalar(db, transparent, b=block["id"]) is False  # no other place: busy
    await outbox_drained(db, user)
    block_href = await scalar(
        db, "select href from commands.caldav_resources where event_id = :b", b=block["id"]
    )
    assert block_href is not None
    # Busy on the server too (OPAQUE is an event's default: written or left out).
    assert "TRANSP:TRANSPARENT" not in server_lines(remote, str(block_href))

    with remote.client() as client:
        assert client.delete(meeting_href).status in (200, 204)
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def freed() -> bool:
        return bool(await scalar(db, transparent, b=block["id"]))

    await eventually(freed, "the block free once the meeting is gone")
    await outbox_drained(db, user)
    assert "TRANSP:TRANSPARENT" in server_lines(remote, str(block_href))


async def test_a_meeting_the_servers_version_puts_on_a_block_offers_the_replan_when_it_wins(
    stack: Stack, scripted: ScriptedModelServer, user: str, remote: Remote
) -> None:
    """Both sides changed a meeting: the calendar app moved it onto a task's block, chat renamed it.
    Our PUT meets 412 and the server's version wins — it lands on the block like any write, so the
    block's re-plan is offered beside our change's offer (once, nothing rewrote it silently)."""
    await connect(stack, user, remote)
    db = stack_db(stack)
    meeting = await create_by_chat(stack, scripted, user, "读书会", date="D+1", time="15:00")
    task = await add_friday_task(stack, user, due="2026-09-25T18:00:00+08:00")
    [block] = blocks_of(await read_events(stack, user), task["id"])
    assert at(block["start"]) == at("2026-09-25T09:00:00+08:00"), block
    await outbox_drained(db, user)
    # The app moves it to Friday 09:00–10:00, onto the block, while chat renames it.
    await changed_on_both_sides(
        stack, scripted, user, remote, meeting["id"], "20260925T010000Z", "20260925T020000Z"
    )
    # The server's version is here: the meeting lies on the block, which has not moved.
    events = await read_events(stack, user)
    [kept] = [e for e in events if e["id"] == meeting["id"]]
    assert at(kept["start"]) == at("2026-09-25T09:00:00+08:00"), kept
    assert blocks_of(events, task["id"]) == [block]
    # Its re-plan is offered, held for the user's word, moving that block off the meeting.
    replans = await rows(
        db,
        "select change from commands.stubs where user_id = :u and kind = 'replan' and status = 'held'",
        u=user,
    )
    [offer] = replans
    [move] = offer["replan"]["moves"]
    assert (move["block_id"], at(move["old_start"])) == (block["id"], at(block["start"])), move
    assert at(move["new_start"]) >= at("2026-09-25T10:00:00+08:00"), move


async def test_a_meeting_the_servers_version_leaves_a_task_no_other_room_turns_its_block_busy(
    stack: Stack, scripted: ScriptedModelServer, user: str, remote: Remote
) -> None:
    """The server's version of a meeting changed on both sides takes the only other room a task
    had: the block shows busy here and on the server (contract §21), as after any write."""
    await connect(stack, user, remote)
    db = stack_db(stack)
    meeting = await create_by_chat(stack, scripted, user, "读书会", date="D+1", time="15:00")
    # An hour due Friday 12:00: placed 09:00–10:00, with 10:00–12:00 still room for it.
    task = await add_friday_task(stack, user, due="2026-09-25T12:00:00+08:00")
    [block] = blocks_of(await read_events(stack, user), task["id"])
    transparent = "select transparent from commands.events where id = :b"
    assert await scalar(db, transparent, b=block["id"]) is True
    await outbox_drained(db, user)
    # The app moves it to Friday 10:00–12:00 (02:00–04:00 UTC), beside the block, while chat renames it.
    await changed_on_both_sides(
        stack, scripted, user, remote, meeting["id"], "20260925T020000Z", "20260925T040000Z"
    )
    assert await scalar(db, transparent, b=block["id"]) is False
    block_href = await scalar(
        db, "select href from commands.caldav_resources where event_id = :b", b=block["id"]
    )
    assert "TRANSP:TRANSPARENT" not in server_lines(remote, str(block_href))


async def changed_on_both_sides(
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    remote: Remote,
    event_id: str,
    start: str,
    end: str,
) -> None:
    """The calendar app moves the event to [start, end) (not synced back yet) while chat renames it:
    our PUT meets 412 and the server's version wins."""
    [href] = [href for href, body in remote.objects() if "读书会" in body.to_ical().decode()]
    move_on_server(remote, href, start, end)
    scripted.set_script(
        script(
            on_user(
                "读书会改名", tool_calls=[call("update_schedule", event_id=event_id, title="读书会·第二期")]
            ),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    assert (await stack.chat(user, "读书会改名为读书会·第二期")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    db = stack_db(stack)
    await outbox_drained(db, user)
    conflict = "select outcome from commands.caldav_outbox where user_id = :u and event_id = :e order by id desc limit 1"
    assert await scalar(db, conflict, u=user, e=event_id) == "conflict"


async def add_friday_task(stack: Stack, user: str, *, due: str) -> dict[str, Any]:
    """An hour's task that may go from Friday 00:00 to `due`."""
    response = await stack.client.post(
        "/v1/tasks",
        json={"title": "预算表", "duration_minutes": 60, "due": due, "earliest": "2026-09-25T00:00:00+08:00"},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    task: dict[str, Any] = response.json()
    return task


def move_on_server(remote: Remote, href: str, start: str, end: str) -> None:
    """The calendar app moves one object to [start, end) (UTC, basic format), as it stores."""
    with remote.client() as client:
        obj = caldav.Event(
            client=client, url=href, parent=caldav.Calendar(client=client, url=remote.calendar_url)
        )
        obj.load()
        body = Calendar.from_ical(obj.data)
        for vevent in body.walk("VEVENT"):
            for name, value in (("DTSTART", start), ("DTEND", end)):
                del vevent[name]
                vevent.add(name, datetime.strptime(value, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC))
        obj.data = body.to_ical().decode()
        obj.save(increase_seqno=False)


async def rows(db: AsyncEngine, sql: str, **params: Any) -> list[Any]:
    async with db.connect() as conn:
        return [r[0] for r in await conn.execute(text(sql), params)]


def server_lines(remote: Remote, href: str) -> list[str]:
    with remote.client() as client:
        response = client.request(href, "GET", "", {"Accept": "text/calendar"})
        assert response.status == 200, response.status
        return str(response.raw).replace("\r\n", "\n").replace("\n ", "").split("\n")
