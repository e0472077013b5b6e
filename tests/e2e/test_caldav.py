"""Connected calendars (contract §12) against a real CalDAV server (Radicale, started here like
NATS and PostgreSQL): connecting validates the login; writes by chat reach the server exactly once
through the outbox, survive an outage, and meet an edit made in the calendar app without guessing;
the app's own events come back into reads and conflict checks; disconnecting forgets the login.

Facts are read from the server itself (the `caldav` library) and from the database rows.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import caldav
import pytest
from icalendar import Calendar
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.commands.app import CommandsService
from calagent.commands.caldav.inbound import InboundSync
from calagent.commands.caldav.outbox import Deliverer
from calagent.contracts import wire
from calagent.contracts.commands import CommandRequest, PrepareOrCreate
from calagent.contracts.envelope import Envelope
from calagent.contracts.tools import PrepareOrCreateSchedule
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import caldav_stack, radicale_server
from .conftest import call, on_user, read_events, script

pytestmark = pytest.mark.e2e

WAIT_S = 20.0
# Each user owns their collections, except that a calendar whose id starts with "readonly" may be
# read but not written: the server answers a PUT there 403 (such a calendar is laid on disk by the
# test, since its owner cannot create it either).
RIGHTS = """
[root]
user: .+
collection:
permissions: R

[principal]
user: .+
collection: {user}
permissions: RW

[readonly]
user: .+
collection: {user}/readonly[^/]*
permissions: r

[calendars]
user: .+
collection: {user}/[^/]+
permissions: RWrw
"""


@pytest.fixture(scope="module")
def radicale() -> Iterator[EmbeddedRadicale]:
    with radicale_server(rights=RIGHTS) as server:
        yield server


@pytest.fixture(scope="module")
async def stack(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, radicale: EmbeddedRadicale
) -> AsyncIterator[Stack]:
    async with caldav_stack(servers, database_url, scripted, allow_networks=radicale.network) as system:
        yield system


@dataclass
class Remote:
    """One user's account on the CalDAV server and the calendar the assistant writes to."""

    url: str
    username: str
    password: str
    calendar_url: str

    def client(self) -> caldav.DAVClient:
        return caldav.DAVClient(url=self.url, username=self.username, password=self.password)

    def objects(self) -> list[tuple[str, Calendar]]:
        """(href, parsed body) of every object in the calendar, as the server holds it."""
        with self.client() as client:
            calendar = caldav.Calendar(client=client, url=self.calendar_url)
            return [(str(o.url), Calendar.from_ical(o.data)) for o in calendar.events()]

    def summaries(self) -> list[str]:
        return sorted(str(v["SUMMARY"]) for _, cal in self.objects() for v in cal.walk("VEVENT"))

    def add(self, uid: str, summary: str, start: str, end: str) -> str:
        body = (
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//app//EN\r\nBEGIN:VEVENT\r\n"
            f"UID:{uid}\r\nDTSTAMP:20260924T000000Z\r\nDTSTART:{start}\r\nDTEND:{end}\r\n"
            f"SUMMARY:{summary}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        )
        with self.client() as client:
            calendar = caldav.Calendar(client=client, url=self.calendar_url)
            return str(calendar.save_event(body).url)

    def add_raw(self, body: str) -> str:
        with self.client() as client:
            calendar = caldav.Calendar(client=client, url=self.calendar_url)
            return str(calendar.save_event(body).url)

    def retitle(self, href: str, summary: str) -> None:
        with self.client() as client:
            obj = caldav.Event(
                client=client, url=href, parent=caldav.Calendar(client=client, url=self.calendar_url)
            )
            obj.load()
            cal = Calendar.from_ical(obj.data)
            for vevent in cal.walk("VEVENT"):
                vevent["SUMMARY"] = summary
            obj.data = cal.to_ical().decode()
            obj.save(increase_seqno=False)


@pytest.fixture
def remote(radicale: EmbeddedRadicale) -> Remote:
    name = f"r{uuid.uuid4().hex[:8]}"
    password = f"app-{uuid.uuid4().hex[:10]}"
    radicale.add_user(name, password)
    calendar_url = make_calendar(radicale.url, name, password, "Personal")
    return Remote(radicale.user_url(name), name, password, calendar_url)


def stack_db(stack: Stack) -> AsyncEngine:
    engine = commands_app(stack).engine
    assert engine is not None
    return engine


def commands_app(stack: Stack) -> CommandsService:
    return next(app for app in stack.apps if isinstance(app, CommandsService))


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def scalar(db: AsyncEngine, sql: str, **params: Any) -> Any:
    async with db.connect() as conn:
        return await conn.scalar(text(sql), params)


async def outbox_drained(db: AsyncEngine, user: str) -> None:
    async def drained() -> bool:
        waiting = await scalar(
            db,
            "select count(*) from commands.caldav_outbox where user_id = :u and delivered_at is null",
            u=user,
        )
        return int(waiting) == 0

    await eventually(drained, "the outbox to drain")


async def connect(stack: Stack, user: str, remote: Remote) -> dict[str, Any]:
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": remote.url, "username": remote.username, "password": remote.password},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()

    async def first_sync_done() -> bool:
        synced = await scalar(
            stack_db(stack), "select last_synced_at from commands.caldav_accounts where id = :a", a=body["id"]
        )
        return synced is not None

    # The connection asks for a first sync at once; later ones come only when a test asks, so a
    # test knows which of the server's changes have been read.
    await eventually(first_sync_done, "the first sync of the new account")
    return body


def create_rule(title: str, date: str, time: str) -> dict[str, Any]:
    return on_user(title, tool_calls=[call("prepare_or_create_schedule", title=title, date=date, time=time)])


async def create_by_chat(
    stack: Stack, scripted: ScriptedModelServer, user: str, title: str, date: str = "D+1", time: str = "15:00"
) -> dict[str, Any]:
    scripted.set_script(script(create_rule(title, date, time)))
    answer = (await stack.chat(user, f"{title}，{date} {time}")).json()
    assert answer["outcome"] == "created", answer
    event: dict[str, Any] = answer["events"][0]
    return event


# ---- connecting ---------------------------------------------------------------------------------


async def test_a_refused_login_is_422_and_stores_nothing(
    stack: Stack, db: AsyncEngine, user: str, remote: Remote
) -> None:
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": remote.url, "username": remote.username, "password": "wrong"},
        headers=stack.headers(user),
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "refused", response.text
    assert await scalar(db, "select count(*) from commands.caldav_accounts where user_id = :u", u=user) == 0


async def test_connecting_lists_the_calendars_and_keeps_the_password_only_encrypted(
    stack: Stack, db: AsyncEngine, user: str, remote: Remote
) -> None:
    connected = await connect(stack, user, remote)
    assert connected["calendars"] == [
        {"name": "Personal", "url": remote.calendar_url, "color": None, "default": True}
    ]
    listed = await stack.client.get("/v1/accounts", headers=stack.headers(user))
    assert listed.status_code == 200
    [account] = listed.json()["accounts"]
    assert account["id"] == connected["id"]
    assert remote.password not in listed.text
    secret = await scalar(db, "select secret from commands.caldav_accounts where id = :a", a=connected["id"])
    assert remote.password.encode() not in bytes(secret)
    # The account's calendar joins the names the model may pick from.
    names = await scalar(
        db, "select array_agg(name order by position) from commands.calendars where user_id = :u", u=user
    )
    assert "Personal" in names
    # Another user sees none of it.
    other = await stack.client.get("/v1/accounts", headers=stack.headers(f"{user}-other"))
    assert other.json() == {"accounts": []}


# ---- outbound -----------------------------------------------------------------------------------


async def test_create_move_and_delete_by_chat_reach_the_server_exactly_once(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    event = await create_by_chat(stack, scripted, user, "和张三开会")
    await outbox_drained(db, user)
    [(href, body)] = remote.objects()
    [vevent] = body.walk("VEVENT")
    assert str(vevent["UID"]) == f"{event['id']}@calagent"
    assert str(vevent["SUMMARY"]) == "和张三开会"
    assert vevent.decoded("DTSTART").isoformat() == "2026-09-25T15:00:00+08:00"

    scripted.set_script(
        script(
            on_user("改到后天", tool_calls=[call("update_schedule", event_id=event["id"], date="D+2")]),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    assert (await stack.chat(user, "改到后天")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    await outbox_drained(db, user)
    [(moved_href, moved)] = remote.objects()
    assert moved_href == href
    assert moved.walk("VEVENT")[0].decoded("DTSTART").isoformat() == "2026-09-26T15:00:00+08:00"

    scripted.set_script(
        script(
            on_user("删掉", tool_calls=[call("delete_schedule", event_id=event["id"])]),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    assert (await stack.chat(user, "删掉它")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "deleted"
    await outbox_drained(db, user)
    assert remote.objects() == []
    outcomes = await scalar(
        db,
        "select array_agg(distinct outcome) from commands.caldav_outbox where user_id = :u",
        u=user,
    )
    assert outcomes == ["delivered"]


async def test_a_chat_create_on_a_connected_account_is_named_by_the_calendar_it_lands_in(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    """A write with no calendar named goes to the user's default — the connected one (§12) — and
    the event says so: it once answered the first default name ("工作") while its object sat in
    the server's "Personal"."""
    await connect(stack, user, remote)
    event = await create_by_chat(stack, scripted, user, "周报")
    assert event["calendar"] == "Personal", event
    await outbox_drained(db, user)
    [(_, body)] = remote.objects()  # the object sits in the server's "Personal"
    assert str(body.walk("VEVENT")[0]["SUMMARY"]) == "周报"
    [stored] = [e for e in await read_events(stack, user) if e["id"] == event["id"]]
    assert stored["calendar"] == "Personal"


async def test_a_series_and_its_edits_by_scope_reach_the_server_as_one_object(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    scripted.set_script(
        script(
            on_user(
                "重复",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="周会",
                        date="W1+1",
                        time="10:00",
                        recurrence="FREQ=WEEKLY;BYDAY=MO;COUNT=4",
                    )
                ],
            )
        )
    )
    assert (await stack.chat(user, "重复的周会")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "created"
    occurrences = await read_events(stack, user)
    assert len(occurrences) == 4

    async def change(tool: str, **arguments: Any) -> None:
        scripted.set_script(
            script(
                on_user("这一次", tool_calls=[call(tool, **arguments)]),
                on_user("确认", tool_calls=[call("confirm_command")]),
            )
        )
        assert (await stack.chat(user, "这一次改一下")).json()["outcome"] in ("held", "conflict")
        assert (await stack.chat(user, "确认")).json()["outcome"] in ("updated", "deleted")
        await outbox_drained(db, user)

    await change("update_schedule", event_id=occurrences[1]["id"], time="11:00", scope="this")
    await change("delete_schedule", event_id=occurrences[2]["id"], scope="this")
    [(_, body)] = remote.objects()
    components: list[Any] = sorted(body.walk("VEVENT"), key=lambda v: "RECURRENCE-ID" in v)
    master, override = components
    assert "COUNT=4" in master["RRULE"].to_ical().decode()
    assert [d.dt.isoformat() for d in master["EXDATE"].dts] == ["2026-10-12T10:00:00+08:00"]
    assert override.decoded("RECURRENCE-ID").isoformat() == "2026-10-05T10:00:00+08:00"
    assert override.decoded("DTSTART").isoformat() == "2026-10-05T11:00:00+08:00"
    assert str(master["UID"]) == str(override["UID"]) == f"{occurrences[0]['series_id']}@calagent"

    await change("delete_schedule", event_id=occurrences[0]["id"], scope="all")
    assert remote.objects() == []


async def test_events_written_before_the_connection_go_out_when_it_is_made(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    event = await create_by_chat(stack, scripted, user, "早就约好的饭局", time="18:30")
    assert await scalar(db, "select count(*) from commands.caldav_outbox where user_id = :u", u=user) == 0
    await connect(stack, user, remote)
    await outbox_drained(db, user)
    [(_, body)] = remote.objects()
    assert str(body.walk("VEVENT")[0]["UID"]) == f"{event['id']}@calagent"


async def test_an_outage_loses_nothing_and_duplicates_nothing(
    stack: Stack,
    scripted: ScriptedModelServer,
    db: AsyncEngine,
    user: str,
    remote: Remote,
    radicale: EmbeddedRadicale,
) -> None:
    await connect(stack, user, remote)
    first = await create_by_chat(stack, scripted, user, "周会", time="10:00")
    await outbox_drained(db, user)
    radicale.stop()
    try:
        await create_by_chat(stack, scripted, user, "午饭", time="12:00")
        scripted.set_script(
            script(
                on_user("周会改到", tool_calls=[call("update_schedule", event_id=first["id"], time="11:00")]),
                on_user("确认", tool_calls=[call("confirm_command")]),
            )
        )
        assert (await stack.chat(user, "周会改到11点")).json()["outcome"] == "held"
        assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"

        async def retried() -> bool:
            attempts = await scalar(
                db,
                "select coalesce(max(attempts), 0) from commands.caldav_outbox"
                " where user_id = :u and delivered_at is null",
                u=user,
            )
            return int(attempts) >= 2

        await eventually(retried, "deliveries to be retried while the server is down")
    finally:
        radicale.start()
    await outbox_drained(db, user)
    assert remote.summaries() == ["午饭", "周会"]
    starts = sorted(
        v.decoded("DTSTART").isoformat() for _, cal in remote.objects() for v in cal.walk("VEVENT")
    )
    assert starts == ["2026-09-25T11:00:00+08:00", "2026-09-25T12:00:00+08:00"]


async def test_replicas_share_the_outbox_and_no_row_is_delivered_twice(
    stack: Stack, db: AsyncEngine, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    assert stack.probe is not None
    worker = commands_app(stack).sync
    assert worker is not None
    # Two more replicas' workers beside the running one, on the same database.
    replicas = [
        Deliverer(
            worker.deliverer.engine,
            worker.deliverer.vault,
            stack.clock,
            timedelta(minutes=30),
            worker.deliverer.guard,
        )
        for _ in range(2)
    ]

    async def create(i: int) -> None:
        envelope = Envelope(
            turn_id=uuid.uuid4().hex,
            user_id=user,
            conversation_id="c",
            occurred_at=stack.clock.now(),
            tz="Asia/Shanghai",
        )
        result = await stack.probe.request(  # type: ignore[union-attr]
            wire.COMMAND_EXECUTE,
            CommandRequest(
                command=PrepareOrCreate(
                    envelope=envelope,
                    idempotency_key=f"k{i}",
                    args=PrepareOrCreateSchedule(title=f"事项{i}", date=f"2026-10-{1 + i:02d}", time="09:00"),
                )
            ),
        )
        assert result.status == "created", result

    await asyncio.gather(*(create(i) for i in range(12)), *(r.deliver_due() for r in replicas))
    await asyncio.gather(*(r.deliver_due() for r in replicas))
    await outbox_drained(db, user)
    rows = await scalar(db, "select count(*) from commands.caldav_outbox where user_id = :u", u=user)
    attempts = await scalar(db, "select sum(attempts) from commands.caldav_outbox where user_id = :u", u=user)
    assert (rows, attempts) == (12, 12)
    uids = [str(v["UID"]) for _, cal in remote.objects() for v in cal.walk("VEVENT")]
    assert len(uids) == len(set(uids)) == 12


# ---- inbound ------------------------------------------------------------------------------------


async def test_an_event_added_in_the_calendar_app_is_read_back_and_blocks_a_conflicting_create(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    remote.add("dentist-from-phone", "看牙医", "20260925T070000Z", "20260925T080000Z")  # 15:00–16:00 +08
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def visible() -> bool:
        return any(e["title"] == "看牙医" for e in await read_events(stack, user))

    await eventually(visible, "the server's event in GET /v1/events")
    [dentist] = [e for e in await read_events(stack, user) if e["title"] == "看牙医"]
    assert (dentist["start"], dentist["calendar"]) == ("2026-09-25T15:00:00+08:00", "Personal")

    scripted.set_script(script(create_rule("和李四开会", "D+1", "15:30")))
    answer = (await stack.chat(user, "明天下午三点半和李四开会")).json()
    assert answer["outcome"] == "conflict", answer
    # Read back, not written back: the server still holds only the app's own event.
    await outbox_drained(db, user)
    assert remote.summaries() == ["看牙医"]


async def test_an_event_from_the_calendar_app_moved_by_chat_keeps_its_uid_and_address(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    href = remote.add("ABCD-1234-phone", "家长会", "20260925T020000Z", "20260925T030000Z")  # 10:00 +08
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def visible() -> bool:
        return len(await read_events(stack, user)) == 1

    await eventually(visible, "the app's event in GET /v1/events")
    [meeting] = await read_events(stack, user)
    scripted.set_script(
        script(
            on_user("家长会改到", tool_calls=[call("update_schedule", event_id=meeting["id"], time="16:00")]),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    assert (await stack.chat(user, "家长会改到下午四点")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    await outbox_drained(db, user)
    [(moved_href, body)] = remote.objects()
    [vevent] = body.walk("VEVENT")
    assert (moved_href, str(vevent["UID"])) == (href, "ABCD-1234-phone")
    # The same instant; written in the zone the app wrote it in (UTC here).
    assert vevent.decoded("DTSTART") == datetime.fromisoformat("2026-09-25T16:00:00+08:00")


async def test_a_series_with_an_exception_and_a_moved_occurrence_comes_back_as_the_app_shows_it(
    stack: Stack, scripted: ScriptedModelServer, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    # Daily 09:00 Shanghai from Friday 25th, five times; Saturday is cancelled (EXDATE), Sunday's
    # moved to 11:00 (an override), all in one object as Apple Calendar or Thunderbird write it.
    remote.add_raw(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//app//EN\r\n"
        "BEGIN:VTIMEZONE\r\nTZID:Asia/Shanghai\r\nBEGIN:STANDARD\r\nDTSTART:19700101T000000\r\n"
        "TZOFFSETFROM:+0800\r\nTZOFFSETTO:+0800\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n"
        "BEGIN:VEVENT\r\nUID:run-series\r\nDTSTAMP:20260924T000000Z\r\n"
        "DTSTART;TZID=Asia/Shanghai:20260925T090000\r\nDTEND;TZID=Asia/Shanghai:20260925T100000\r\n"
        "RRULE:FREQ=DAILY;COUNT=5\r\nEXDATE;TZID=Asia/Shanghai:20260926T090000\r\n"
        "SUMMARY:晨跑\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nUID:run-series\r\nDTSTAMP:20260924T000000Z\r\n"
        "RECURRENCE-ID;TZID=Asia/Shanghai:20260927T090000\r\n"
        "DTSTART;TZID=Asia/Shanghai:20260927T110000\r\nDTEND;TZID=Asia/Shanghai:20260927T120000\r\n"
        "SUMMARY:晨跑\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def expanded() -> bool:
        return len(await read_events(stack, user)) == 4

    await eventually(expanded, "the series' occurrences in GET /v1/events")
    starts = [e["start"] for e in await read_events(stack, user)]
    assert starts == [
        "2026-09-25T09:00:00+08:00",
        "2026-09-27T11:00:00+08:00",
        "2026-09-28T09:00:00+08:00",
        "2026-09-29T09:00:00+08:00",
    ]
    # A create on the moved occurrence's new time meets it; one at the cancelled slot does not.
    scripted.set_script(script(create_rule("和王五通话", "D+3", "11:30")))
    assert (await stack.chat(user, "周日11点半和王五通话")).json()["outcome"] == "conflict"
    scripted.set_script(script(create_rule("买菜", "D+2", "09:00")))
    assert (await stack.chat(user, "周六九点买菜")).json()["outcome"] == "created"


async def test_only_the_replica_holding_an_accounts_lease_syncs_it(
    stack: Stack, user: str, remote: Remote
) -> None:
    connected = await connect(stack, user, remote)
    worker = commands_app(stack).sync
    assert worker is not None
    mine = worker.inbound
    other = InboundSync(mine.engine, mine.vault, "another-replica", "Asia/Shanghai", mine.guard, mine.holds)
    assert await other.take_lease(connected["id"])
    assert await mine.sync_account(connected["id"]) is None
    await other.release_lease(connected["id"], synced=False)
    assert await mine.sync_account(connected["id"]) is not None


# ---- both sides changed it ----------------------------------------------------------------------


async def test_an_edit_on_both_sides_keeps_the_servers_version_and_offers_ours_again(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    event = await create_by_chat(stack, scripted, user, "读书会", time="19:00")
    await outbox_drained(db, user)
    [(href, _)] = remote.objects()
    remote.retitle(href, "读书会（改在咖啡馆）")  # edited in the calendar app, not yet synced back

    scripted.set_script(
        script(
            on_user("读书会改到", tool_calls=[call("update_schedule", event_id=event["id"], time="20:00")]),
            on_user("确认", tool_calls=[call("confirm_command")]),
            on_user("还是按我的改", tool_calls=[call("confirm_command")]),
        )
    )
    assert (await stack.chat(user, "读书会改到8点")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    await outbox_drained(db, user)

    # The server's version won: nothing of ours overwrote it, and ours is stored as it is there.
    [(_, kept)] = remote.objects()
    assert str(kept.walk("VEVENT")[0]["SUMMARY"]) == "读书会（改在咖啡馆）"
    [local] = await read_events(stack, user)
    assert (local["title"], local["start"]) == ("读书会（改在咖啡馆）", "2026-09-25T19:00:00+08:00")
    assert (
        await scalar(
            db,
            "select outcome from commands.caldav_outbox where user_id = :u order by id desc limit 1",
            u=user,
        )
        == "conflict"
    )
    # Our change waits as a held offer for the user's word.
    offer = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert (offer["status"], offer["kind"], offer["hold_reason"]) == ("held", "change", "sync_conflict")
    assert offer["change"]["after"]["start"] == "2026-09-25T20:00:00+08:00"

    # The next, unrelated message changes nothing: the offer waits, both sides keep the server's.
    unrelated = (await stack.chat(user, "周末天气怎么样")).json()
    assert unrelated["outcome"] != "updated"
    [local] = await read_events(stack, user)
    assert (local["title"], local["start"]) == ("读书会（改在咖啡馆）", "2026-09-25T19:00:00+08:00")
    [(_, still)] = remote.objects()
    assert still.walk("VEVENT")[0].decoded("DTSTART").isoformat() == "2026-09-25T19:00:00+08:00"
    waiting = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert (waiting["id"], waiting["status"]) == (offer["id"], "held")

    # The user answers the offer's card (the page sends its id): their word runs it.
    mine = await stack.chat(user, "确认，还是按我的改", active_command_id=offer["id"])
    assert mine.json()["outcome"] == "updated", mine.text
    await outbox_drained(db, user)
    [(_, final)] = remote.objects()
    assert final.walk("VEVENT")[0].decoded("DTSTART").isoformat() == "2026-09-25T20:00:00+08:00"


async def test_a_sync_conflict_waits_beside_the_users_next_request_and_is_answered_from_its_card(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    """Contract §19: an offer from outside is never superseded by the user's later request; it
    waits beside it (listed by GET /v1/commands/waiting) and its card's id answers it."""
    await connect(stack, user, remote)
    event = await create_by_chat(stack, scripted, user, "读书会", time="19:00")
    await outbox_drained(db, user)
    [(href, _)] = remote.objects()
    remote.retitle(href, "读书会（改在咖啡馆）")
    scripted.set_script(
        script(
            on_user("读书会改到", tool_calls=[call("update_schedule", event_id=event["id"], time="20:00")]),
            on_user("确认", tool_calls=[call("confirm_command")]),
            on_user("面试", tool_calls=[call("prepare_or_create_schedule", title="面试", date="D+1")]),
        )
    )
    assert (await stack.chat(user, "读书会改到8点")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    await outbox_drained(db, user)
    offer = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert (offer["kind"], offer["hold_reason"]) == ("change", "sync_conflict")

    # The user's own next request: the conflict steps aside instead of ending.
    asked = (await stack.chat(user, "明天面试")).json()
    assert asked["outcome"] == "needs_time", asked
    mine = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert mine["id"] == asked["command"]["id"]
    listed = (await stack.client.get("/v1/commands/waiting", headers=stack.headers(user))).json()["commands"]
    assert [(w["id"], w["hold_reason"]) for w in listed] == [(offer["id"], "sync_conflict")]

    # Its card answers it; the user's own request stays as it was.
    answered = (await stack.chat(user, "确认，还是按我的改", active_command_id=offer["id"])).json()
    assert answered["outcome"] == "updated", answered
    await outbox_drained(db, user)
    [(_, final)] = remote.objects()
    assert final.walk("VEVENT")[0].decoded("DTSTART").isoformat() == "2026-09-25T20:00:00+08:00"
    still = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert (still["id"], still["status"]) == (asked["command"]["id"], "needs_time")
    assert (await stack.client.get("/v1/commands/waiting", headers=stack.headers(user))).json()[
        "commands"
    ] == []

    # The next, unrelated message changes nothing.
    await stack.chat(user, "周末天气怎么样")
    [local] = await read_events(stack, user)
    assert local["start"] == "2026-09-25T20:00:00+08:00"


async def test_a_write_the_server_refuses_is_marked_on_the_event_and_not_retried(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, radicale: EmbeddedRadicale
) -> None:
    name = f"ro{uuid.uuid4().hex[:8]}"
    radicale.add_user(name, "pw-readonly")
    folder = radicale.data_dir / "collections" / "collection-root" / name / "readonly-shared"
    folder.mkdir(parents=True)
    (folder / ".Radicale.props").write_text(json.dumps({"tag": "VCALENDAR", "D:displayname": "Shared"}))
    calendar_url = f"{radicale.user_url(name)}readonly-shared/"
    remote = Remote(radicale.user_url(name), name, "pw-readonly", calendar_url)
    await connect(stack, user, remote)
    await create_by_chat(stack, scripted, user, "团建", time="14:00")
    await outbox_drained(db, user)
    [event] = await read_events(stack, user)
    assert event["sync_state"] == "rejected"
    row = await scalar(
        db, "select outcome || ':' || attempts from commands.caldav_outbox where user_id = :u", u=user
    )
    assert row == "rejected:1"
    assert remote.objects() == []
    # Told once, in the next receipt, whatever that turn was about.
    scripted.set_script(script(on_user("谢谢", text="不客气。")))
    told = (await stack.chat(user, "谢谢")).json()
    assert "团建" in told["reply"]
    assert await scalar(
        db, "select reported_at is not null from commands.caldav_outbox where user_id = :u", u=user
    )
    again = (await stack.chat(user, "谢谢")).json()
    assert "团建" not in again["reply"]


# ---- traced -------------------------------------------------------------------------------------


async def test_a_delivery_is_a_span_of_the_turn_that_wrote_it(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    made_here = not isinstance(provider, TracerProvider)
    if not isinstance(provider, TracerProvider):
        # The services' tracers are proxies: from here on they record into this provider.
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        await connect(stack, user, remote)
        await create_by_chat(stack, scripted, user, "体检", time="08:00")
        await outbox_drained(db, user)
    finally:
        spans = exporter.get_finished_spans()
        exporter.shutdown()
        if made_here:
            provider.shutdown()  # later tests go on as before: spans made, none kept
    [deliver] = [s for s in spans if s.name == "sync.deliver"]
    assert deliver.attributes is not None and deliver.attributes["calagent.outcome"] == "delivered"
    same_trace = {s.name for s in spans if s.context.trace_id == deliver.context.trace_id}
    # The delivery sits in the turn's own trace, beside the agent's tool span and the command.
    assert {"tool.prepare_or_create_schedule", "command.prepare_or_create"} <= same_trace


# ---- disconnecting ------------------------------------------------------------------------------


async def test_disconnecting_erases_the_login_and_nothing_more_is_delivered(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    connected = await connect(stack, user, remote)
    await create_by_chat(stack, scripted, user, "健身", time="18:00")
    await outbox_drained(db, user)
    assert remote.summaries() == ["健身"]

    other = await stack.client.delete(f"/v1/accounts/{connected['id']}", headers=stack.headers(f"{user}-x"))
    assert other.status_code == 404
    gone = await stack.client.delete(f"/v1/accounts/{connected['id']}", headers=stack.headers(user))
    assert gone.status_code == 204
    assert await scalar(db, "select count(*) from commands.caldav_accounts where user_id = :u", u=user) == 0
    assert await scalar(db, "select count(*) from commands.caldav_resources where user_id = :u", u=user) == 0
    assert (await stack.client.get("/v1/accounts", headers=stack.headers(user))).json() == {"accounts": []}

    rows_before = await scalar(db, "select count(*) from commands.caldav_outbox where user_id = :u", u=user)
    await create_by_chat(stack, scripted, user, "游泳", time="20:00")
    assert (
        await scalar(db, "select count(*) from commands.caldav_outbox where user_id = :u", u=user)
        == rows_before
    )
    await asyncio.sleep(0.5)  # a sweep or two
    assert remote.summaries() == ["健身"]


# ---- the change log and undo (contract §15) -------------------------------------------------------

APP_OBJECT = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//phone//app//EN\r\nBEGIN:VEVENT\r\n"
    "UID:PHONE-UNDO-{tag}\r\nDTSTAMP:20260924T000000Z\r\nDTSTART:20260925T020000Z\r\n"
    "DTEND:20260925T030000Z\r\nSUMMARY:家长会\r\nLOCATION:实验小学\r\nDESCRIPTION:带成绩单\r\n"
    "CATEGORIES:家庭\r\nX-PHONE-COLOR:teal\r\nBEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:家长会\r\n"
    "TRIGGER:-PT30M\r\nEND:VALARM\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


async def test_an_app_event_deleted_by_chat_and_undone_comes_back_to_the_server_whole(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    tag = uuid.uuid4().hex[:8]
    remote.add_raw(APP_OBJECT.format(tag=tag))
    [(_, original)] = remote.objects()
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def visible() -> bool:
        return len(await read_events(stack, user)) == 1

    await eventually(visible, "the app's event in GET /v1/events")
    [meeting] = await read_events(stack, user)
    log = (await stack.client.get("/v1/changes", headers=stack.headers(user))).json()["changes"]
    assert [(c["source"], c["kind"], c["uid"]) for c in log] == [("sync", "created", f"PHONE-UNDO-{tag}")]

    scripted.set_script(script(on_user("删掉", tool_calls=[call("delete_schedule", event_id=meeting["id"])])))
    assert (await stack.chat(user, "删掉家长会")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "deleted"
    await outbox_drained(db, user)
    assert remote.objects() == []

    back = (await stack.chat(user, "撤销")).json()
    assert (back["outcome"], back["model_calls"]) == ("created", 0), back
    await outbox_drained(db, user)
    [(_, restored)] = remote.objects()
    [was] = original.walk("VEVENT")
    [now] = restored.walk("VEVENT")
    for name in ("UID", "SUMMARY", "LOCATION", "DESCRIPTION", "X-PHONE-COLOR"):
        assert str(now[name]) == str(was[name]), name
    assert now.decoded("DTSTART") == was.decoded("DTSTART")
    assert now.get("CATEGORIES").to_ical() == was.get("CATEGORIES").to_ical()
    assert [a.decoded("TRIGGER") for a in now.walk("VALARM")] == [timedelta(minutes=-30)]
    [event] = await read_events(stack, user)
    assert (event["id"], event["uid"]) == (meeting["id"], meeting["uid"])

    # The next, unrelated message changes nothing, here or on the server.
    scripted.set_script(script(on_user("谢谢", text="不客气。")))
    await stack.chat(user, "谢谢")
    await outbox_drained(db, user)
    assert [str(v["UID"]) for _, c in remote.objects() for v in c.walk("VEVENT")] == [f"PHONE-UNDO-{tag}"]
    assert len(await read_events(stack, user)) == 1
