"""Tasks as VTODOs in the user's connected calendar (contract §21 with §12 and §14), against a real
Radicale: a task made through `/v1/tasks` appears on the server with its fields and goes when it
is removed; a task another app wrote — with an alarm, a subtask relation, categories and its own
X- properties — is synced in, completed through the API, and on the server only its status,
completion and percentage (and the stamps) changed, every other line byte for byte; a task
completed on the phone is done here; a block of a task names the task's VTODO as its parent.

Facts come from the server (a GET of the object) and from the API and the database.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import unquote

import caldav
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.contracts import wire
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import QueryRequest, QueryResult, TurnContext
from calagent.devtools.radicale import EmbeddedRadicale
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import caldav_stack, radicale_server
from .conftest import call, on_user, read_events, script
from .test_caldav import Remote, commands_app, connect, eventually, outbox_drained, scalar, stack_db
from .test_caldav import remote as remote

pytestmark = pytest.mark.e2e

FRIDAY_EVENING = "2026-09-25T18:00:00+08:00"
STAMPS = ("SEQUENCE", "LAST-MODIFIED", "DTSTAMP")

FOREIGN_UID = "C0FFEE-report@example.com"
FOREIGN_LINES = [
    f"UID:{FOREIGN_UID}",
    "DTSTAMP:20260901T080000Z",
    "CREATED:20260801T080000Z",
    "LAST-MODIFIED:20260901T080000Z",
    "SEQUENCE:2",
    "SUMMARY;LANGUAGE=zh-CN:准备评审材料",
    "DUE;TZID=Asia/Shanghai:20260925T180000",
    "PRIORITY:1",
    "STATUS:NEEDS-ACTION",
    "CATEGORIES:工作,评审",
    "RELATED-TO;RELTYPE=CHILD:sub-slides@example.com",
    "X-APPLE-SORT-ORDER:612345678",
    'X-CUSTOM;X-PARAM="semi;colon":value\\, with\\; odd: chars',
    "BEGIN:VALARM",
    "ACTION:DISPLAY",
    "TRIGGER;RELATED=END:-PT30M",
    "DESCRIPTION:Reminder",
    "UID:ALARM-1",
    "END:VALARM",
]
SHANGHAI_VTIMEZONE = [
    "BEGIN:VTIMEZONE",
    "TZID:Asia/Shanghai",
    "BEGIN:STANDARD",
    "DTSTART:19700101T000000",
    "TZOFFSETFROM:+0800",
    "TZOFFSETTO:+0800",
    "TZNAME:CST",
    "END:STANDARD",
    "END:VTIMEZONE",
]


def foreign_task() -> str:
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//Apple Inc.//iOS 18.1//EN", *SHANGHAI_VTIMEZONE]
    lines += ["BEGIN:VTODO", *FOREIGN_LINES, "END:VTODO", "END:VCALENDAR"]
    return "\r\n".join(lines) + "\r\n"


@pytest.fixture(scope="module")
def radicale() -> Iterator[EmbeddedRadicale]:
    with radicale_server() as server:
        yield server


@pytest.fixture(scope="module")
async def stack(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, radicale: EmbeddedRadicale
) -> AsyncIterator[Stack]:
    async with caldav_stack(servers, database_url, scripted, allow_networks=radicale.network) as system:
        yield system


# ---- the server's side ---------------------------------------------------------------------------


def todo_hrefs(remote: Remote) -> list[str]:
    with remote.client() as client:
        calendar = caldav.Calendar(client=client, url=remote.calendar_url)
        return sorted(str(o.url) for o in calendar.todos(include_completed=True))


def server_text(remote: Remote, href: str) -> str:
    with remote.client() as client:
        response = client.request(href, "GET", "", {"Accept": "text/calendar"})
        assert response.status == 200, response.status
        return str(response.raw)


def unfolded(body: str) -> list[str]:
    """The object's content lines as the server holds them (folding undone, nothing else; the
    client library hands the body over with bare line feeds)."""
    text = body.replace("\r\n", "\n")
    return text.replace("\n ", "").replace("\n\t", "").strip("\n").split("\n")


def todo_lines(body: str) -> list[str]:
    """The VTODO's lines, its alarm's included, in order."""
    lines = unfolded(body)
    return lines[lines.index("BEGIN:VTODO") + 1 : lines.index("END:VTODO")]


def named(lines: list[str], name: str) -> list[str]:
    return [line for line in lines if line.split(":", 1)[0].split(";", 1)[0] == name]


def put_todo(remote: Remote, body: str) -> str:
    with remote.client() as client:
        calendar = caldav.Calendar(client=client, url=remote.calendar_url)
        return str(calendar.save_todo(body).url)


def replace_on_server(remote: Remote, href: str, body: str) -> None:
    with remote.client() as client:
        response = client.put(href, body, {"Content-Type": "text/calendar; charset=utf-8"})
        assert response.status in (201, 204), response.status


# ---- our side ------------------------------------------------------------------------------------


async def tasks_of(stack: Stack, user: str) -> list[dict[str, Any]]:
    response = await stack.client.get("/v1/tasks", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["tasks"]
    return found


async def synced(stack: Stack, check: Any, what: str) -> None:
    async def seen() -> bool:
        commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]
        return bool(await check())

    await eventually(seen, what)


async def sent_to_server(db: AsyncEngine, task_id: str) -> str:
    href = await scalar(db, "select href from commands.caldav_resources where event_id = :t", t=task_id)
    assert href is not None
    return str(href)


async def next_turns_context(stack: Stack, user: str) -> QueryResult:
    """The context the user's next turn reads (its sync notices are taken by it, told once)."""
    envelope = Envelope(
        turn_id=uuid.uuid4().hex[:16],
        user_id=user,
        conversation_id="c",
        occurred_at=stack.clock.now(),
        tz="Asia/Shanghai",
    )
    assert stack.probe is not None
    found: QueryResult = await stack.probe.request(
        wire.COMMAND_QUERY, QueryRequest(query=TurnContext(envelope=envelope)), timeout=15
    )
    return found


# ---- tests ---------------------------------------------------------------------------------------


async def test_a_task_made_through_the_api_is_a_vtodo_on_the_server_until_it_is_removed(
    stack: Stack, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    db = stack_db(stack)
    made = await stack.client.post(
        "/v1/tasks",
        json={"title": "季度报告", "duration_minutes": 240, "due": FRIDAY_EVENING, "priority": 2},
        headers=stack.headers(user),
    )
    assert made.status_code == 201, made.text
    task_id = made.json()["id"]
    await outbox_drained(db, user)
    [href] = todo_hrefs(remote)
    lines = todo_lines(server_text(remote, href))
    assert named(lines, "SUMMARY") == ["SUMMARY:季度报告"]
    assert named(lines, "DUE") == ["DUE:20260925T100000Z"]
    assert named(lines, "PRIORITY") == ["PRIORITY:3"]
    assert named(lines, "STATUS") == ["STATUS:NEEDS-ACTION"]
    assert named(lines, "X-CALAGENT-DURATION") == ["X-CALAGENT-DURATION:PT4H"]
    assert named(lines, "UID") == [f"UID:{task_id}@calagent"]

    done = await stack.client.patch(f"/v1/tasks/{task_id}", json={"done": True}, headers=stack.headers(user))
    assert done.status_code == 200, done.text
    await outbox_drained(db, user)
    lines = todo_lines(server_text(remote, href))
    assert named(lines, "STATUS") == ["STATUS:COMPLETED"]
    assert named(lines, "PERCENT-COMPLETE") == ["PERCENT-COMPLETE:100"]
    assert len(named(lines, "COMPLETED")) == 1
    assert named(lines, "SEQUENCE") == ["SEQUENCE:1"]

    gone = await stack.client.delete(f"/v1/tasks/{task_id}", headers=stack.headers(user))
    assert gone.status_code == 204
    await outbox_drained(db, user)
    assert todo_hrefs(remote) == []
    outcomes = await scalar(
        db,
        "select array_agg(distinct outcome) from commands.caldav_outbox where user_id = :u and kind = 'task'",
        u=user,
    )
    assert outcomes == ["delivered"]


async def test_another_apps_task_completed_here_keeps_every_line_it_did_not_change(
    stack: Stack, user: str, remote: Remote
) -> None:
    href = put_todo(remote, foreign_task())
    before = server_text(remote, href)
    await connect(stack, user, remote)
    db = stack_db(stack)

    async def arrived() -> list[dict[str, Any]]:
        return [t for t in await tasks_of(stack, user) if t["title"] == "准备评审材料"]

    await synced(stack, arrived, "the app's task in GET /v1/tasks")
    [task] = await arrived()
    assert (task["due"], task["priority"], task["status"]) == ("2026-09-25T10:00:00Z", 1, "open")

    done = await stack.client.patch(
        f"/v1/tasks/{task['id']}", json={"done": True}, headers=stack.headers(user)
    )
    assert done.status_code == 200, done.text
    await outbox_drained(db, user)
    # The app's object, not a second one (stored under one spelling of its address).
    assert await sent_to_server(db, task["id"]) == unquote(href)
    after = server_text(remote, href)
    touched = ("STATUS", "COMPLETED", "PERCENT-COMPLETE", *STAMPS)
    kept_before = [line for line in todo_lines(before) if line.split(":")[0].split(";")[0] not in touched]
    kept_after = [line for line in todo_lines(after) if line.split(":")[0].split(";")[0] not in touched]
    assert kept_after == kept_before  # byte for byte, in order: alarm, subtask, categories, X-
    lines = todo_lines(after)
    assert named(lines, "STATUS") == ["STATUS:COMPLETED"]
    assert named(lines, "PERCENT-COMPLETE") == ["PERCENT-COMPLETE:100"]
    assert len(named(lines, "COMPLETED")) == 1 and named(lines, "COMPLETED")[0].endswith("Z")
    [was] = named(todo_lines(before), "SEQUENCE")
    assert named(lines, "SEQUENCE") == [f"SEQUENCE:{int(was.split(':')[1]) + 1}"]
    assert not named(lines, "X-CALAGENT-DURATION")  # nothing of ours added to their object
    # The VTIMEZONE and the rest of the calendar around it are as the app wrote them too.
    outside = unfolded(before)[: unfolded(before).index("BEGIN:VTODO")]
    assert unfolded(after)[: unfolded(after).index("BEGIN:VTODO")] == outside


async def test_a_task_completed_on_the_phone_is_done_here_and_a_block_names_it_as_parent(
    stack: Stack, user: str, remote: Remote
) -> None:
    href = put_todo(remote, foreign_task())
    await connect(stack, user, remote)
    db = stack_db(stack)

    async def arrived() -> list[dict[str, Any]]:
        return await tasks_of(stack, user)

    await synced(stack, arrived, "the app's task in GET /v1/tasks")
    [task] = await tasks_of(stack, user)

    # A block of the task (as placing writes one): its event on the server names the task's VTODO.
    async with db.begin() as conn:
        await conn.execute(
            text(
                "insert into commands.events (id, user_id, title, start_at, end_at, calendar, task_id, uid)"
                " values (:e, :u, '准备评审材料', '2026-09-25T02:00Z', '2026-09-25T03:00Z', 'Personal', :t, :uid)"
            ),
            {"e": "block" + task["id"][:27], "u": user, "t": task["id"], "uid": "block-1@calagent"},
        )
        await conn.execute(
            text("insert into commands.caldav_outbox (user_id, event_id) values (:u, :e)"),
            {"u": user, "e": "block" + task["id"][:27]},
        )
    commands_app(stack).sync.wake()  # type: ignore[union-attr]
    await outbox_drained(db, user)
    block_href = await sent_to_server(db, "block" + task["id"][:27])
    block = unfolded(server_text(remote, block_href))
    assert named(block, "RELATED-TO") == [f"RELATED-TO;RELTYPE=PARENT:{FOREIGN_UID}"]
    assert not named(todo_lines(server_text(remote, href)), "RELATED-TO;RELTYPE=PARENT")
    # The feeds name the same parent: the task's own UID, not one made from its id here — for a
    # block not (yet) on the server too, which the feed writes afresh.
    async with db.begin() as conn:
        await conn.execute(
            text(
                "insert into commands.events (id, user_id, title, start_at, end_at, calendar, task_id)"
                " values (:e, :u, '准备评审材料', '2026-09-25T04:00Z', '2026-09-25T05:00Z', 'Personal', :t)"
            ),
            {"e": "later" + task["id"][:27], "u": user, "t": task["id"]},
        )
    exported = await stack.client.get("/v1/calendar.ics", headers=stack.headers(user))
    assert exported.status_code == 200, exported.text
    feed = await stack.client.post("/v1/feeds", headers=stack.headers(user))
    subscribed = await stack.client.get(feed.json()["url"])
    assert subscribed.status_code == 200, subscribed.text
    for body in (exported.text, subscribed.text):
        assert named(unfolded(body), "RELATED-TO") == [f"RELATED-TO;RELTYPE=PARENT:{FOREIGN_UID}"] * 2
    async with db.begin() as conn:
        await conn.execute(
            text("delete from commands.events where id = :e"), {"e": "later" + task["id"][:27]}
        )
    [shown] = await read_events(stack, user)
    assert (shown["kind"], shown["task_id"]) == ("task_block", task["id"])
    # Renamed in the calendar app: read back, it is still the task's block.
    replace_on_server(remote, block_href, server_text(remote, block_href).replace("准备评审材料", "评审材料"))

    async def renamed() -> bool:
        return [e["title"] for e in await read_events(stack, user)] == ["评审材料"]

    await synced(stack, renamed, "the renamed block in GET /v1/events")
    [shown] = await read_events(stack, user)
    assert (shown["kind"], shown["task_id"]) == ("task_block", task["id"])

    # Ticked off on the phone: the app rewrites the object with its status.
    on_phone = foreign_task().replace(
        "STATUS:NEEDS-ACTION", "STATUS:COMPLETED\r\nCOMPLETED:20260924T060000Z\r\nPERCENT-COMPLETE:100"
    )
    replace_on_server(remote, href, on_phone.replace("SEQUENCE:2", "SEQUENCE:7"))

    async def done_here() -> bool:
        return [t["status"] for t in await tasks_of(stack, user)] == ["done"]

    await synced(stack, done_here, "the task done in GET /v1/tasks")
    [task] = await tasks_of(stack, user)
    assert (task["percent"], task["completed_at"]) == (100, "2026-09-24T06:00:00Z")
    # Read back, not written back: nothing waits for the server and its object is the phone's.
    await outbox_drained(db, user)
    assert named(todo_lines(server_text(remote, href)), "SEQUENCE") == ["SEQUENCE:7"]


async def test_a_task_changed_on_both_sides_keeps_the_servers_version_and_one_deleted_there_goes(
    stack: Stack, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    db = stack_db(stack)
    made = await stack.client.post(
        "/v1/tasks", json={"title": "写周报", "duration_minutes": 60}, headers=stack.headers(user)
    )
    task_id = made.json()["id"]
    await outbox_drained(db, user)
    [href] = todo_hrefs(remote)
    # Renamed in the task app, not yet read here; then changed here: our PUT meets a new ETag.
    replace_on_server(remote, href, server_text(remote, href).replace("SUMMARY:写周报", "SUMMARY:写月报"))
    changed = await stack.client.patch(
        f"/v1/tasks/{task_id}", json={"priority": 1}, headers=stack.headers(user)
    )
    assert changed.status_code == 200, changed.text
    await outbox_drained(db, user)
    outcome = await scalar(
        db,
        "select outcome from commands.caldav_outbox where event_id = :t order by id desc limit 1",
        t=task_id,
    )
    assert outcome == "conflict"
    [task] = await tasks_of(stack, user)
    assert (task["title"], task["priority"]) == ("写月报", 3)  # the server's version, whole
    assert named(todo_lines(server_text(remote, href)), "SUMMARY") == ["SUMMARY:写月报"]
    # Told at the next turn, once: the task as it is kept now, not dropped for want of an event.
    told = await next_turns_context(stack, user)
    assert [(n.outcome, n.event, n.task and n.task.id) for n in told.sync_notices] == [
        ("conflict", None, task_id)
    ]
    assert told.sync_notices[0].task is not None and told.sync_notices[0].task.title == "写月报"
    assert (await next_turns_context(stack, user)).sync_notices == ()

    # One task of three deleted in the app is the user's deletion, not a calendar that looks
    # emptied of its tasks (a test below): it goes here too.
    for title in ("交电费", "买菜"):
        more = await stack.client.post(
            "/v1/tasks", json={"title": title, "duration_minutes": 30}, headers=stack.headers(user)
        )
        assert more.status_code == 201, more.text
    await outbox_drained(db, user)
    # Its block is on the server beside it.
    assert await scalar(db, "select count(*) from commands.events where task_id = :t", t=task_id) == 1
    block_id = await scalar(db, "select id from commands.events where task_id = :t", t=task_id)
    block_href = await sent_to_server(db, str(block_id))
    with remote.client() as client:
        assert client.delete(href).status in (200, 204)

    async def gone_here() -> bool:
        return sorted(t["title"] for t in await tasks_of(stack, user)) == sorted(["交电费", "买菜"])

    await synced(stack, gone_here, "the task deleted on the server gone from GET /v1/tasks")
    assert (
        await scalar(db, "select count(*) from commands.caldav_resources where event_id = :t", t=task_id) == 0
    )
    # Its blocks went with it, here and on the server: no time kept for a task that is gone.
    assert await scalar(db, "select count(*) from commands.events where task_id = :t", t=task_id) == 0
    await outbox_drained(db, user)
    with remote.client() as client:
        assert client.request(block_href, "GET", "", {}).status == 404


async def test_our_task_change_lost_to_the_servers_version_is_offered_again_and_lands_on_top_of_it(
    stack: Stack, scripted: ScriptedModelServer, user: str, remote: Remote
) -> None:
    """Contract §22: the server's version wins a 412 and our change comes back as a held offer;
    confirming it applies only the fields our change made, on top of the server's version."""
    await connect(stack, user, remote)
    db = stack_db(stack)
    made = await stack.client.post(
        "/v1/tasks", json={"title": "写周报", "duration_minutes": 60}, headers=stack.headers(user)
    )
    task_id = made.json()["id"]
    await outbox_drained(db, user)
    [href] = todo_hrefs(remote)
    replace_on_server(remote, href, server_text(remote, href).replace("SUMMARY:写周报", "SUMMARY:写月报"))
    changed = await stack.client.patch(
        f"/v1/tasks/{task_id}", json={"priority": 1}, headers=stack.headers(user)
    )
    assert changed.status_code == 200, changed.text
    await outbox_drained(db, user)
    [task] = await tasks_of(stack, user)
    assert (task["title"], task["priority"]) == ("写月报", 3)

    offer = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert (offer["status"], offer["kind"], offer["hold_reason"]) == ("held", "task_change", "sync_conflict")
    held = offer["task_change"]
    assert held["fields"] == ["priority"]
    assert (held["before"]["id"], held["before"]["title"], held["before"]["priority"]) == (
        task_id,
        "写月报",
        3,
    )
    assert (held["after"]["title"], held["after"]["priority"]) == ("写月报", 1)
    told = await next_turns_context(stack, user)
    assert [(n.outcome, n.task and n.task.id) for n in told.sync_notices] == [("conflict", task_id)]

    scripted.set_script(script(on_user("确认", tool_calls=[call("confirm_command")])))
    answer = await stack.chat(user, "确认", active_command_id=offer["id"])
    assert answer.json()["outcome"] == "updated", answer.text
    await outbox_drained(db, user)
    [task] = await tasks_of(stack, user)
    assert (task["title"], task["priority"]) == ("写月报", 1)
    lines = todo_lines(server_text(remote, href))
    assert (named(lines, "SUMMARY"), named(lines, "PRIORITY")) == (["SUMMARY:写月报"], ["PRIORITY:1"])
    done = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert done is None or done.get("id") != offer["id"] or done.get("status") != "held"


async def test_our_task_delete_lost_to_the_servers_version_is_offered_again_and_removes_it_on_confirming(
    stack: Stack, scripted: ScriptedModelServer, user: str, remote: Remote
) -> None:
    """Contract §22: a task deleted here while the task app changed it meets a 412; the server's
    version wins (the task is back here) and our delete comes back as a held offer to remove it,
    which nothing but the user's word carries out."""
    await connect(stack, user, remote)
    db = stack_db(stack)
    made = await stack.client.post(
        "/v1/tasks", json={"title": "写周报", "duration_minutes": 60}, headers=stack.headers(user)
    )
    task_id = made.json()["id"]
    await outbox_drained(db, user)
    [href] = todo_hrefs(remote)
    assert await scalar(db, "select count(*) from commands.events where task_id = :t", t=task_id) == 1
    replace_on_server(remote, href, server_text(remote, href).replace("SUMMARY:写周报", "SUMMARY:写月报"))
    gone = await stack.client.delete(f"/v1/tasks/{task_id}", headers=stack.headers(user))
    assert gone.status_code == 204
    await outbox_drained(db, user)
    [task] = await tasks_of(stack, user)
    assert (task["id"], task["title"]) == (task_id, "写月报")  # the server's version, back here

    offer = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert (offer["status"], offer["kind"], offer["hold_reason"]) == ("held", "task_change", "sync_conflict")
    held = offer["task_change"]
    assert (held["before"]["id"], held["before"]["title"], held["after"]) == (task_id, "写月报", None)

    # A message about something else carries nothing out: the task stays, the offer waits.
    scripted.set_script(script(on_user("你好", text="你好！")))
    await stack.chat(user, "你好")
    assert [t["id"] for t in await tasks_of(stack, user)] == [task_id]
    still = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert (still["id"], still["status"]) == (offer["id"], "held")

    scripted.set_script(script(on_user("确认", tool_calls=[call("confirm_command")])))
    answer = await stack.chat(user, "确认", active_command_id=offer["id"])
    assert answer.json()["outcome"] == "deleted", answer.text
    assert await tasks_of(stack, user) == []
    assert await scalar(db, "select count(*) from commands.events where task_id = :t", t=task_id) == 0
    await outbox_drained(db, user)
    with remote.client() as client:
        assert client.request(href, "GET", "", {}).status == 404
    assert todo_hrefs(remote) == []


async def test_a_calendar_that_suddenly_shows_none_of_its_tasks_does_not_empty_them_here(
    stack: Stack, scripted: ScriptedModelServer, user: str, remote: Remote
) -> None:
    """Contract §22: a calendar that held tasks and returns none of them is not copied: the tasks
    stay here and one held offer asks; confirming it removes them here too."""
    await connect(stack, user, remote)
    db = stack_db(stack)
    ids = []
    for title in ("交电费", "写周报"):
        made = await stack.client.post(
            "/v1/tasks", json={"title": title, "duration_minutes": 30}, headers=stack.headers(user)
        )
        ids.append(made.json()["id"])
    await outbox_drained(db, user)
    with remote.client() as client:
        for href in todo_hrefs(remote):
            assert client.delete(href).status in (200, 204)

    async def offered() -> dict[str, Any] | None:
        found = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
        return found if found and found.get("hold_reason") == "sync_conflict" else None

    await synced(stack, offered, "the offer about the tasks the calendar stopped showing")
    assert sorted(t["id"] for t in await tasks_of(stack, user)) == sorted(ids)
    offer = await offered()
    assert offer is not None and offer["change"]["removed_count"] == 2
    withheld = await scalar(
        db, "select withheld -> 'ids' from commands.caldav_calendars where url = :c", c=remote.calendar_url
    )
    assert sorted(withheld) == sorted(ids)
    # Another sync while the offer waits deletes nothing either.
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]
    await outbox_drained(db, user)
    assert len(await tasks_of(stack, user)) == 2

    scripted.set_script(script(on_user("确认", tool_calls=[call("confirm_command")])))
    answer = await stack.chat(user, "确认", active_command_id=offer["id"])
    assert answer.json()["outcome"] == "deleted", answer.text
    assert await tasks_of(stack, user) == []


async def test_tasks_made_before_the_connection_go_out_when_it_is_made(
    stack: Stack, user: str, remote: Remote
) -> None:
    made = await stack.client.post(
        "/v1/tasks", json={"title": "交电费", "duration_minutes": 15}, headers=stack.headers(user)
    )
    assert made.status_code == 201, made.text
    await connect(stack, user, remote)
    await outbox_drained(stack_db(stack), user)
    [href] = todo_hrefs(remote)
    lines = todo_lines(server_text(remote, href))
    assert (named(lines, "SUMMARY"), named(lines, "UID")) == (
        ["SUMMARY:交电费"],
        [f"UID:{made.json()['id']}@calagent"],
    )
