"""The assistant's own mailbox (contract §16) through real SMTP on loopback: messages are sent with
aiosmtplib to the gateway's receiver (`CALAGENT_SMTP_LISTEN`), what we send goes to an aiosmtpd
sink, and the facts are read back — rows in the database, `GET /v1/events`, what the sink got.
Every message we send is parsed with the standard `email` package and `icalendar` and checked
against RFC 5546's required properties of its method."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any
from zoneinfo import ZoneInfo

import aiosmtplib
import pytest
from icalendar import Calendar, Event, vCalAddress
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.processes import free_port
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script
from .test_people import Received, Sink, add_contact, eventually, mail_address, mail_rows

pytestmark = pytest.mark.e2e

MAIL_DOMAIN = "mail.test"
MAX_BYTES = 20_000
SHANGHAI = ZoneInfo("Asia/Shanghai")
# RFC 5546 §3.2.3: what a REPLY's VEVENT must carry (SEQUENCE too when it is not 0).
REPLY_REQUIRED = ("ORGANIZER", "ATTENDEE", "UID", "DTSTAMP")


@pytest.fixture(scope="module")
def sink() -> Iterator[Sink]:
    server = Sink(free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def receiver_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
async def stack(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, sink: Sink, receiver_port: int
) -> AsyncIterator[Stack]:
    system = await start_stack(
        nats_url=servers.nats_url,
        nats_url_for=servers.nats_url_for,
        database_url=database_url,
        model_base_url=scripted.base_url,
        settings_overrides={
            "CALAGENT_SMTP_URL": f"smtp://127.0.0.1:{sink.port}",
            "CALAGENT_SMTP_LISTEN": f"127.0.0.1:{receiver_port}",
            "CALAGENT_MAIL_DOMAIN": MAIL_DOMAIN,
            "CALAGENT_MAIL_MAX_BYTES": MAX_BYTES,
            "CALAGENT_CALDAV_SWEEP_S": 0.2,
            "CALAGENT_CALDAV_SYNC_S": 3600,
        },
    )
    yield system
    await system.stop()


# ---- building and sending mail --------------------------------------------------------------------


def calendar_of(
    method: str,
    *,
    uid: str,
    organizer: str,
    attendees: list[tuple[str, str]],
    sequence: int = 0,
    start: datetime = datetime(2026, 9, 28, 14, 0, tzinfo=SHANGHAI),
    title: str = "季度评审",
) -> Calendar:
    cal = Calendar()
    cal.add("prodid", "-//example//organizer//EN")
    cal.add("version", "2.0")
    cal.add("method", method)
    event = Event()
    event.add("uid", uid)
    event.add("dtstamp", datetime(2026, 9, 24, 1, 0, tzinfo=UTC))
    event.add("sequence", sequence)
    event.add("dtstart", start)
    event.add("dtend", start.replace(hour=start.hour + 1))
    event.add("summary", title)
    event.add("organizer", vCalAddress(f"mailto:{organizer}"))
    for address, status in attendees:
        person = vCalAddress(f"mailto:{address}")
        person.params["PARTSTAT"] = status
        person.params["RSVP"] = "TRUE"
        event.add("attendee", person, encode=False)
    cal.add_component(event)
    return cal


def message(
    sender: str, to: str, *, cal: Calendar | None = None, body: str = "", message_id: str | None = None
) -> EmailMessage:
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = to
    mail["Subject"] = "Invitation" if cal is not None else "Fwd: 周五的安排"
    mail["Message-ID"] = message_id or make_msgid(domain="example.com")
    mail.set_content(body or "see attached\n")
    if cal is not None:
        method = str(cal["METHOD"])
        mail.add_alternative(bytes(cal.to_ical()).decode(), subtype="calendar", params={"method": method})
    return mail


async def send(port: int, mail: EmailMessage, *, mail_from: str, rcpt: str) -> None:
    await aiosmtplib.send(mail, sender=mail_from, recipients=[rcpt], hostname="127.0.0.1", port=port)


async def inbound_rows(db: AsyncEngine, user: str) -> list[dict[str, Any]]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text(
                "select sender, message_id, method, verdict, reason from commands.inbound_mail "
                "where user_id = :u order by id"
            ),
            {"u": user},
        )
        return [dict(r._mapping) for r in rows]


async def active_stub(stack: Stack, user: str) -> dict[str, Any] | None:
    response = await stack.client.get("/v1/commands/active", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: dict[str, Any] | None = response.json()
    return found


def check_reply(
    received: Received, *, uid: str, organizer: str, attendee: str, partstat: str, sequence: int
) -> None:
    assert received.method == "REPLY"
    cal = received.calendar
    assert str(cal["METHOD"]) == "REPLY"
    event = received.event()
    for name in REPLY_REQUIRED:
        assert name in event, f"REPLY without {name}"
    if sequence:
        assert int(event["SEQUENCE"]) == sequence
    assert str(event["UID"]) == uid
    assert str(event["ORGANIZER"]).lower() == f"mailto:{organizer}"
    people = event["ATTENDEE"] if isinstance(event["ATTENDEE"], list) else [event["ATTENDEE"]]
    assert [str(p).lower() for p in people] == [f"mailto:{attendee}"], "the one attendee who answers"
    assert str(people[0].params["PARTSTAT"]) == partstat
    assert received.recipients == [organizer]
    assert received.message["Message-ID"]


async def invited_by_mail(
    stack: Stack, db: AsyncEngine, receiver_port: int, user: str, *, sequence: int = 0
) -> tuple[str, str, str]:
    """(the user's address, the organizer, the UID) of a REQUEST that is now a held offer."""
    address = await mail_address(stack, user)
    organizer = f"boss-{user}@example.com"
    await add_contact(stack, user, "老板", organizer)
    uid = f"{uuid.uuid4()}@example.com"
    cal = calendar_of(
        "REQUEST",
        uid=uid,
        organizer=organizer,
        attendees=[(address, "NEEDS-ACTION"), (f"peer-{user}@example.com", "NEEDS-ACTION")],
        sequence=sequence,
    )
    await send(receiver_port, message(organizer, address, cal=cal), mail_from=organizer, rcpt=address)

    async def offered() -> bool:
        return await active_stub(stack, user) is not None

    await eventually(offered, "the invitation to be offered")
    stub = await active_stub(stack, user)
    assert stub is not None
    assert (stub["kind"], stub["status"], stub["hold_reason"]) == (
        "invitation",
        "held",
        "invitation_received",
    )
    assert stub["invitation"]["uid"] == uid and stub["invitation"]["organizer"] == organizer
    assert [r["verdict"] for r in await inbound_rows(db, user)] == ["offered"]
    return address, organizer, uid


# ---- an invitation from someone else is a held offer ----------------------------------------------


async def test_an_accepted_invitation_adds_the_event_and_answers_the_organizer_once(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    scripted.set_script(script(on_user("谢谢", text="不客气！")))
    address, organizer, uid = await invited_by_mail(stack, db, receiver_port, user, sequence=2)
    await asyncio.sleep(1.0)  # sweeps: nothing may leave before the user's answer
    assert await read_events(stack, user) == []
    assert sink.to(organizer) == [] and await mail_rows(db, user) == []

    # The next, unrelated message neither answers nor sends it.
    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    await asyncio.sleep(0.6)
    assert sink.to(organizer) == [] and await read_events(stack, user) == []

    done = (await stack.chat(user, "接受")).json()
    assert (done["outcome"], done["model_calls"]) == ("created", 0), done
    [event] = await read_events(stack, user)
    assert event["uid"] == uid and event["organizer"] == organizer
    assert {(p["email"], p["status"]) for p in event["attendees"]} == {
        (address, "ACCEPTED"),
        (f"peer-{user}@example.com", "NEEDS-ACTION"),
    }
    assert event["start"] == "2026-09-28T14:00:00+08:00"
    await eventually(lambda: len(sink.to(organizer)) == 1, "the REPLY")
    [reply] = sink.to(organizer)
    check_reply(reply, uid=uid, organizer=organizer, attendee=address, partstat="ACCEPTED", sequence=2)
    assert reply.sender == address

    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    await asyncio.sleep(1.0)
    assert len(sink.to(organizer)) == 1
    assert [r["method"] for r in await mail_rows(db, user)] == ["REPLY"]


async def test_an_invitation_accepted_onto_a_task_block_offers_its_replan_and_moves_nothing_yet(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, receiver_port: int, user: str
) -> None:
    scripted.set_script(script(on_user("谢谢", text="不客气！")))
    # Room only on Monday 28 September from 14:00 to 16:00: the block is 14:00–15:00, where the
    # invitation's meeting will be.
    made = await stack.client.post(
        "/v1/tasks",
        json={
            "title": "周报",
            "duration_minutes": 60,
            "earliest": "2026-09-28T14:00:00+08:00",
            "due": "2026-09-28T16:00:00+08:00",
        },
        headers=stack.headers(user),
    )
    assert made.status_code == 201, made.text
    task_id = made.json()["id"]

    async def blocks() -> list[tuple[str, str]]:
        return [(e["start"], e["end"]) for e in await read_events(stack, user) if e.get("task_id") == task_id]

    assert await blocks() == [("2026-09-28T14:00:00+08:00", "2026-09-28T15:00:00+08:00")]
    await invited_by_mail(stack, db, receiver_port, user)
    done = (await stack.chat(user, "接受")).json()
    assert done["outcome"] == "created", done
    offer = await active_stub(stack, user)
    assert offer is not None and offer["kind"] == "replan", offer
    [move] = offer["replan"]["moves"]
    monday_two = datetime(2026, 9, 28, 14, 0, tzinfo=SHANGHAI)
    assert (move["task_id"], datetime.fromisoformat(move["old_start"])) == (task_id, monday_two)
    assert datetime.fromisoformat(move["new_start"]) == monday_two + timedelta(hours=1), move
    # Nothing moves before the user's word, nor on the next, unrelated message.
    assert await blocks() == [("2026-09-28T14:00:00+08:00", "2026-09-28T15:00:00+08:00")]
    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    assert await blocks() == [("2026-09-28T14:00:00+08:00", "2026-09-28T15:00:00+08:00")]


@pytest.mark.parametrize(
    ("answer", "partstat", "kept"),
    [("拒绝", "DECLINED", False), ("暂定", "TENTATIVE", True)],
)
async def test_a_declined_or_tentative_answer_is_sent_and_the_event_kept_only_when_not_declined(
    stack: Stack,
    db: AsyncEngine,
    sink: Sink,
    receiver_port: int,
    user: str,
    answer: str,
    partstat: str,
    kept: bool,
) -> None:
    address, organizer, uid = await invited_by_mail(stack, db, receiver_port, user)
    done = (await stack.chat(user, answer)).json()
    assert done["model_calls"] == 0
    events = await read_events(stack, user)
    if kept:
        [event] = events
        assert event["uid"] == uid
        assert {(p["email"], p["status"]) for p in event["attendees"]} >= {(address, partstat)}
    else:
        assert events == []
    await eventually(lambda: len(sink.to(organizer)) == 1, "the REPLY")
    check_reply(
        sink.to(organizer)[0], uid=uid, organizer=organizer, attendee=address, partstat=partstat, sequence=0
    )


async def test_the_offer_is_answered_through_commands_without_the_model(
    stack: Stack, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    address, organizer, uid = await invited_by_mail(stack, db, receiver_port, user)
    refused = await stack.client.post(
        "/v1/commands",
        json={"tool": "cancel_schedule_command", "arguments": {}},
        headers=stack.headers(user),
    )
    assert refused.status_code == 200, refused.text
    assert refused.json()["model_calls"] == 0
    await eventually(lambda: len(sink.to(organizer)) == 1, "the DECLINED reply")
    check_reply(
        sink.to(organizer)[0], uid=uid, organizer=organizer, attendee=address, partstat="DECLINED", sequence=0
    )
    assert await read_events(stack, user) == []
    assert await active_stub(stack, user) is None


# ---- a REPLY updates the attendee's answer ---------------------------------------------------------


async def test_a_reply_updates_the_attendees_status_and_a_strangers_reply_changes_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    a, b = (f"{n}-{user}@example.com" for n in ("a", "b"))
    scripted.set_script(
        script(
            on_user(
                "开会",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule", title="周会", date="D+1", time="10:00", attendees=[a, b]
                    )
                ],
            )
        )
    )
    assert (await stack.chat(user, "明天上午十点开会")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "created"
    await eventually(lambda: len(sink.to(a)) == 1 and len(sink.to(b)) == 1, "the invitations")
    [event] = await read_events(stack, user)
    address = await mail_address(stack, user)
    sent = sink.count()

    def answer(who: str, status: str) -> EmailMessage:
        cal = calendar_of("REPLY", uid=event["uid"], organizer=address, attendees=[(who, status)])
        return message(who, address, cal=cal)

    await send(receiver_port, answer(a, "ACCEPTED"), mail_from=a, rcpt=address)

    async def accepted() -> bool:
        [now] = await read_events(stack, user)
        return {p["email"]: p["status"] for p in now["attendees"]} == {a: "ACCEPTED", b: "NEEDS-ACTION"}

    await eventually(accepted, "a's answer")
    stranger = f"c-{user}@example.com"
    await send(receiver_port, answer(stranger, "DECLINED"), mail_from=stranger, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 2), "the stranger's reply on record")
    rows = await inbound_rows(db, user)
    assert [(r["sender"], r["verdict"], r["reason"]) for r in rows] == [
        (a, "replied", None),
        (stranger, "dropped", "not_an_attendee"),
    ]
    assert await accepted()
    await asyncio.sleep(1.0)
    assert sink.count() == sent, "an answer mails nobody"


async def _verdicts(db: AsyncEngine, user: str, count: int) -> bool:
    return len(await inbound_rows(db, user)) == count


# ---- forwarded mail is a held turn -----------------------------------------------------------------


async def test_forwarded_mail_is_a_turn_on_channel_email_whose_write_is_held(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, receiver_port: int, user: str
) -> None:
    address = await mail_address(stack, user)
    friend = f"friend-{user}@example.com"
    await add_contact(stack, user, "朋友", friend)
    scripted.set_script(
        script(
            on_user(
                "周五下午三点",
                tool_calls=[
                    call("prepare_or_create_schedule", title="看牙医", date="2026-09-25", time="15:00")
                ],
            ),
            on_user("谢谢", text="不客气！"),
        )
    )
    body = "---------- Forwarded message ---------\n周五下午三点看牙医，请帮我记上。\n"
    await send(receiver_port, message(friend, address, body=body), mail_from=friend, rcpt=address)

    async def held() -> bool:
        return await active_stub(stack, user) is not None

    await eventually(held, "the forwarded mail's turn")
    stub = await active_stub(stack, user)
    assert stub is not None and (stub["status"], stub["hold_reason"]) == ("held", "third_party_content")
    assert [r["verdict"] for r in await inbound_rows(db, user)] == ["turn"]

    async def recorded() -> bool:
        async with db.connect() as conn:
            rows = await conn.execute(
                text("select channel, outcome from evalrec.turns where user_id = :u"), {"u": user}
            )
            return [tuple(r) for r in rows] == [("email", "held")]

    await eventually(recorded, "the turn recorded on channel email")
    assert await read_events(stack, user) == []
    scripted.clear_requests()
    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    assert await read_events(stack, user) == []
    # The next turn reads that a message not in the user's words came, never its text (§19): the
    # user's own requests there are not held for it, so it must not steer them either.
    read = [str(m.get("content") or "") for r in scripted.requests for m in r.messages]
    assert read and not any("周五下午三点看牙医" in m for m in read), read
    assert any("not the user's own words came in here" in m for m in read), read
    # The user's own word runs it (the last message offered nothing, so "确认" would be chat).
    done = await stack.client.post(
        "/v1/commands",
        json={"tool": "confirm_command", "arguments": {}},
        headers=stack.headers(user),
    )
    assert done.json()["outcome"] == "created", done.text
    assert [e["title"] for e in await read_events(stack, user)] == ["看牙医"]


# ---- what is not acted on --------------------------------------------------------------------------


async def test_spoofed_unknown_and_repeated_mail_is_dropped_with_a_record_and_never_written(
    stack: Stack, db: AsyncEngine, receiver_port: int, user: str
) -> None:
    address = await mail_address(stack, user)
    boss = f"boss-{user}@example.com"
    await add_contact(stack, user, "老板", boss)
    uid = f"{uuid.uuid4()}@example.com"
    invite = calendar_of("REQUEST", uid=uid, organizer=boss, attendees=[(address, "NEEDS-ACTION")])

    # From says the boss, the envelope says someone else.
    await send(
        receiver_port,
        message(boss, address, cal=invite),
        mail_from=f"mallory-{user}@example.com",
        rcpt=address,
    )
    # Plain mail from nobody the user knows (a stranger's invitation is offered, marked: below).
    stranger = f"stranger-{user}@example.com"
    body = "---------- Forwarded message ---------\n周五下午三点看牙医，请帮我记上。\n"
    await send(receiver_port, message(stranger, address, body=body), mail_from=stranger, rcpt=address)
    # An address nobody has.
    with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as refused:
        await send(
            receiver_port,
            message(boss, f"nobody@{MAIL_DOMAIN}", cal=invite),
            mail_from=boss,
            rcpt=f"nobody@{MAIL_DOMAIN}",
        )
    assert refused.value.recipients[0].code == 550

    await eventually(lambda: _verdicts(db, user, 2), "both on record")
    assert [(r["verdict"], r["reason"]) for r in await inbound_rows(db, user)] == [
        ("dropped", "from_not_envelope_sender"),
        ("dropped", "unknown_sender"),
    ]
    assert await active_stub(stack, user) is None

    # The same message twice is acted on once.
    real = message(boss, address, cal=invite)
    await send(receiver_port, real, mail_from=boss, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 3), "the real one on record")
    first = await active_stub(stack, user)
    assert first is not None
    await send(receiver_port, real, mail_from=boss, rcpt=address)
    await asyncio.sleep(0.5)
    assert [r["verdict"] for r in await inbound_rows(db, user)][2:] == ["offered"]
    assert (await active_stub(stack, user) or {}).get("id") == first["id"]
    assert await read_events(stack, user) == []


async def test_a_later_version_updates_the_accepted_event_and_a_cancel_removes_it_each_when_answered(
    stack: Stack, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    address, organizer, uid = await invited_by_mail(stack, db, receiver_port, user)
    assert (await stack.chat(user, "accept")).json()["outcome"] == "created"
    await eventually(lambda: len(sink.to(organizer)) == 1, "the first REPLY")
    people = [(address, "NEEDS-ACTION"), (f"peer-{user}@example.com", "NEEDS-ACTION")]

    moved = calendar_of(
        "REQUEST",
        uid=uid,
        organizer=organizer,
        attendees=people,
        sequence=3,
        start=datetime(2026, 9, 28, 16, 0, tzinfo=SHANGHAI),
    )
    await send(receiver_port, message(organizer, address, cal=moved), mail_from=organizer, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 2), "the new version on record")
    offer = await active_stub(stack, user)
    assert offer is not None and offer["invitation"]["sequence"] == 3
    [before] = await read_events(stack, user)
    assert before["start"] == "2026-09-28T14:00:00+08:00", "held: nothing changes before the answer"

    assert (await stack.chat(user, "接受")).json()["outcome"] == "updated"
    [after] = await read_events(stack, user)
    assert (after["uid"], after["start"]) == (uid, "2026-09-28T16:00:00+08:00")
    await eventually(lambda: len(sink.to(organizer)) == 2, "the REPLY to the new version")
    check_reply(
        sink.to(organizer)[1], uid=uid, organizer=organizer, attendee=address, partstat="ACCEPTED", sequence=3
    )

    cancel = calendar_of("CANCEL", uid=uid, organizer=organizer, attendees=people, sequence=4)
    await send(receiver_port, message(organizer, address, cal=cancel), mail_from=organizer, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 3), "the cancellation on record")
    offer = await active_stub(stack, user)
    assert offer is not None and offer["invitation"]["method"] == "CANCEL"
    assert len(await read_events(stack, user)) == 1, "held like any third-party change"
    done = await stack.client.post(
        "/v1/commands", json={"tool": "confirm_command", "arguments": {}}, headers=stack.headers(user)
    )
    assert done.json()["outcome"] == "deleted", done.text
    assert await read_events(stack, user) == []
    await asyncio.sleep(1.0)
    assert len(sink.to(organizer)) == 2, "a cancellation is not answered"


async def test_the_production_gateway_starts_and_stops_the_receiver_with_its_lifespan(
    stack: Stack, user: str
) -> None:
    from calagent.gateway.app import create_app as create_gateway

    port = free_port()
    settings = stack.settings.model_copy(update={"smtp_listen": f"127.0.0.1:{port}"})
    app = create_gateway(settings, stack.clock)
    address = await mail_address(stack, user)
    probe = message(f"boss-{user}@example.com", address, body="hello")
    async with app.router.lifespan_context(app):
        with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as refused:
            await send(port, probe, mail_from=f"boss-{user}@example.com", rcpt=f"nobody@{MAIL_DOMAIN}")
        assert refused.value.recipients[0].code == 550
    with pytest.raises(aiosmtplib.SMTPConnectError):
        await send(port, probe, mail_from=f"boss-{user}@example.com", rcpt=address)


async def test_an_invitation_that_is_no_event_is_dropped_with_a_record_not_retried(
    stack: Stack, db: AsyncEngine, receiver_port: int, user: str
) -> None:
    address = await mail_address(stack, user)
    boss = f"boss-{user}@example.com"
    await add_contact(stack, user, "老板", boss)
    broken = calendar_of(
        "REQUEST", uid=f"{uuid.uuid4()}@example.com", organizer=boss, attendees=[(address, "NEEDS-ACTION")]
    )
    [vevent] = broken.walk("VEVENT")
    del vevent["DTSTART"]
    await send(receiver_port, message(boss, address, cal=broken), mail_from=boss, rcpt=address)
    [row] = await inbound_rows(db, user)
    assert row["verdict"] == "dropped" and row["reason"].startswith("unreadable_event")
    assert await active_stub(stack, user) is None


async def test_a_message_over_the_size_limit_is_refused_and_never_read(
    stack: Stack, db: AsyncEngine, receiver_port: int, user: str
) -> None:
    address = await mail_address(stack, user)
    friend = f"friend-{user}@example.com"
    await add_contact(stack, user, "朋友", friend)
    big = message(friend, address, body="周五下午三点开会。" * (MAX_BYTES // 9))
    with pytest.raises(aiosmtplib.SMTPResponseException) as refused:
        await send(receiver_port, big, mail_from=friend, rcpt=address)
    assert refused.value.code == 552
    await asyncio.sleep(0.5)
    assert await inbound_rows(db, user) == []
    assert await active_stub(stack, user) is None


async def test_an_invitation_naming_the_uid_of_someone_elses_event_is_dropped(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, receiver_port: int, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "体检",
                tool_calls=[call("prepare_or_create_schedule", title="体检", date="D+2", time="08:00")],
            )
        )
    )
    assert (await stack.chat(user, "后天早上八点体检")).json()["outcome"] == "created"
    [mine] = await read_events(stack, user)
    address = await mail_address(stack, user)
    boss = f"boss-{user}@example.com"
    await add_contact(stack, user, "老板", boss)
    for method in ("REQUEST", "CANCEL"):
        hijack = calendar_of(
            method, uid=mine["uid"], organizer=boss, attendees=[(address, "NEEDS-ACTION")], sequence=5
        )
        await send(receiver_port, message(boss, address, cal=hijack), mail_from=boss, rcpt=address)
    assert [(r["verdict"], r["reason"]) for r in await inbound_rows(db, user)] == [
        ("dropped", "not_the_organizer"),
        ("dropped", "not_the_organizer"),
    ]
    assert await active_stub(stack, user) is None
    assert await read_events(stack, user) == [mine]


async def test_the_users_own_address_from_settings_is_a_known_sender_and_answers_as_that_attendee(
    stack: Stack, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    address = await mail_address(stack, user)
    own = f"me-{user}@example.com"
    saved = await stack.client.put("/v1/settings", json={"email": own}, headers=stack.headers(user))
    assert saved.status_code == 200, saved.text
    # The user passes on an invitation they received at their own address from someone not
    # in their contacts: the user vouches for it, and answers as the attendee they are in it.
    colleague = f"colleague-{user}@example.com"
    uid = f"{uuid.uuid4()}@example.com"
    invite = calendar_of("REQUEST", uid=uid, organizer=colleague, attendees=[(own, "NEEDS-ACTION")])
    await send(receiver_port, message(own, address, cal=invite), mail_from=own, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 1), "the invitation on record")
    assert [r["verdict"] for r in await inbound_rows(db, user)] == ["offered"]
    vouched = await active_stub(stack, user)
    assert vouched is not None and vouched["invitation"]["sender_known"] is True
    assert (await stack.chat(user, "接受")).json()["outcome"] == "created"
    await eventually(lambda: len(sink.to(colleague)) == 1, "the REPLY")
    check_reply(
        sink.to(colleague)[0], uid=uid, organizer=colleague, attendee=own, partstat="ACCEPTED", sequence=0
    )
    # The same invitation straight from that colleague is offered too, marked as from someone
    # not in the contacts (the user's own address vouched for the first).
    again = calendar_of(
        "REQUEST",
        uid=f"{uuid.uuid4()}@example.com",
        organizer=colleague,
        attendees=[(address, "NEEDS-ACTION")],
    )
    await send(receiver_port, message(colleague, address, cal=again), mail_from=colleague, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 2), "the stranger's invitation on record")
    assert (await inbound_rows(db, user))[1]["verdict"] == "offered"
    stub = await active_stub(stack, user)
    assert stub is not None and stub["invitation"]["sender_known"] is False


# ---- someone not in the contacts (contract §19) ----------------------------------------------------


async def test_a_strangers_invitation_is_offered_marked_and_answered_like_a_known_ones(
    stack: Stack, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    address = await mail_address(stack, user)
    stranger = f"stranger-{user}@example.com"
    # What a stranger may not send any more than a contact: someone else's meeting, and one the
    # user is not invited to.
    forged = calendar_of(
        "REQUEST",
        uid=f"{uuid.uuid4()}@example.com",
        organizer=f"ceo-{user}@example.com",
        attendees=[(address, "NEEDS-ACTION")],
    )
    uninvited = calendar_of(
        "REQUEST",
        uid=f"{uuid.uuid4()}@example.com",
        organizer=stranger,
        attendees=[(f"peer-{user}@example.com", "NEEDS-ACTION")],
    )
    uid = f"{uuid.uuid4()}@example.com"
    invite = calendar_of("REQUEST", uid=uid, organizer=stranger, attendees=[(address, "NEEDS-ACTION")])
    for cal in (forged, uninvited, invite):
        await send(receiver_port, message(stranger, address, cal=cal), mail_from=stranger, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 3), "all three on record")
    assert [(r["verdict"], r["reason"]) for r in await inbound_rows(db, user)] == [
        ("dropped", "not_the_organizer"),
        ("dropped", "not_invited"),
        ("offered", None),
    ]
    stub = await active_stub(stack, user)
    assert stub is not None
    assert (stub["kind"], stub["status"], stub["hold_reason"]) == (
        "invitation",
        "held",
        "invitation_received",
    )
    assert (stub["invitation"]["uid"], stub["invitation"]["organizer"]) == (uid, stranger)
    assert stub["invitation"]["sender_known"] is False
    await asyncio.sleep(0.5)  # sweeps: a held offer does nothing without the user
    assert await read_events(stack, user) == [] and sink.to(stranger) == []

    assert (await stack.chat(user, "接受")).json()["outcome"] == "created"
    assert [e["uid"] for e in await read_events(stack, user)] == [uid]
    await eventually(lambda: len(sink.to(stranger)) == 1, "the REPLY")
    check_reply(
        sink.to(stranger)[0], uid=uid, organizer=stranger, attendee=address, partstat="ACCEPTED", sequence=0
    )


async def test_with_invitations_from_known_a_strangers_invitation_is_only_put_on_record(
    stack: Stack, db: AsyncEngine, receiver_port: int, user: str
) -> None:
    address = await mail_address(stack, user)
    saved = await stack.client.put(
        "/v1/settings", json={"invitations_from": "known"}, headers=stack.headers(user)
    )
    assert saved.status_code == 200, saved.text
    read = await stack.client.get("/v1/settings", headers=stack.headers(user))
    assert read.json()["invitations_from"] == "known"
    stranger = f"stranger-{user}@example.com"
    strange = calendar_of(
        "REQUEST",
        uid=f"{uuid.uuid4()}@example.com",
        organizer=stranger,
        attendees=[(address, "NEEDS-ACTION")],
    )
    await send(receiver_port, message(stranger, address, cal=strange), mail_from=stranger, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 1), "the stranger's invitation on record")
    assert [(r["verdict"], r["reason"]) for r in await inbound_rows(db, user)] == [
        ("dropped", "unknown_sender")
    ]
    assert await active_stub(stack, user) is None
    # A contact's invitation is offered as before, and is not marked.
    boss = f"boss-{user}@example.com"
    await add_contact(stack, user, "老板", boss)
    known = calendar_of(
        "REQUEST", uid=f"{uuid.uuid4()}@example.com", organizer=boss, attendees=[(address, "NEEDS-ACTION")]
    )
    await send(receiver_port, message(boss, address, cal=known), mail_from=boss, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 2), "the contact's invitation on record")
    assert [r["verdict"] for r in await inbound_rows(db, user)] == ["dropped", "offered"]
    stub = await active_stub(stack, user)
    assert stub is not None and stub["invitation"]["sender_known"] is True
    assert await read_events(stack, user) == []


async def test_invitations_wait_behind_the_users_open_request_and_each_other_and_none_is_lost(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    scripted.set_script(
        script(on_user("理发", tool_calls=[call("prepare_or_create_schedule", title="理发", date="D+1")]))
    )
    own = (await stack.chat(user, "明天去理发")).json()
    assert own["outcome"] == "needs_time", own
    address = await mail_address(stack, user)
    boss = f"boss-{user}@example.com"
    await add_contact(stack, user, "老板", boss)
    uids = [f"{uuid.uuid4()}@example.com" for _ in range(2)]
    for uid in uids:
        invite = calendar_of("REQUEST", uid=uid, organizer=boss, attendees=[(address, "NEEDS-ACTION")])
        await send(receiver_port, message(boss, address, cal=invite), mail_from=boss, rcpt=address)
    assert [r["verdict"] for r in await inbound_rows(db, user)] == ["waiting", "waiting"]
    assert (await active_stub(stack, user) or {}).get("id") == own["command"]["id"], "the user's own stays"

    cancelled = await stack.client.post(
        "/v1/commands", json={"tool": "cancel_schedule_command", "arguments": {}}, headers=stack.headers(user)
    )
    assert cancelled.json()["outcome"] == "cancelled", cancelled.text
    first = await active_stub(stack, user)
    assert first is not None and first["invitation"]["uid"] == uids[0]
    assert (await stack.chat(user, "接受")).json()["outcome"] == "created"
    second = await active_stub(stack, user)
    assert second is not None and second["invitation"]["uid"] == uids[1]
    assert (await stack.chat(user, "拒绝")).json()["outcome"] == "cancelled"
    assert await active_stub(stack, user) is None
    # Each record keeps what its mail became when it arrived: an offer waiting beside the user's.
    assert [r["verdict"] for r in await inbound_rows(db, user)] == ["waiting", "waiting"]
    await eventually(lambda: len(sink.to(boss)) == 2, "both answers")
    answers = {str(m.event()["UID"]): str(m.event()["ATTENDEE"].params["PARTSTAT"]) for m in sink.to(boss)}
    assert answers == {uids[0]: "ACCEPTED", uids[1]: "DECLINED"}
    assert [e["uid"] for e in await read_events(stack, user)] == [uids[0]]


async def test_a_waiting_invitation_comes_first_once_the_request_it_waited_behind_has_lapsed(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, receiver_port: int, user: str
) -> None:
    scripted.set_script(
        script(on_user("理发", tool_calls=[call("prepare_or_create_schedule", title="理发", date="D+1")]))
    )
    assert (await stack.chat(user, "明天去理发")).json()["outcome"] == "needs_time"
    address = await mail_address(stack, user)
    boss = f"boss-{user}@example.com"
    await add_contact(stack, user, "老板", boss)
    uids = [f"{uuid.uuid4()}@example.com" for _ in range(2)]

    async def invite(uid: str) -> None:
        cal = calendar_of("REQUEST", uid=uid, organizer=boss, attendees=[(address, "NEEDS-ACTION")])
        await send(receiver_port, message(boss, address, cal=cal), mail_from=boss, rcpt=address)

    await invite(uids[0])
    start = stack.clock.now()
    stack.clock.advance(timedelta(hours=2))  # the user's request lapses unanswered
    try:
        await invite(uids[1])
        offered = await active_stub(stack, user)
        assert offered is not None and offered["invitation"]["uid"] == uids[0], "the older one first"
        assert [r["verdict"] for r in await inbound_rows(db, user)] == ["waiting", "waiting"]
    finally:
        stack.clock.set(start)


# ---- a series with a moved occurrence ---------------------------------------------------------------


def series_with_a_moved_occurrence(
    *, uid: str, organizer: str, attendees: list[tuple[str, str]], first: datetime, moved_to: datetime
) -> Calendar:
    """A weekly series of four and, as its own VEVENT (RECURRENCE-ID), the second occurrence
    moved to `moved_to`: how an organizer's calendar sends a series with one exception."""
    cal = calendar_of("REQUEST", uid=uid, organizer=organizer, attendees=attendees, sequence=1, start=first)
    [master] = cal.walk("VEVENT")
    master.add("rrule", {"freq": "weekly", "count": 4})
    override = Event()
    override.add("uid", uid)
    override.add("dtstamp", datetime(2026, 9, 24, 1, 0, tzinfo=UTC))
    override.add("sequence", 1)
    override.add("recurrence-id", first + timedelta(weeks=1))
    override.add("dtstart", moved_to)
    override.add("dtend", moved_to + timedelta(hours=1))
    override.add("summary", str(master["SUMMARY"]))
    override.add("organizer", vCalAddress(f"mailto:{organizer}"))
    for address, status in attendees:
        person = vCalAddress(f"mailto:{address}")
        person.params["PARTSTAT"] = status
        person.params["RSVP"] = "TRUE"
        override.add("attendee", person, encode=False)
    cal.add_component(override)
    return cal


async def test_accepting_a_series_with_a_moved_occurrence_answers_at_once_and_keeps_both_rows(
    stack: Stack, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    address = await mail_address(stack, user)
    organizer = f"boss-{user}@example.com"
    await add_contact(stack, user, "老板", organizer)
    uid = f"{uuid.uuid4()}@example.com"
    first = datetime(2026, 9, 28, 14, 0, tzinfo=SHANGHAI)
    moved_to = datetime(2026, 10, 6, 16, 0, tzinfo=SHANGHAI)  # the second Monday's, on Tuesday
    cal = series_with_a_moved_occurrence(
        uid=uid, organizer=organizer, attendees=[(address, "NEEDS-ACTION")], first=first, moved_to=moved_to
    )
    await send(receiver_port, message(organizer, address, cal=cal), mail_from=organizer, rcpt=address)
    await eventually(lambda: _verdicts(db, user, 1), "the invitation on record")
    offer = await active_stub(stack, user)
    assert offer is not None and offer["invitation"]["uid"] == uid

    # Answered within the turn, not after minutes of retries ending in a dead letter.
    done = (await asyncio.wait_for(stack.chat(user, "接受"), timeout=30)).json()
    assert (done["outcome"], done["model_calls"]) == ("created", 0), done
    assert await active_stub(stack, user) is None
    async with db.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "select id, series_id, rrule, recurrence_id, start_at from commands.events "
                    "where user_id = :u and uid = :uid order by series_id nulls first"
                ),
                {"u": user, "uid": uid},
            )
        ).all()
    [master, override] = rows
    assert master.series_id is None and master.rrule is not None and master.start_at == first
    assert override.series_id == master.id
    assert (override.recurrence_id, override.start_at) == (first + timedelta(weeks=1), moved_to)
    starts = [e["start"] for e in await read_events(stack, user)]
    assert "2026-10-06T16:00:00+08:00" in starts and "2026-10-05T14:00:00+08:00" not in starts

    await eventually(lambda: len(sink.to(organizer)) == 1, "the REPLY")
    check_reply(
        sink.to(organizer)[0], uid=uid, organizer=organizer, attendee=address, partstat="ACCEPTED", sequence=1
    )
