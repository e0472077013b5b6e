"""The user's calendar is kept whole (contract §14) against two CalDAV servers (Radicale and
Xandikos, both from pip, started here on loopback): an object the user's calendar app wrote —
attendees, organizer, place, notes, address, class, attachments, X- properties, two alarms, an
override — is synced in, changed by chat, and read back from the server. Every property nobody
asked to change is the same, SEQUENCE is one higher, nothing of the assistant's is added, and the
event keeps the UID it was born with in the feed and the API.

Facts come from the server itself (a GET of the object) and from the gateway's answers.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import caldav
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from icalendar import Calendar
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.commands.adapters.store import from_server
from calagent.commands.domain.model import Event, local_uid
from calagent.commands.ical.parse import parse_resource
from calagent.contracts import wire
from calagent.contracts.commands import CommandRequest, MergeStub, PrepareChange
from calagent.contracts.envelope import Envelope
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import UpdateSchedule
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.icalobjects import (
    STAMPS,
    alarm_lines,
    property_lines,
    rich_events,
    sequence,
    vevents,
)
from calagent.devtools.testing.servers import Servers
from calagent.devtools.testing.xandikos import EmbeddedXandikos
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import caldav_stack, radicale_server
from .conftest import call, on_user, read_events, script
from .test_caldav import Remote, commands_app, connect, eventually, outbox_drained, stack_db

pytestmark = pytest.mark.e2e

SHANGHAI = ZoneInfo("Asia/Shanghai")

REVIEW_LINES = [
    "DTSTAMP:20260901T080000Z",
    "CREATED:20260801T080000Z",
    "LAST-MODIFIED:20260901T080000Z",
    "SEQUENCE:2",
    "SUMMARY;LANGUAGE=zh-CN:外部评审",
    "LOCATION:会议室 A\\, 3楼",
    "DESCRIPTION:议程：\\n1. 设计评审\\n2. 预算",
    "URL;VALUE=URI:https://meet.example.com/r/7c1a?x=1&y=2",
    "CLASS:CONFIDENTIAL",
    "TRANSP:OPAQUE",
    "STATUS:CONFIRMED",
    'ORGANIZER;CN="Li, Si":mailto:lisi@example.com',
    "ATTENDEE;CN=Zhang San;PARTSTAT=ACCEPTED;ROLE=REQ-PARTICIPANT:mailto:zhangsan@example.com",
    "ATTENDEE;CN=Wang Wu;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:wangwu@example.com",
    "ATTACH;FMTTYPE=application/pdf:https://files.example.com/agenda.pdf",
    "X-APPLE-TRAVEL-ADVISORY-BEHAVIOR:AUTOMATIC",
    'X-CUSTOM;X-PARAM="semi;colon":value\\, with\\; odd: chars',
    "BEGIN:VALARM",
    "ACTION:DISPLAY",
    "TRIGGER:-PT15M",
    "DESCRIPTION:Reminder",
    "X-WR-ALARMUID:A1",
    "END:VALARM",
    "BEGIN:VALARM",
    "ACTION:AUDIO",
    "TRIGGER;VALUE=DATE-TIME:20260925T013000Z",
    "ATTACH;VALUE=URI:Basso",
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


def calendar_object(*components: list[str]) -> str:
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//Apple Inc.//macOS 15.1//EN", "CALSCALE:GREGORIAN"]
    lines += SHANGHAI_VTIMEZONE
    for component in components:
        lines += ["BEGIN:VEVENT", *component, "END:VEVENT"]
    return "\r\n".join([*lines, "END:VCALENDAR"]) + "\r\n"


def single_review(uid: str) -> str:
    """Friday 25 September 10:00–11:00 Shanghai, as the user's calendar app wrote it."""
    return calendar_object(
        [
            f"UID:{uid}",
            "DTSTART;TZID=Asia/Shanghai:20260925T100000",
            "DTEND;TZID=Asia/Shanghai:20260925T110000",
            *REVIEW_LINES,
        ]
    )


def weekly_review(uid: str) -> str:
    """Weekly from Friday 25 September 10:00, six times; the second one moved to 14:00 online."""
    return calendar_object(
        [
            f"UID:{uid}",
            "DTSTART;TZID=Asia/Shanghai:20260925T100000",
            "DTEND;TZID=Asia/Shanghai:20260925T110000",
            "RRULE:FREQ=WEEKLY;COUNT=6",
            *REVIEW_LINES,
        ],
        [
            f"UID:{uid}",
            "RECURRENCE-ID;TZID=Asia/Shanghai:20261002T100000",
            "DTSTART;TZID=Asia/Shanghai:20261002T140000",
            "DTEND;TZID=Asia/Shanghai:20261002T150000",
            "DTSTAMP:20260901T080000Z",
            "SEQUENCE:2",
            "SUMMARY:外部评审",
            "LOCATION:线上",
            'ORGANIZER;CN="Li, Si":mailto:lisi@example.com',
            "ATTENDEE;CN=Zhang San;PARTSTAT=DECLINED:mailto:zhangsan@example.com",
            "X-MOZ-GENERATION:3",
        ],
    )


# ---- two servers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def radicale() -> Iterator[EmbeddedRadicale]:
    with radicale_server() as server:
        yield server


@pytest.fixture(params=["radicale", "xandikos"])
def remote(request: pytest.FixtureRequest, radicale: EmbeddedRadicale) -> Iterator[Remote]:
    """A fresh calendar of one account on the server named by the parameter."""
    if request.param == "radicale":
        name = f"r{uuid.uuid4().hex[:8]}"
        password = f"app-{uuid.uuid4().hex[:10]}"
        radicale.add_user(name, password)
        yield Remote(
            radicale.user_url(name), name, password, make_calendar(radicale.url, name, password, "Work")
        )
        return
    # One principal and no login per Xandikos: a server of its own per test.
    with tempfile.TemporaryDirectory(prefix="calagent-xandikos-") as tmp:
        server = EmbeddedXandikos(Path(tmp))
        server.start()
        try:
            yield Remote(server.url, "anyone", "any-password", server.calendar_url)
        finally:
            server.stop()


@pytest.fixture
def radicale_remote(radicale: EmbeddedRadicale) -> Remote:
    name = f"r{uuid.uuid4().hex[:8]}"
    password = f"app-{uuid.uuid4().hex[:10]}"
    radicale.add_user(name, password)
    return Remote(
        radicale.user_url(name), name, password, make_calendar(radicale.url, name, password, "Work")
    )


@pytest.fixture(scope="module")
async def stack(servers: Servers, database_url: str, scripted: ScriptedModelServer) -> AsyncIterator[Stack]:
    # Two servers, and a Xandikos of its own per test: all of loopback is allowed.
    async with caldav_stack(
        servers, database_url, scripted, allow_networks="127.0.0.0/8", export_allow_networks=True
    ) as system:
        yield system


# ---- helpers -------------------------------------------------------------------------------------


def put_object(remote: Remote, uid: str, body: str) -> str:
    """The object as the user's calendar app puts it (a plain conditional PUT); its address."""
    href = f"{remote.calendar_url.rstrip('/')}/{uid}.ics"
    with remote.client() as client:
        response = client.put(
            href, body, {"Content-Type": "text/calendar; charset=utf-8", "If-None-Match": "*"}
        )
    assert response.status in (201, 204), response.status
    return href


def get_object(remote: Remote, href: str) -> str:
    with remote.client() as client:
        obj = caldav.Event(
            client=client, url=href, parent=caldav.Calendar(client=client, url=remote.calendar_url)
        )
        obj.load()
        return str(obj.data)


async def sync_in(stack: Stack, user: str, count: int) -> list[dict[str, Any]]:
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def arrived() -> bool:
        return len(await read_events(stack, user)) >= count

    await eventually(arrived, "the server's events in GET /v1/events")
    return await read_events(stack, user)


async def change_by_chat(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, words: str, **update: Any
) -> None:
    scripted.set_script(
        script(
            on_user(words, tool_calls=[call("update_schedule", **update)]),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    held = (await stack.chat(user, words)).json()
    assert held["outcome"] in ("held", "conflict"), held
    done = (await stack.chat(user, "确认")).json()
    assert done["outcome"] == "updated", done
    await outbox_drained(db, user)


def same_except(before: Any, after: Any, touched: set[str]) -> None:
    assert property_lines(after, touched) == property_lines(before, touched)


# ---- a single event ------------------------------------------------------------------------------


async def test_an_event_from_the_calendar_app_moved_and_renamed_by_chat_keeps_everything_else(
    stack: Stack, scripted: ScriptedModelServer, user: str, remote: Remote
) -> None:
    await connect(stack, user, remote)
    uid = f"7C1A-{uuid.uuid4().hex[:8]}@example.com"
    href = put_object(remote, uid, single_review(uid))
    before = vevents(get_object(remote, href))[""]
    [event] = await sync_in(stack, user, 1)
    await change_by_chat(
        stack,
        scripted,
        stack_db(stack),
        user,
        "把外部评审改到9月30日下午四点，叫外部评审（终稿）",
        event_id=event["id"],
        title="外部评审（终稿）",
        date="2026-09-30",
        time="16:00",
    )
    after = vevents(get_object(remote, href))[""]
    same_except(before, after, {"DTSTART", "DTEND", "SUMMARY", *STAMPS})
    assert alarm_lines(after) == alarm_lines(before)
    assert after.decoded("DTSTART") == datetime.fromisoformat("2026-09-30T16:00:00+08:00")
    assert property_lines(after)["DTSTART"] == ["DTSTART;TZID=Asia/Shanghai:20260930T160000"]
    assert property_lines(after)["SUMMARY"] == ["SUMMARY;LANGUAGE=zh-CN:外部评审（终稿）"]
    assert sequence(after) == sequence(before) + 1
    assert after.decoded("LAST-MODIFIED") == stack.clock.now().astimezone(UTC)
    assert "CATEGORIES" not in after


# ---- a series, by scope --------------------------------------------------------------------------


async def test_a_series_changed_this_once_gains_one_override_and_all_changed_keeps_the_rest(
    stack: Stack, scripted: ScriptedModelServer, user: str, remote: Remote
) -> None:
    db = stack_db(stack)
    await connect(stack, user, remote)
    uid = f"weekly-{uuid.uuid4().hex[:8]}@example.com"
    href = put_object(remote, uid, weekly_review(uid))
    original = get_object(remote, href)
    before = vevents(original)
    moved_slot = datetime(2026, 10, 2, 2, 0, tzinfo=UTC).isoformat()
    occurrences = await sync_in(stack, user, 6)
    third = next(e for e in occurrences if e["start"] == "2026-10-09T10:00:00+08:00")

    # This one: an override for 9 October is added; the master and the other override are as they were.
    await change_by_chat(
        stack, scripted, db, user, "10月9日那次改到下午三点", event_id=third["id"], time="15:00", scope="this"
    )
    once = get_object(remote, href)
    after = vevents(once)
    assert property_lines(after[""]) == property_lines(before[""])
    assert alarm_lines(after[""]) == alarm_lines(before[""])
    assert property_lines(after[moved_slot]) == property_lines(before[moved_slot])
    added = after[datetime(2026, 10, 9, 2, 0, tzinfo=UTC).isoformat()]
    assert added.decoded("DTSTART") == datetime.fromisoformat("2026-10-09T15:00:00+08:00")
    # Made from the master as the app wrote it: its people, place, notes, address and alarms.
    own = {"DTSTART", "DTEND", "RECURRENCE-ID", "RRULE", *STAMPS}
    assert property_lines(added, own) == property_lines(before[""], own)
    assert alarm_lines(added) == alarm_lines(before[""])
    assert "CATEGORIES" not in once

    # All: the master moves an hour later; every other property of it stays, SEQUENCE one higher.
    first = next(e for e in await read_events(stack, user) if e["start"] == "2026-09-25T10:00:00+08:00")
    await change_by_chat(
        stack, scripted, db, user, "外部评审以后都改到十一点", event_id=first["id"], time="11:00", scope="all"
    )
    again = vevents(get_object(remote, href))
    same_except(before[""], again[""], {"DTSTART", "DTEND", *STAMPS})
    assert alarm_lines(again[""]) == alarm_lines(before[""])
    assert again[""].decoded("DTSTART") == datetime.fromisoformat("2026-09-25T11:00:00+08:00")
    assert sequence(again[""]) == sequence(before[""]) + 1
    # The app's own override keeps what is its own, wherever its slot now is.
    [kept] = [c for c in again.values() if str(c.get("LOCATION")) == "线上"]
    same_except(before[moved_slot], kept, {"RECURRENCE-ID", "DTSTART", "DTEND", *STAMPS})


# ---- one UID, and place, notes and address in the feed and the API -------------------------------


async def test_an_imported_event_has_the_servers_uid_and_its_place_notes_and_url_in_the_feed_and_the_api(
    stack: Stack, scripted: ScriptedModelServer, user: str, radicale_remote: Remote
) -> None:
    await connect(stack, user, radicale_remote)
    uid = f"7C1A-{uuid.uuid4().hex[:8]}@example.com"
    put_object(radicale_remote, uid, single_review(uid))
    [event] = await sync_in(stack, user, 1)
    assert (event["uid"], event["location"], event["url"]) == (
        uid,
        "会议室 A, 3楼",
        "https://meet.example.com/r/7c1a?x=1&y=2",
    )
    assert event["notes"] == "议程：\n1. 设计评审\n2. 预算"
    feed = await stack.client.get("/v1/calendar.ics", headers=stack.headers(user))
    assert feed.status_code == 200
    [vevent] = Calendar.from_ical(feed.text).walk("VEVENT")
    assert str(vevent["UID"]) == uid
    assert (str(vevent["LOCATION"]), str(vevent["DESCRIPTION"]), str(vevent["URL"])) == (
        "会议室 A, 3楼",
        "议程：\n1. 设计评审\n2. 预算",
        "https://meet.example.com/r/7c1a?x=1&y=2",
    )
    # find_events gives the model the same place, notes and address.
    scripted.set_script(
        script(
            on_user("在哪", tool_calls=[call("find_events", start="D+1", end="D+2")]),
            {"when": {"last_role": "tool", "last_tool": "find_events"}, "respond": {"text": "在会议室 A。"}},
        )
    )
    scripted.clear_requests()
    await stack.chat(user, "明天的外部评审在哪")
    tool_messages = [m for m in scripted.requests[-1].body["messages"] if m["role"] == "tool"]
    [found] = json.loads(tool_messages[-1]["content"])["events"]
    assert (found["location"], found["notes"], found["url"]) == (
        event["location"],
        event["notes"],
        event["url"],
    )


async def test_a_place_and_notes_given_by_chat_reach_the_server_and_a_new_place_changes_only_location(
    stack: Stack, scripted: ScriptedModelServer, user: str, radicale_remote: Remote
) -> None:
    db = stack_db(stack)
    await connect(stack, user, radicale_remote)
    scripted.set_script(
        script(
            on_user(
                "牙医",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="看牙医",
                        date="D+1",
                        time="15:00",
                        location="中山路诊所",
                        notes="带医保卡",
                    )
                ],
            )
        )
    )
    answer = (await stack.chat(user, "明天下午三点去中山路诊所看牙医，记得带医保卡")).json()
    assert answer["outcome"] == "created", answer
    await outbox_drained(db, user)
    [(href, body)] = radicale_remote.objects()
    [before] = body.walk("VEVENT")
    assert (str(before["LOCATION"]), str(before["DESCRIPTION"])) == ("中山路诊所", "带医保卡")
    [event] = await read_events(stack, user)
    assert (event["location"], event["notes"], event["uid"]) == ("中山路诊所", "带医保卡", str(before["UID"]))

    await change_by_chat(
        stack, scripted, db, user, "牙医换到人民路", event_id=event["id"], location="人民路诊所"
    )
    after = vevents(get_object(radicale_remote, href))[""]
    same_except(before, after, {"LOCATION", *STAMPS})
    assert str(after["LOCATION"]) == "人民路诊所"
    assert sequence(after) == sequence(before) + 1


# ---- the UID rules of the store -------------------------------------------------------------------


async def test_a_series_copied_from_another_is_born_with_its_own_uid_and_overrides_take_their_series(
    stack: Stack, user: str
) -> None:
    uid = f"weekly-{uuid.uuid4().hex[:8]}@example.com"
    [master, app_override] = parse_resource(
        weekly_review(uid), master_id=uuid.uuid4().hex, user_id=user, calendar="Work", fallback_tz=SHANGHAI
    )
    tail_id, ours_id = uuid.uuid4().hex, uuid.uuid4().hex
    # The tail of a split, copied from the master the way a series edit copies it: its UID and object too.
    tail = master.evolve(id=tail_id, rrule="FREQ=WEEKLY;COUNT=2")
    ours = app_override.evolve(id=ours_id, series_id=tail_id, uid=None)
    async with stack_db(stack).connect() as conn:
        await conn.begin()
        uow = from_server(conn)
        for row in (master, app_override, tail, ours):
            await uow.events.insert_event(row, turn_id="t", key=None)
        await uow.commit()
    stored = {e.id: e for e in await rows_of(stack, user)}
    assert stored[master.id].uid == stored[app_override.id].uid == uid
    assert stored[tail_id].uid == local_uid(tail_id)
    assert stored[ours_id].uid == local_uid(tail_id)
    # The object stays with the row that owns it; the copy gives the tail the master's properties.
    assert stored[tail_id].ical == stored[master.id].ical == weekly_review(uid)
    assert stored[app_override.id].ical is None

    async with stack_db(stack).connect() as conn:
        await conn.begin()
        uow = from_server(conn)
        await uow.events.update_event(stored[ours_id].evolve(series_id=master.id, uid=None, ical="ignored"))
        await uow.events.update_event(stored[master.id].evolve(uid="not-this", ical=None, title="周会"))
        await uow.commit()
    again = {e.id: e for e in await rows_of(stack, user)}
    assert again[ours_id].uid == uid  # moved to the master's series: its UID
    assert (again[master.id].uid, again[master.id].ical) == (uid, weekly_review(uid))  # a change keeps both


async def rows_of(stack: Stack, user: str) -> list[Event]:
    async with stack_db(stack).connect() as conn:
        return list(await from_server(conn).events.all_events(user))


# ---- fuzz ----------------------------------------------------------------------------------------

# `make test` runs a short profile; CALAGENT_FIDELITY_E2E_EXAMPLES=500 runs a long one.
E2E_EXAMPLES = int(os.environ.get("CALAGENT_FIDELITY_E2E_EXAMPLES", "20"))


@pytest.fixture(scope="module")
async def fuzz_account(stack: Stack, radicale: EmbeddedRadicale) -> tuple[str, Remote]:
    user = f"u-fuzz-{uuid.uuid4().hex[:8]}"
    name = f"f{uuid.uuid4().hex[:8]}"
    radicale.add_user(name, "pw-fuzz")
    remote = Remote(
        radicale.user_url(name), name, "pw-fuzz", make_calendar(radicale.url, name, "pw-fuzz", "Work")
    )
    await connect(stack, user, remote)
    return user, remote


async def move_directly(stack: Stack, user: str, event_id: str, hours: int) -> None:
    """The commands service's own change path, without the model: prepared, then confirmed."""
    assert stack.probe is not None
    envelope = Envelope(
        turn_id=uuid.uuid4().hex,
        user_id=user,
        conversation_id="c",
        occurred_at=stack.clock.now(),
        tz="Asia/Shanghai",
    )
    [event] = [e for e in await read_events(stack, user) if e["id"] == event_id]
    start = datetime.fromisoformat(event["start"]) + timedelta(hours=hours)
    prepared = await stack.probe.request(
        wire.COMMAND_EXECUTE,
        CommandRequest(
            command=PrepareChange(
                envelope=envelope,
                idempotency_key=uuid.uuid4().hex,
                action="update",
                event_id=event_id,
                update=UpdateSchedule(
                    event_id=event_id, date=start.date().isoformat(), time=f"{start:%H:%M}"
                ),
            )
        ),
    )
    assert prepared.stub is not None, prepared
    done = await stack.probe.request(
        wire.COMMAND_EXECUTE,
        CommandRequest(
            command=MergeStub(
                envelope=envelope,
                idempotency_key=uuid.uuid4().hex,
                command_id=prepared.stub.id,
                patch=SlotPatch(),
                confirm=True,
            )
        ),
    )
    assert done.status == "updated", done


@settings(
    max_examples=E2E_EXAMPLES,
    deadline=None,
    # Each example is a round trip through a server: a failure is reported as found, not shrunk.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), hours=st.sampled_from([-2, -1, 1, 3]))
async def test_generated_objects_moved_through_the_commands_service_keep_every_untouched_property(
    stack: Stack, fuzz_account: tuple[str, Remote], data: st.DataObject, hours: int
) -> None:
    user, remote = fuzz_account
    uid = f"fuzz-{uuid.uuid4().hex}@example.com"
    href = put_object(remote, uid, data.draw(rich_events(uid=uid)))
    before = vevents(get_object(remote, href))[""]
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def arrived() -> bool:
        return any(e.get("uid") == uid for e in await read_events(stack, user))

    await eventually(arrived, "the generated event in GET /v1/events")
    [event] = [e for e in await read_events(stack, user) if e.get("uid") == uid]
    await move_directly(stack, user, event["id"], hours)
    await outbox_drained(stack_db(stack), user)
    after = vevents(get_object(remote, href))[""]
    same_except(before, after, {"DTSTART", "DTEND", *STAMPS})
    assert alarm_lines(after) == alarm_lines(before)
    assert after.decoded("DTSTART") == before.decoded("DTSTART") + timedelta(hours=hours)
    assert sequence(after) == sequence(before) + 1
