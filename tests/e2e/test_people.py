"""People (contract §16) through HTTP with the facts read back: contacts, attendees resolved by
code (needs_attendee with candidates), and invitations by e-mail that are held writes — sent
exactly once on confirmation, never before, through the mail outbox to a real SMTP server
(aiosmtpd on loopback), surviving its outage. Every message sent is parsed with the standard
`email` package and the `icalendar` library and checked against RFC 5546's required properties."""

from __future__ import annotations

import asyncio
import email
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message
from email.policy import default as default_policy
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from icalendar import Calendar
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.processes import free_port
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script

pytestmark = pytest.mark.e2e

WAIT_S = 20.0
MAIL_DOMAIN = "mail.test"
# RFC 5546 §3.2.2 (REQUEST) and §3.2.5 (CANCEL): properties a VEVENT of each method must carry.
REQUIRED = {
    "REQUEST": ("UID", "SEQUENCE", "DTSTAMP", "ORGANIZER", "ATTENDEE", "DTSTART", "SUMMARY"),
    "CANCEL": ("UID", "SEQUENCE", "DTSTAMP", "ORGANIZER", "ATTENDEE"),
}


@dataclass
class Received:
    sender: str
    recipients: list[str]
    message: Message

    @property
    def calendar(self) -> Calendar:
        parts = [p for p in self.message.walk() if p.get_content_type() == "text/calendar"]
        assert len(parts) == 1, "one text/calendar part"
        payload = parts[0].get_payload(decode=True)
        assert isinstance(payload, bytes)
        return Calendar.from_ical(payload.decode("utf-8"))

    @property
    def method(self) -> str:
        parts = [p for p in self.message.walk() if p.get_content_type() == "text/calendar"]
        return str(parts[0].get_param("method"))

    def event(self) -> Any:
        [vevent] = [c for c in self.calendar.walk("VEVENT") if "RECURRENCE-ID" not in c]
        return vevent


@dataclass
class Sink:
    """An SMTP server on loopback that keeps everything it accepts; stop() and start() again
    on the same port make an outage."""

    port: int
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    controller: Controller | None = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=default_policy)
        with self.lock:
            self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 OK"

    def start(self) -> None:
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    def to(self, address: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if address in r.recipients]

    def count(self) -> int:
        with self.lock:
            return len(self.received)


@pytest.fixture(scope="module")
def sink() -> Iterator[Sink]:
    server = Sink(free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def stack(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, sink: Sink
) -> AsyncIterator[Stack]:
    system = await start_stack(
        nats_url=servers.nats_url,
        nats_url_for=servers.nats_url_for,
        database_url=database_url,
        model_base_url=scripted.base_url,
        settings_overrides={
            "CALAGENT_SMTP_URL": f"smtp://127.0.0.1:{sink.port}",
            "CALAGENT_MAIL_DOMAIN": MAIL_DOMAIN,
            # Sends are woken at commit; the sweep only retries after an outage.
            "CALAGENT_CALDAV_SWEEP_S": 0.2,
            "CALAGENT_CALDAV_SYNC_S": 3600,
        },
    )
    yield system
    await system.stop()


async def eventually(check: Callable[[], Awaitable[bool] | bool], what: str, wait_s: float = WAIT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def mail_rows(db: AsyncEngine, user: str) -> list[dict[str, Any]]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text(
                "select method, sequence, recipient, message_id, attempts, sent_at, last_error "
                "from commands.mail_outbox where user_id = :u order by id"
            ),
            {"u": user},
        )
        return [dict(r._mapping) for r in rows]


async def all_sent(db: AsyncEngine, user: str) -> bool:
    rows = await mail_rows(db, user)
    return bool(rows) and all(r["sent_at"] is not None for r in rows)


async def add_contact(stack: Stack, user: str, name: str, address: str, *aliases: str) -> dict[str, Any]:
    response = await stack.client.post(
        "/v1/contacts",
        json={"name": name, "email": address, "aliases": list(aliases)},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    found: dict[str, Any] = response.json()
    return found


async def mail_address(stack: Stack, user: str) -> str:
    response = await stack.client.post("/v1/mail-address", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    address: str = response.json()["address"]
    return address


def check_rfc5546(received: Received, method: str, uid: str, organizer: str, sequence: int) -> None:
    assert received.method == method
    cal = received.calendar
    assert str(cal["METHOD"]) == method
    event = received.event()
    for name in REQUIRED[method]:
        assert name in event, f"{method} without {name}"
    assert str(event["UID"]) == uid
    assert int(event["SEQUENCE"]) == sequence
    assert str(event["ORGANIZER"]).lower() == f"mailto:{organizer}".lower()
    people = event["ATTENDEE"] if isinstance(event["ATTENDEE"], list) else [event["ATTENDEE"]]
    assert f"mailto:{received.recipients[0]}".lower() in [str(p).lower() for p in people]
    assert received.message["Message-ID"]
    assert received.sender == organizer
    if method == "REQUEST":
        assert not list(event.walk("VALARM")), "the user's own alarms stay private"


# ---- contacts -------------------------------------------------------------------------------------


async def test_contacts_are_listed_deleted_and_private_to_their_owner(stack: Stack, user: str) -> None:
    added = await add_contact(stack, user, "张三", "zhangsan@example.com", "老张")
    listed = (await stack.client.get("/v1/contacts", headers=stack.headers(user))).json()["contacts"]
    assert [(c["name"], c["email"], c["aliases"]) for c in listed] == [
        ("张三", "zhangsan@example.com", ["老张"])
    ]
    other = f"{user}-other"
    assert (await stack.client.get("/v1/contacts", headers=stack.headers(other))).json()["contacts"] == []
    stolen = await stack.client.delete(f"/v1/contacts/{added['id']}", headers=stack.headers(other))
    assert stolen.status_code == 404
    assert len((await stack.client.get("/v1/contacts", headers=stack.headers(user))).json()["contacts"]) == 1
    gone = await stack.client.delete(f"/v1/contacts/{added['id']}", headers=stack.headers(user))
    assert gone.status_code == 204
    assert (await stack.client.get("/v1/contacts", headers=stack.headers(user))).json()["contacts"] == []
    bad = await stack.client.post(
        "/v1/contacts", json={"name": "x", "email": "not an address"}, headers=stack.headers(user)
    )
    assert bad.status_code == 422


async def test_the_mail_address_is_private_stable_and_on_the_mail_domain(stack: Stack, user: str) -> None:
    first = await mail_address(stack, user)
    assert first.endswith(f"@{MAIL_DOMAIN}") and len(first.partition("@")[0]) >= 20
    assert await mail_address(stack, user) == first
    assert await mail_address(stack, f"{user}-other") != first


# ---- invitations are held writes ------------------------------------------------------------------


async def test_an_invitation_is_sent_exactly_once_on_confirmation_and_never_before(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    await add_contact(stack, user, "张三", "zhangsan@example.com")
    scripted.set_script(
        script(
            on_user(
                "项目会",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="项目会",
                        date="D+1",
                        time="15:00",
                        attendees=["张三", "lisi@example.org"],
                        reminder_minutes=10,
                    )
                ],
            ),
            on_user("谢谢", text="不客气！"),
        )
    )
    held = (await stack.chat(user, "明天下午三点和张三、lisi@example.org开项目会")).json()
    assert held["outcome"] == "held", held
    assert held["command"]["hold_reason"] == "sends_invitations"
    assert {p["email"] for p in held["command"]["recipients"]} == {"zhangsan@example.com", "lisi@example.org"}
    assert await read_events(stack, user) == []
    await asyncio.sleep(1.0)  # a sweep or more: nothing may leave before the user's word
    assert await mail_rows(db, user) == []
    assert sink.to("zhangsan@example.com") == [] and sink.to("lisi@example.org") == []

    done = (await stack.chat(user, "确认")).json()
    assert (done["outcome"], done["model_calls"]) == ("created", 0), done
    await eventually(lambda: all_sent(db, user), "the invitations to be sent")
    [event] = await read_events(stack, user)
    organizer = await mail_address(stack, user)
    assert event["organizer"] == organizer
    assert [(p["name"], p["email"], p["status"]) for p in event["attendees"]] == [
        ("张三", "zhangsan@example.com", "NEEDS-ACTION"),
        (None, "lisi@example.org", "NEEDS-ACTION"),
    ]
    for address in ("zhangsan@example.com", "lisi@example.org"):
        [mail] = sink.to(address)
        check_rfc5546(mail, "REQUEST", event["uid"], organizer, 0)
        assert mail.event().decoded("DTSTART").isoformat() == "2026-09-25T15:00:00+08:00"

    # The next, unrelated message sends nothing more.
    before = sink.count()
    thanks = (await stack.chat(user, "谢谢")).json()
    assert thanks["outcome"] == "answered"
    await asyncio.sleep(1.0)
    assert sink.count() == before
    assert len(await mail_rows(db, user)) == 2

    # The feed carries the people too.
    feed = (await stack.client.get("/v1/calendar.ics", headers=stack.headers(user))).text
    [vevent] = Calendar.from_ical(feed).walk("VEVENT")
    assert str(vevent["ORGANIZER"]).lower() == f"mailto:{organizer}"
    assert sorted(str(a).lower() for a in vevent.get("ATTENDEE", [])) == [
        "mailto:lisi@example.org",
        "mailto:zhangsan@example.com",
    ]


async def invited(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, *people: str
) -> dict[str, Any]:
    scripted.set_script(
        script(
            on_user(
                "开会",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="周会",
                        date="D+1",
                        time="10:00",
                        attendees=list(people),
                    )
                ],
            )
        )
    )
    assert (await stack.chat(user, "明天上午十点开会")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "created"
    await eventually(lambda: all_sent(db, user), "the invitations to be sent")
    [event] = await read_events(stack, user)
    return event


async def test_an_update_sends_the_raised_sequence_to_those_concerned_and_a_cancel_to_the_one_removed(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    a, b, c = (f"{n}-{user}@example.com" for n in ("a", "b", "c"))
    event = await invited(stack, scripted, db, user, a, b)
    organizer = await mail_address(stack, user)
    scripted.set_script(
        script(
            on_user(
                "改到",
                tool_calls=[call("update_schedule", event_id=event["id"], time="11:00", attendees=[a, c])],
            )
        )
    )
    offer = (await stack.chat(user, "改到十一点，换成 c")).json()
    assert offer["outcome"] == "held", offer
    assert offer["command"]["hold_reason"] == "sends_invitations"
    assert {p["email"] for p in offer["command"]["recipients"]} == {a, b, c}
    await asyncio.sleep(0.6)
    assert len(sink.to(a)) == 1 and sink.to(c) == []  # held: nothing new left

    done = (await stack.chat(user, "确认")).json()
    assert (done["outcome"], done["model_calls"]) == ("updated", 0), done
    await eventually(lambda: all_sent(db, user), "the update to be sent")
    await eventually(lambda: len(sink.to(b)) == 2, "the cancel to the one removed")
    first_a, update_a = sink.to(a)
    check_rfc5546(update_a, "REQUEST", event["uid"], organizer, 1)
    assert update_a.event().decoded("DTSTART").isoformat() == "2026-09-25T11:00:00+08:00"
    assert update_a.message["Message-ID"] != first_a.message["Message-ID"]
    [new_c] = sink.to(c)
    check_rfc5546(new_c, "REQUEST", event["uid"], organizer, 1)
    _, cancel_b = sink.to(b)
    check_rfc5546(cancel_b, "CANCEL", event["uid"], organizer, 1)
    assert "STATUS" not in cancel_b.event()  # only b is taken off; the meeting goes on
    [after] = await read_events(stack, user)
    assert [p["email"] for p in after["attendees"]] == [a, c]


async def test_a_delete_sends_cancel_with_the_raised_sequence_to_every_attendee(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    a, b = (f"{n}-{user}@example.com" for n in ("a", "b"))
    event = await invited(stack, scripted, db, user, a, b)
    organizer = await mail_address(stack, user)
    scripted.set_script(
        script(on_user("取消周会", tool_calls=[call("delete_schedule", event_id=event["id"])]))
    )
    offer = (await stack.chat(user, "取消周会")).json()
    assert offer["command"]["hold_reason"] == "sends_invitations"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "deleted"
    await eventually(lambda: len(sink.to(a)) == 2 and len(sink.to(b)) == 2, "the cancellations")
    for address in (a, b):
        cancel = sink.to(address)[1]
        check_rfc5546(cancel, "CANCEL", event["uid"], organizer, 1)
        assert str(cancel.event()["STATUS"]) == "CANCELLED"
    assert await read_events(stack, user) == []


async def test_an_smtp_outage_delays_the_invitations_and_loses_or_doubles_none(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    a, b = (f"{n}-{user}@example.com" for n in ("a", "b"))
    sink.stop()
    try:
        scripted.set_script(
            script(
                on_user(
                    "开会",
                    tool_calls=[
                        call(
                            "prepare_or_create_schedule",
                            title="评审",
                            date="D+2",
                            time="09:00",
                            attendees=[a, b],
                        )
                    ],
                )
            )
        )
        assert (await stack.chat(user, "后天九点开会")).json()["outcome"] == "held"
        assert (await stack.chat(user, "确认")).json()["outcome"] == "created"

        async def retried() -> bool:
            rows = await mail_rows(db, user)
            return len(rows) == 2 and all(r["attempts"] >= 2 and r["sent_at"] is None for r in rows)

        await eventually(retried, "the sends to fail and wait")
    finally:
        sink.start()
    await eventually(lambda: all_sent(db, user), "the sends after the outage", wait_s=30.0)
    await asyncio.sleep(1.0)
    assert len(sink.to(a)) == 1 and len(sink.to(b)) == 1
    ids = {r["message_id"] for r in await mail_rows(db, user)}
    assert {m.message["Message-ID"] for m in sink.to(a) + sink.to(b)} == ids


# ---- a name is resolved by code -------------------------------------------------------------------


async def test_an_ambiguous_name_waits_with_candidates_and_the_next_turn_resolves_it(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    await add_contact(stack, user, "张伟", "zhangwei1@example.com", "小张")
    await add_contact(stack, user, "张伟", "zhangwei2@example.com")
    create = {"title": "午饭", "date": "D+1", "time": "12:00"}
    scripted.set_script(
        script(
            on_user("吃午饭", tool_calls=[call("prepare_or_create_schedule", **create, attendees=["张伟"])]),
            on_user(
                "第二个",
                tool_calls=[
                    call("prepare_or_create_schedule", **create, attendees=["zhangwei2@example.com"])
                ],
            ),
        )
    )
    waiting = (await stack.chat(user, "明天中午和张伟吃午饭")).json()
    assert waiting["outcome"] == "needs_attendee", waiting
    command = waiting["command"]
    assert command["status"] == "needs_attendee" and command["attendee_query"] == "张伟"
    assert {p["email"] for p in command["attendee_candidates"]} == {
        "zhangwei1@example.com",
        "zhangwei2@example.com",
    }
    active = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert active["id"] == command["id"]

    resolved = (await stack.chat(user, "第二个", active_command_id=command["id"])).json()
    assert resolved["outcome"] == "held", resolved
    assert resolved["command"]["id"] == command["id"]
    assert [p["email"] for p in resolved["command"]["recipients"]] == ["zhangwei2@example.com"]
    assert (await stack.chat(user, "确认")).json()["outcome"] == "created"
    [event] = await read_events(stack, user)
    assert [(p["name"], p["email"]) for p in event["attendees"]] == [("张伟", "zhangwei2@example.com")]
    await eventually(lambda: len(sink.to("zhangwei2@example.com")) >= 1, "the invitation")
    assert sink.to("zhangwei1@example.com") == []


async def test_an_alias_names_one_contact_and_an_unknown_name_has_no_candidates(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await add_contact(stack, user, "王芳", "wangfang@example.com", "Fang Wang")
    scripted.set_script(
        script(
            on_user(
                "alias",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="咖啡",
                        date="D+1",
                        time="16:00",
                        attendees=[" fang  WANG "],
                    )
                ],
            ),
            on_user(
                "nobody",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="喝茶",
                        date="D+1",
                        time="17:00",
                        attendees=["赵六"],
                    )
                ],
            ),
        )
    )
    held = (await stack.chat(user, "alias")).json()
    assert [p["email"] for p in held["command"]["recipients"]] == ["wangfang@example.com"]
    unknown = (await stack.chat(user, "nobody")).json()
    assert unknown["outcome"] == "needs_attendee"
    assert unknown["command"]["attendee_query"] == "赵六"
    assert unknown["command"].get("attendee_candidates", []) == []
    assert await read_events(stack, user) == []


# ---- what a change sends: one occurrence, or nothing for the user's own alarm --------------------


async def test_deleting_one_occurrence_sends_cancel_for_that_occurrence_only(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    a = f"a-{user}@example.com"
    scripted.set_script(
        script(
            on_user(
                "每周",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="例会",
                        date="D+1",
                        time="09:00",
                        recurrence="FREQ=WEEKLY;COUNT=4",
                        attendees=[a],
                    )
                ],
            )
        )
    )
    assert (await stack.chat(user, "每周五九点例会")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "created"
    await eventually(lambda: len(sink.to(a)) == 1, "the invitation to the series")
    occurrences = await read_events(stack, user)
    assert len(occurrences) == 4
    organizer = await mail_address(stack, user)
    gone = occurrences[1]
    scripted.set_script(
        script(on_user("这一次", tool_calls=[call("delete_schedule", event_id=gone["id"], scope="this")]))
    )
    assert (await stack.chat(user, "这一次不开了")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "deleted"
    await eventually(lambda: all_sent(db, user), "the cancellation to be sent")
    await eventually(lambda: len(sink.to(a)) == 2, "the cancellation")
    cancel = sink.to(a)[1]
    assert cancel.method == "CANCEL" and str(cancel.calendar["METHOD"]) == "CANCEL"
    [vevent] = cancel.calendar.walk("VEVENT")
    for name in REQUIRED["CANCEL"]:
        assert name in vevent, f"CANCEL without {name}"
    assert str(vevent["UID"]) == occurrences[0]["uid"]
    assert int(str(vevent["SEQUENCE"])) == 1
    assert str(vevent["ORGANIZER"]).lower() == f"mailto:{organizer}"
    assert vevent.decoded("RECURRENCE-ID").isoformat() == gone["start"]
    assert str(vevent["STATUS"]) == "CANCELLED"
    assert [r["method"] for r in await mail_rows(db, user)] == ["REQUEST", "CANCEL"]
    assert len(await read_events(stack, user)) == 3


async def test_a_change_of_the_reminder_alone_sends_nothing_to_the_attendees(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    a = f"a-{user}@example.com"
    event = await invited(stack, scripted, db, user, a)
    scripted.set_script(
        script(
            on_user("提醒", tool_calls=[call("update_schedule", event_id=event["id"], reminder_minutes=30)])
        )
    )
    assert (await stack.chat(user, "提前半小时提醒我")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    [after] = await read_events(stack, user)
    assert after["reminder_minutes"] == 30
    await asyncio.sleep(1.0)  # sweeps: a message would have left by now
    assert len(sink.to(a)) == 1
    assert [r["method"] for r in await mail_rows(db, user)] == ["REQUEST"]


# ---- an undo tells the people what it gives back (§15 with §16) -----------------------------------


async def event_rows(db: AsyncEngine, user: str) -> list[Any]:
    """Every column of every row of the user's events but the time it was last written."""
    async with db.connect() as conn:
        rows = await conn.execute(
            text("select to_jsonb(e) - 'updated_at' from commands.events e where user_id = :u order by id"),
            {"u": user},
        )
        return [r[0] for r in rows]


async def latest_change(stack: Stack, user: str) -> dict[str, Any]:
    response = await stack.client.get("/v1/changes", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()["changes"][0]
    return found


async def next_message_writes_and_sends_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    scripted.set_script(script(on_user("谢谢", text="不客气。")))
    rows, mails, received = await event_rows(db, user), await mail_rows(db, user), sink.count()
    thanks = (await stack.chat(user, "谢谢")).json()
    assert thanks["outcome"] == "answered" and thanks["tool_calls"] == [], thanks
    await asyncio.sleep(1.0)  # sweeps: a message would have left by now
    assert await event_rows(db, user) == rows
    assert await mail_rows(db, user) == mails and sink.count() == received


async def test_an_undone_delete_invites_everyone_again_above_the_cancels_sequence(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    a, b = (f"{n}-{user}@example.com" for n in ("a", "b"))
    event = await invited(stack, scripted, db, user, a, b)
    organizer = await mail_address(stack, user)
    scripted.set_script(
        script(on_user("取消周会", tool_calls=[call("delete_schedule", event_id=event["id"])]))
    )
    assert (await stack.chat(user, "取消周会")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "deleted"
    await eventually(lambda: len(sink.to(a)) == 2 and len(sink.to(b)) == 2, "the cancellations")
    cancel_sequence = int(sink.to(a)[1].event()["SEQUENCE"])
    deletion = await latest_change(stack, user)

    back = await stack.client.post(f"/v1/changes/{deletion['id']}/undo", headers=stack.headers(user))
    assert back.status_code == 200 and back.json()["outcome"] == "created", back.text
    [restored] = await read_events(stack, user)
    assert (restored["id"], restored["uid"]) == (event["id"], event["uid"])
    await eventually(lambda: len(sink.to(a)) == 3 and len(sink.to(b)) == 3, "the invitations again")
    for address in (a, b):
        again = sink.to(address)[2]
        check_rfc5546(again, "REQUEST", event["uid"], organizer, cancel_sequence + 1)
        assert again.event().decoded("DTSTART").isoformat() == event["start"]

    # The undo is undone: the meeting goes again, and the people are told above the last REQUEST.
    gone = await stack.client.post(
        f"/v1/changes/{(await latest_change(stack, user))['id']}/undo", headers=stack.headers(user)
    )
    assert gone.status_code == 200 and gone.json()["outcome"] == "deleted", gone.text
    await eventually(lambda: len(sink.to(a)) == 4 and len(sink.to(b)) == 4, "the second cancellation")
    for address in (a, b):
        check_rfc5546(sink.to(address)[3], "CANCEL", event["uid"], organizer, cancel_sequence + 2)
    await eventually(lambda: all_sent(db, user), "every message to be sent")
    await next_message_writes_and_sends_nothing(stack, scripted, db, sink, user)


async def test_an_undone_move_mails_the_original_time_above_the_moves_sequence(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    a = f"a-{user}@example.com"
    event = await invited(stack, scripted, db, user, a)
    organizer = await mail_address(stack, user)
    scripted.set_script(
        script(on_user("改到", tool_calls=[call("update_schedule", event_id=event["id"], time="11:00")]))
    )
    assert (await stack.chat(user, "改到十一点")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    await eventually(lambda: len(sink.to(a)) == 2, "the move")
    move_sequence = int(sink.to(a)[1].event()["SEQUENCE"])

    scripted.clear_requests()
    undone = (await stack.chat(user, "撤销")).json()
    assert (undone["outcome"], undone["model_calls"]) == ("updated", 0), undone
    [back] = await read_events(stack, user)
    assert back["start"] == event["start"]
    await eventually(lambda: len(sink.to(a)) == 3, "the original time again")
    again = sink.to(a)[2]
    check_rfc5546(again, "REQUEST", event["uid"], organizer, move_sequence + 1)
    assert again.event().decoded("DTSTART").isoformat() == event["start"]
    await eventually(lambda: all_sent(db, user), "every message to be sent")
    await next_message_writes_and_sends_nothing(stack, scripted, db, sink, user)
