"""Proposing times to someone outside (contract §20) through the real gateway, agent and commands,
real SMTP both ways and a scripted model: "约王五下周找个时间聊一小时" is a held proposal; on
"确认" the attendee gets one mail listing the slots (in their zone when it is known, and in the
user's) and the slots are held as tentative events; their reply naming one ("Tuesday works", or an
iMIP COUNTER in the thread) is a held booking; on "确认" the event is created with them, the other
holds released, and the invitation sent. Each step is followed by the next, unrelated message;
the facts are read back: events (rows and the calendar's iCalendar), stubs, inbound records, and
what the sink received."""

# The fixtures imported from test_inbound are the test functions' parameters.
# ruff: noqa: F811
from __future__ import annotations

import asyncio
from datetime import datetime
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from icalendar import Calendar
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script
from .test_counters import meeting_with
from .test_inbound import (  # noqa: F401
    active_stub,
    calendar_of,
    inbound_rows,
    message,
    receiver_port,
    send,
    sink,
    stack,
)
from .test_people import Received, Sink, add_contact, check_rfc5546, eventually, mail_address

pytestmark = pytest.mark.e2e

ASK = "约王五下周找个时间聊一小时"


def proposing(*rules: dict[str, Any]) -> Any:
    return script(
        on_user(
            "约王五",
            tool_calls=[
                call(
                    "propose_times",
                    title="聊一聊",
                    attendee="王五",
                    start="W1+1",
                    end="W1+2",
                    duration_minutes=60,
                )
            ],
        ),
        on_user("谢谢", text="不客气！"),
        on_user("确认", tool_calls=[call("confirm_command")]),
        *rules,
    )


async def held_rows(db: AsyncEngine, user: str) -> list[dict[str, Any]]:
    async with db.connect() as conn:
        rows = await conn.execute(
            text(
                "select id, title, start_at, end_at, tentative, transparent, attendees from commands.events "
                "where user_id = :u and title = '聊一聊' order by start_at"
            ),
            {"u": user},
        )
        return [dict(r._mapping) for r in rows]


def proposal_mails(sink: Sink, who: str) -> list[Received]:
    return [m for m in sink.to(who) if str(m.message["Subject"]).startswith("Proposed times")]


def lines_of(mail: Received) -> list[str]:
    body = mail.message.get_body(preferencelist=("plain",))  # type: ignore[attr-defined]
    content = body.get_content()
    return [line for line in content.splitlines() if line[:2] in ("1.", "2.", "3.")]


def reply_to(mail: Received, sender: str, to: str, body: str, *, cal: Calendar | None = None) -> EmailMessage:
    """The attendee's answer in the thread of the proposal's mail, quoting it below."""
    answer = message(sender, to, cal=cal, body=body)
    del answer["Subject"]
    answer["Subject"] = "Re: " + str(mail.message["Subject"])
    answer["In-Reply-To"] = str(mail.message["Message-ID"])
    answer["References"] = str(mail.message["Message-ID"])
    answer.replace_header("Message-ID", make_msgid(domain="example.com"))
    return answer


async def proposed(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str, wang5: str
) -> tuple[dict[str, Any], Received]:
    """The proposal asked for, waited on by an unrelated message, confirmed and mailed."""
    offer = (await stack.chat(user, ASK)).json()
    assert offer["outcome"] == "held", offer
    stub = await active_stub(stack, user)
    assert stub is not None and (stub["kind"], stub["hold_reason"]) == ("proposal", "sends_invitations")
    slots = stub["proposal"]["slots"]
    assert 1 <= len(slots) <= 3
    assert [s["start"] for s in slots] == sorted(s["start"] for s in slots)
    assert all("2026-09-28" <= s["start"][:10] <= "2026-10-04" for s in slots), "next week"
    assert stub["proposal"]["attendee"]["email"] == wang5

    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    await asyncio.sleep(0.6)
    assert await held_rows(db, user) == [] and proposal_mails(sink, wang5) == [], (
        "nothing before the user's word"
    )

    sent = (await stack.chat(user, "确认", active_command_id=stub["id"])).json()
    assert sent["outcome"] == "created", sent
    holds = await held_rows(db, user)
    assert [(h["start_at"], h["tentative"], h["transparent"]) for h in holds] == [
        (datetime.fromisoformat(s["start"]), True, False) for s in slots
    ]
    await eventually(lambda: len(proposal_mails(sink, wang5)) == 1, "the proposal's mail")
    [mail] = proposal_mails(sink, wang5)
    assert not [p for p in mail.message.walk() if p.get_content_type() == "text/calendar"]
    assert mail.sender == await mail_address(stack, user) and mail.recipients == [wang5]
    assert len(lines_of(mail)) == len(slots)
    return stub, mail


async def test_a_proposal_is_mailed_on_confirmation_and_the_chosen_time_booked_on_the_next(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    wang5 = f"wang5-{user}@example.com"
    await add_contact(stack, user, "王五", wang5)
    scripted.set_script(proposing())
    stub, mail = await proposed(stack, scripted, db, sink, user, wang5)
    slots = stub["proposal"]["slots"]
    assert len(slots) >= 2
    # The attendee's zone is not known: each slot in the user's, named.
    assert all(line.count("(Asia/Shanghai)") == 1 for line in lines_of(mail))
    ics = (await stack.client.get("/v1/calendar.ics", headers=stack.headers(user))).text
    held = list(Calendar.from_ical(ics).walk("VEVENT"))
    assert len(held) == len(slots)
    assert {(str(e["STATUS"]), str(e["TRANSP"])) for e in held} == {("TENTATIVE", "OPAQUE")}

    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    address = await mail_address(stack, user)
    scripted.clear_requests()
    answer = reply_to(mail, wang5, address, "Tuesday works for me!\n\n> " + "\n> ".join(lines_of(mail)))
    await send(receiver_port, answer, mail_from=wang5, rcpt=address)
    assert [r["verdict"] for r in await inbound_rows(db, user)] == ["offered"]
    booking = await active_stub(stack, user)
    assert booking is not None
    assert (booking["kind"], booking["status"], booking["hold_reason"]) == (
        "booking",
        "held",
        "sends_invitations",
    )
    [tuesday] = [i for i, s in enumerate(slots) if datetime.fromisoformat(s["start"]).isoweekday() == 2]
    assert booking["proposal"]["chosen"] == tuesday
    chosen = slots[tuesday]

    # The next, unrelated message books nothing; the reply's words never reached the model.
    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    await asyncio.sleep(0.6)
    assert len(await held_rows(db, user)) == len(slots) and len(sink.to(wang5)) == 1
    assert not any("Tuesday works" in str(m.get("content")) for r in scripted.requests for m in r.messages)

    done = (await stack.chat(user, "确认", active_command_id=booking["id"])).json()
    assert done["outcome"] == "created", done
    [event] = await read_events(stack, user)
    assert (event["start"], event["end"], event["title"]) == (chosen["start"], chosen["end"], "聊一聊")
    assert [p["email"] for p in event["attendees"]] == [wang5] and event["organizer"] == address
    [row] = await held_rows(db, user)
    assert row["tentative"] is False, "the other holds are released and the booked time is certain"
    await eventually(lambda: len(sink.to(wang5)) == 2, "the invitation")
    invitation = sink.to(wang5)[1]
    check_rfc5546(invitation, "REQUEST", event["uid"], address, 0)
    assert invitation.event().decoded("DTSTART") == datetime.fromisoformat(chosen["start"])

    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    await asyncio.sleep(0.6)
    assert len(sink.to(wang5)) == 2 and await active_stub(stack, user) is None


async def test_the_attendees_zone_from_their_reply_is_used_and_a_counter_in_the_thread_books_its_slot(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    wang5 = f"wang5-{user}@example.com"
    await add_contact(stack, user, "王五", wang5)
    meeting = await meeting_with(stack, scripted, sink, user, [wang5])
    address = await mail_address(stack, user)
    # Their answer to an earlier invitation, written in their own zone.
    berlin = datetime.fromisoformat(meeting["start"]).astimezone(ZoneInfo("Europe/Berlin"))
    accepted = calendar_of(
        "REPLY", uid=meeting["uid"], organizer=address, attendees=[(wang5, "ACCEPTED")], start=berlin
    )
    await send(receiver_port, message(wang5, address, cal=accepted), mail_from=wang5, rcpt=address)
    assert [r["verdict"] for r in await inbound_rows(db, user)] == ["replied"]
    scripted.set_script(proposing())
    stub, mail = await proposed(stack, scripted, db, sink, user, wang5)
    assert (stub["proposal"]["attendee_tz"], stub["proposal"]["zone_source"]) == ("Europe/Berlin", "reply")
    assert all(line.index("(Europe/Berlin)") < line.index("(Asia/Shanghai)") for line in lines_of(mail)), (
        "their zone first, named, then the user's"
    )
    slots = stub["proposal"]["slots"]
    last = slots[-1]

    # Their client answers in the thread with a COUNTER for the last slot.
    counter = calendar_of(
        "COUNTER",
        uid="proposal@example.com",
        organizer=address,
        attendees=[(wang5, "ACCEPTED")],
        start=datetime.fromisoformat(last["start"]),
    )
    await send(receiver_port, reply_to(mail, wang5, address, "", cal=counter), mail_from=wang5, rcpt=address)
    assert [r["verdict"] for r in await inbound_rows(db, user)][-1] == "offered"
    booking = await active_stub(stack, user)
    assert booking is not None and booking["proposal"]["chosen"] == len(slots) - 1

    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    done = await stack.client.post(
        "/v1/commands", json={"tool": "confirm_command", "arguments": {}}, headers=stack.headers(user)
    )
    assert done.json()["outcome"] == "created", done.text
    [event] = [e for e in await read_events(stack, user) if e["title"] == "聊一聊"]
    assert event["start"] == last["start"] and len(await held_rows(db, user)) == 1


async def test_a_reply_naming_no_slot_is_a_turn_and_one_from_someone_else_books_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, receiver_port: int, user: str
) -> None:
    wang5 = f"wang5-{user}@example.com"
    await add_contact(stack, user, "王五", wang5)
    scripted.set_script(proposing())
    stub, mail = await proposed(stack, scripted, db, sink, user, wang5)
    address = await mail_address(stack, user)
    holds = await held_rows(db, user)

    mallory = f"mallory-{user}@example.com"
    await send(receiver_port, reply_to(mail, mallory, address, "2"), mail_from=mallory, rcpt=address)
    await send(
        receiver_port,
        reply_to(mail, wang5, address, "None of these work, sorry"),
        mail_from=wang5,
        rcpt=address,
    )
    # Their client declining in the thread chooses no slot either.
    first = datetime.fromisoformat(stub["proposal"]["slots"][0]["start"])
    declined = calendar_of(
        "REPLY", uid="p@example.com", organizer=address, attendees=[(wang5, "DECLINED")], start=first
    )
    await send(receiver_port, reply_to(mail, wang5, address, "", cal=declined), mail_from=wang5, rcpt=address)
    assert [(r["verdict"], r["reason"]) for r in await inbound_rows(db, user)] == [
        ("dropped", "unknown_sender"),
        ("turn", None),
        ("dropped", "not_a_proposed_time"),
    ]
    await asyncio.sleep(1.0)  # the turn runs: its words are someone else's, nothing is booked
    assert await held_rows(db, user) == holds
    stub_now = await active_stub(stack, user)
    assert stub_now is None or stub_now["kind"] != "booking"
    assert len(sink.to(wang5)) == 1


async def test_proposed_times_held_on_a_task_block_offer_its_replan_which_waits_for_the_users_word(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, sink: Sink, user: str
) -> None:
    wang5 = f"wang5-{user}@example.com"
    await add_contact(stack, user, "王五", wang5)
    # A task with room only next Monday: its block is free (transparent), so the first time proposed
    # to someone lands on it.
    made = await stack.client.post(
        "/v1/tasks",
        json={
            "title": "月报",
            "duration_minutes": 60,
            "earliest": "2026-09-28T00:00:00+08:00",
            "due": "2026-09-28T18:00:00+08:00",
        },
        headers=stack.headers(user),
    )
    assert made.status_code == 201, made.text
    task = made.json()

    def blocks(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(e["start"], e["end"]) for e in events if e.get("task_id") == task["id"]]

    [placed] = blocks(await read_events(stack, user))
    scripted.set_script(proposing())
    await proposed(stack, scripted, db, sink, user, wang5)
    holds = await held_rows(db, user)
    on_block = [
        h
        for h in holds
        if h["start_at"] < datetime.fromisoformat(placed[1])
        and datetime.fromisoformat(placed[0]) < h["end_at"]
    ]
    assert on_block, (placed, holds)
    # The send's receipt holds the block's re-plan, clear of every hold; the block has not moved.
    offer = await active_stub(stack, user)
    assert offer is not None and (offer["kind"], offer["status"]) == ("replan", "held"), offer
    [move] = offer["replan"]["moves"]
    old = (datetime.fromisoformat(move["old_start"]), datetime.fromisoformat(move["old_end"]))
    assert (move["task_id"], old) == (task["id"], tuple(datetime.fromisoformat(t) for t in placed)), move
    new_start, new_end = datetime.fromisoformat(move["new_start"]), datetime.fromisoformat(move["new_end"])
    assert all(new_end <= h["start_at"] or h["end_at"] <= new_start for h in holds), (move, holds)
    assert blocks(await read_events(stack, user)) == [placed]

    # The next, unrelated message moves nothing and leaves the offer.
    assert (await stack.chat(user, "谢谢")).json()["outcome"] == "answered"
    assert blocks(await read_events(stack, user)) == [placed]
    assert (await active_stub(stack, user) or {}).get("id") == offer["id"]

    moved = (await stack.chat(user, "确认")).json()
    assert moved["outcome"] == "updated", moved
    assert [
        (datetime.fromisoformat(s), datetime.fromisoformat(e))
        for s, e in blocks(await read_events(stack, user))
    ] == [(new_start, new_end)]
    assert await held_rows(db, user) == holds, "the holds stay as they were"
