"""Sync that survives servers as they are (contract §22), against a real Radicale — directly, or
through a fault-injecting proxy on loopback (`DavProxy`) that makes it answer like the servers in
the wild: a status for one method and path, ETags that change on every read, no sync tokens,
empty listings, a server that is down.

Each fault class has its own plain test; the facts are read from the server itself (the `caldav`
library, past the proxy), from `GET /v1/events`, `GET /v1/accounts` and the database rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from icalendar import Calendar
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.commands.caldav.inbound import InboundSync
from calagent.commands.caldav.outbox import Deliverer
from calagent.commands.caldav.worker import SyncWorker
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.davproxy import DavProxy
from calagent.devtools.testing.servers import Servers
from calagent.devtools.testing.xandikos import EmbeddedXandikos
from calagent.runtime.bus import instance_id
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import caldav_stack, radicale_server
from .conftest import call, on_user, read_events, script
from .test_caldav import (
    Remote,
    commands_app,
    connect,
    create_by_chat,
    eventually,
    outbox_drained,
    scalar,
)

pytestmark = pytest.mark.e2e

MAX_ATTEMPTS = 3


@pytest.fixture(scope="module")
def radicale() -> Iterator[EmbeddedRadicale]:
    with radicale_server() as server:
        yield server


@pytest.fixture(scope="module")
async def stack(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, radicale: EmbeddedRadicale
) -> AsyncIterator[Stack]:
    # The proxy listens on the server's own loopback address: one network to allow. Three attempts
    # instead of eight keep a refused delivery's backoff (0.5 s, 1 s) short.
    async with caldav_stack(
        servers,
        database_url,
        scripted,
        allow_networks=radicale.network,
        settings_overrides={"CALAGENT_CALDAV_MAX_ATTEMPTS": MAX_ATTEMPTS},
    ) as system:
        yield system


@pytest.fixture
async def proxy(radicale: EmbeddedRadicale) -> AsyncIterator[DavProxy]:
    server = DavProxy(radicale.url, host=radicale.host)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
def remote(radicale: EmbeddedRadicale) -> Remote:
    """The user's account as their calendar app reaches it: straight to the server."""
    name = f"f{uuid.uuid4().hex[:8]}"
    password = f"app-{uuid.uuid4().hex[:10]}"
    radicale.add_user(name, password)
    calendar_url = make_calendar(radicale.url, name, password, "Personal")
    return Remote(radicale.user_url(name), name, password, calendar_url)


async def connect_through(stack: Stack, user: str, remote: Remote, proxy: DavProxy) -> dict[str, Any]:
    """The account connected through the proxy: every request of ours passes its faults."""
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": proxy.rebase(remote.url), "username": remote.username, "password": remote.password},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    db = commands_app(stack).engine
    assert db is not None

    async def first_sync_done() -> bool:
        synced = await scalar(
            db, "select last_synced_at from commands.caldav_accounts where id = :a", a=body["id"]
        )
        return synced is not None

    await eventually(first_sync_done, "the first sync of the new account")
    return body


@contextlib.asynccontextmanager
async def connected_through_proxy(
    stack: Stack, radicale: EmbeddedRadicale, user: str, remote: Remote
) -> AsyncIterator[tuple[DavProxy, dict[str, Any]]]:
    """A proxy of its own in front of `radicale`, and the account connected through it."""
    server = DavProxy(radicale.url, host=radicale.host)
    await server.start()
    try:
        yield server, await connect_through(stack, user, remote, server)
    finally:
        await server.stop()


async def sync_now(stack: Stack, account_id: str) -> None:
    worker = commands_app(stack).sync
    assert worker is not None
    await worker.inbound.sync_account(account_id)


def edit_on_server(remote: Remote, href: str, **props: str) -> None:
    """The calendar app sets properties of one object (LOCATION, DESCRIPTION, …), as it stores."""
    with remote.client() as client:
        import caldav

        obj = caldav.Event(
            client=client, url=href, parent=caldav.Calendar(client=client, url=remote.calendar_url)
        )
        obj.load()
        cal = Calendar.from_ical(obj.data)
        for vevent in cal.walk("VEVENT"):
            for name, value in props.items():
                if name in vevent:
                    del vevent[name]
                vevent.add(name, value)
        obj.data = cal.to_ical().decode()
        obj.save(increase_seqno=False)


def only_vevent(remote: Remote) -> Any:
    [(_, body)] = remote.objects()
    [vevent] = body.walk("VEVENT")
    return vevent


# ---- 412: the server's version wins, and confirming ours applies only what ours changed -----------


async def test_confirming_a_conflict_offer_applies_only_what_our_change_made_on_the_servers_version(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    """The app set a place and a note while chat moved the event: the PUT meets 412, the server's
    version is kept, ours is offered; confirming it moves the event and keeps the app's place and
    note, on the server and here (it once wrote the assistant's whole old version back)."""
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": remote.url, "username": remote.username, "password": remote.password},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    event = await create_by_chat(stack, scripted, user, "读书会", time="19:00")
    await outbox_drained(db, user)
    [(href, _)] = remote.objects()
    edit_on_server(remote, href, LOCATION="街角咖啡馆", DESCRIPTION="带上《百年孤独》")

    scripted.set_script(
        script(
            on_user("读书会改到", tool_calls=[call("update_schedule", event_id=event["id"], time="20:00")]),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    assert (await stack.chat(user, "读书会改到8点")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    await outbox_drained(db, user)
    offer = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert (offer["kind"], offer["hold_reason"]) == ("change", "sync_conflict")
    # The offer shows our move on the server's version: its place and note are there.
    after = offer["change"]["after"]
    assert (after["start"], after["location"], after["notes"]) == (
        "2026-09-25T20:00:00+08:00",
        "街角咖啡馆",
        "带上《百年孤独》",
    )

    answered = await stack.chat(user, "确认", active_command_id=offer["id"])
    assert answered.json()["outcome"] == "updated", answered.text
    await outbox_drained(db, user)
    vevent = only_vevent(remote)
    assert vevent.decoded("DTSTART").isoformat() == "2026-09-25T20:00:00+08:00"
    assert (str(vevent["LOCATION"]), str(vevent["DESCRIPTION"])) == ("街角咖啡馆", "带上《百年孤独》")
    [local] = await read_events(stack, user)
    assert (local["start"], local["location"], local["notes"]) == (
        "2026-09-25T20:00:00+08:00",
        "街角咖啡馆",
        "带上《百年孤独》",
    )


# ---- a delivery the server always refuses ends within the bound --------------------------------


async def test_a_delivery_the_server_always_refuses_ends_rejected_after_the_bounded_attempts(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote, proxy: DavProxy
) -> None:
    """Every PUT answered 500: the delivery is tried `CALAGENT_CALDAV_MAX_ATTEMPTS` times, then
    ends `rejected`, marked on the event — not retried once a minute forever."""
    await connect_through(stack, user, remote, proxy)
    proxy.fail("PUT", None, 500)
    await create_by_chat(stack, scripted, user, "体检", time="08:00")

    async def settled() -> bool:
        outcome = await scalar(db, "select outcome from commands.caldav_outbox where user_id = :u", u=user)
        return outcome is not None

    await eventually(settled, "the refused delivery to end")
    row = await scalar(
        db, "select outcome || ':' || refusals + 1 from commands.caldav_outbox where user_id = :u", u=user
    )
    assert row == f"rejected:{MAX_ATTEMPTS}"
    assert proxy.count("PUT") == MAX_ATTEMPTS
    [event] = await read_events(stack, user)
    assert event["sync_state"] == "rejected"
    await asyncio.sleep(2.5)  # longer than the backoff a fourth attempt would have waited
    assert proxy.count("PUT") == MAX_ATTEMPTS
    assert remote.objects() == []


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
async def test_a_write_answered_423_locked_goes_out_again_and_is_not_rejected(
    stack: Stack,
    scripted: ScriptedModelServer,
    db: AsyncEngine,
    user: str,
    remote: Remote,
    proxy: DavProxy,
    method: str,
) -> None:
    """423 Locked is a lock that passes — Xandikos answers it to a write that meets another one
    (its git-backed store takes the index lock without waiting): the delivery is tried again
    within its bound and goes through. It was once taken for a refusal: the create marked
    rejected stayed here only, the delete left the event on the server only."""
    await connect_through(stack, user, remote, proxy)
    if method == "PUT":
        proxy.fail("PUT", None, 423, times=1)
    event = await create_by_chat(stack, scripted, user, "复诊", time="10:00")
    await outbox_drained(db, user)
    if method == "DELETE":
        proxy.fail("DELETE", None, 423, times=1)
        scripted.set_script(
            script(
                on_user("删掉", tool_calls=[call("delete_schedule", event_id=event["id"])]),
                on_user("确认", tool_calls=[call("confirm_command")]),
            )
        )
        assert (await stack.chat(user, "删掉它")).json()["outcome"] == "held"
        assert (await stack.chat(user, "确认")).json()["outcome"] == "deleted"
        await outbox_drained(db, user)
    assert proxy.count(method) == 2  # refused once, then through
    outcomes = await scalar(
        db, "select array_agg(distinct outcome) from commands.caldav_outbox where user_id = :u", u=user
    )
    assert outcomes == ["delivered"]
    if method == "PUT":
        [stored] = await read_events(stack, user)
        assert stored.get("sync_state") is None
        [(_, body)] = remote.objects()
        assert str(body.walk("VEVENT")[0]["UID"]) == f"{event['id']}@calagent"
    else:
        assert await read_events(stack, user) == []
        assert remote.objects() == []


async def test_a_server_that_does_not_answer_is_waited_for_and_loses_nothing(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote, proxy: DavProxy
) -> None:
    """No answer at all is no refusal: the delivery waits past the bound and goes out once the
    server is back."""
    await connect_through(stack, user, remote, proxy)
    proxy.down = True
    await create_by_chat(stack, scripted, user, "午饭", time="12:00")

    async def retried() -> bool:
        attempts = await scalar(db, "select attempts from commands.caldav_outbox where user_id = :u", u=user)
        return int(attempts or 0) > MAX_ATTEMPTS

    await eventually(retried, "more attempts than the bound while the server does not answer")
    proxy.down = False
    await outbox_drained(db, user)
    assert remote.summaries() == ["午饭"]
    assert (
        await scalar(db, "select outcome from commands.caldav_outbox where user_id = :u", u=user)
        == "delivered"
    )


# ---- an object gone under our write: kept here, the user asked -----------------------------------


async def command(stack: Stack, user: str, tool: str, command_id: str) -> dict[str, Any]:
    """The page's card answering an offer by its id (confirm_command / cancel_schedule_command)."""
    response = await stack.client.post(
        "/v1/commands",
        json={"tool": tool, "arguments": {"command_id": command_id}},
        headers=stack.headers(user),
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def offer_of(stack: Stack, user: str) -> dict[str, Any]:
    """The offer from outside: the active stub, or the one waiting beside the user's request."""
    active = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    if active is not None and active.get("hold_reason") == "sync_conflict":
        return dict(active)
    waiting = (await stack.client.get("/v1/commands/waiting", headers=stack.headers(user))).json()["commands"]
    [offer] = [w for w in waiting if w["hold_reason"] == "sync_conflict"]
    return dict(offer)


def remove_on_server(remote: Remote, href: str) -> None:
    with remote.client() as client:
        import caldav

        caldav.Event(
            client=client, url=href, parent=caldav.Calendar(client=client, url=remote.calendar_url)
        ).delete()


async def move_by_chat(
    stack: Stack, scripted: ScriptedModelServer, user: str, event_id: str, time: str
) -> None:
    scripted.set_script(
        script(
            on_user("改到", tool_calls=[call("update_schedule", event_id=event_id, time=time)]),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    assert (await stack.chat(user, f"改到{time}")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"


async def test_a_move_of_an_event_removed_in_the_app_is_kept_asked_about_and_put_back_when_kept(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote, proxy: DavProxy
) -> None:
    """The app removed the event while chat moved it (the PUT meets 412 and the object is gone):
    the event stays here with the move and the user is asked; keeping it puts it back on the
    server with the move (it was once deleted here and the move dropped without a word)."""
    connected = await connect_through(stack, user, remote, proxy)
    event = await create_by_chat(stack, scripted, user, "家长会", time="10:00")
    await outbox_drained(db, user)
    [(href, _)] = remote.objects()
    remove_on_server(remote, href)
    await move_by_chat(stack, scripted, user, event["id"], "16:00")
    await outbox_drained(db, user)
    await sync_now(stack, connected["id"])
    [local] = await read_events(stack, user)
    assert (local["id"], local["start"]) == (event["id"], "2026-09-25T16:00:00+08:00")
    offer = await offer_of(stack, user)
    assert (offer["kind"], offer["change"]["action"], offer["change"]["removed_count"]) == (
        "change",
        "delete",
        1,
    )

    refused = await command(stack, user, "cancel_schedule_command", offer["id"])
    assert refused["outcome"] == "cancelled", refused
    await sync_now(stack, connected["id"])
    await outbox_drained(db, user)
    vevent = only_vevent(remote)
    assert (str(vevent["UID"]), str(vevent["SUMMARY"])) == (local["uid"], "家长会")
    assert vevent.decoded("DTSTART").isoformat() == "2026-09-25T16:00:00+08:00"
    await sync_now(stack, connected["id"])
    assert [e["id"] for e in await read_events(stack, user)] == [event["id"]]


async def test_a_404_on_our_update_is_asked_about_and_confirming_removes_it_here(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote, proxy: DavProxy
) -> None:
    """The app removed the event and the server answers our update 404 (as Nextcloud does): not
    marked rejected and then deleted here without a word — the user is asked, and confirming
    removes it here too."""
    connected = await connect_through(stack, user, remote, proxy)
    event = await create_by_chat(stack, scripted, user, "周会", time="10:00")
    await outbox_drained(db, user)
    [(href, _)] = remote.objects()
    remove_on_server(remote, href)
    proxy.fail("PUT", r"\.ics$", 404, times=1)
    await move_by_chat(stack, scripted, user, event["id"], "11:00")
    await outbox_drained(db, user)
    last = "select outcome from commands.caldav_outbox where user_id = :u order by id desc limit 1"
    assert await scalar(db, last, u=user) == "conflict"
    await sync_now(stack, connected["id"])
    [local] = await read_events(stack, user)
    assert (local["start"], local.get("sync_state")) == ("2026-09-25T11:00:00+08:00", None)
    offer = await offer_of(stack, user)
    assert (offer["change"]["action"], offer["change"]["removed_count"]) == ("delete", 1)
    confirmed = await command(stack, user, "confirm_command", offer["id"])
    assert confirmed["outcome"] == "deleted", confirmed
    await outbox_drained(db, user)
    await sync_now(stack, connected["id"])
    assert await read_events(stack, user) == []
    assert remote.objects() == []


async def test_a_404_the_next_listing_contradicts_lets_our_change_go_out(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote, proxy: DavProxy
) -> None:
    """A 404 the server takes back (the object is listed after all): the question goes by
    itself and the move the server did not take is sent again."""
    connected = await connect_through(stack, user, remote, proxy)
    event = await create_by_chat(stack, scripted, user, "周会", time="10:00")
    await outbox_drained(db, user)
    proxy.fail("PUT", r"\.ics$", 404, times=1)
    await move_by_chat(stack, scripted, user, event["id"], "11:00")
    await outbox_drained(db, user)
    assert (await offer_of(stack, user))["change"]["removed_count"] == 1
    proxy.no_sync_tokens = True  # a full listing, which shows the object
    await sync_now(stack, connected["id"])
    await outbox_drained(db, user)
    assert only_vevent(remote).decoded("DTSTART").isoformat() == "2026-09-25T11:00:00+08:00"
    assert (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json() is None
    [local] = await read_events(stack, user)
    assert local["start"] == "2026-09-25T11:00:00+08:00"


# ---- 409 no-uid-conflict: the object there is adopted, never doubled -----------------------------


def put_raw(remote: Remote, name: str, body: str) -> str:
    """The app stores an object under a name of its own choosing (Thunderbird's, not ours)."""
    href = remote.calendar_url + name
    with remote.client() as client:
        response = client.put(href, body, {"Content-Type": "text/calendar; charset=utf-8"})
        assert response.status in (201, 204), response.status
    return href


# ---- what a listing from a sync token cannot name ----------------------------------------------


@pytest.mark.parametrize("server", ["xandikos", "radicale-without-sync-tokens"])
async def test_an_event_we_made_that_the_app_removed_before_the_next_sync_goes_here_too(
    stack: Stack,
    scripted: ScriptedModelServer,
    db: AsyncEngine,
    user: str,
    remote: Remote,
    proxy: DavProxy,
    server: str,
    tmp_path: Path,
) -> None:
    """Our create reached the server and the calendar app removed it before the next sync: a
    listing from the last sync token names it neither changed nor removed (Xandikos compares two
    git trees; the library's own token for a server without any is the same before and after).
    The sync asks for what we wrote since by name and removes it here too; it once stayed here
    for good (found by the sync proof against Xandikos)."""
    with contextlib.ExitStack() as cleanup:
        if server == "xandikos":
            xandikos = EmbeddedXandikos(tmp_path / "xandikos")
            xandikos.start()
            cleanup.callback(xandikos.stop)
            remote = Remote(xandikos.url, "user", "unused", xandikos.calendar_url)
            account = await connect(stack, user, remote)
        else:
            account = await connect_through(stack, user, remote, proxy)
            proxy.no_sync_tokens = True
        # Two of the app's own: one object gone of three is the user's deletion, not a glitch.
        tag = uuid.uuid4().hex[:6]
        kept = [
            remote.add(f"{tag}-{i}", f"事项{i}", f"202610{1 + i:02d}T010000Z", f"202610{1 + i:02d}T020000Z")
            for i in range(2)
        ]
        await sync_now(stack, account["id"])
        event = await create_by_chat(stack, scripted, user, "取快递", time="18:00")
        await outbox_drained(db, user)
        [ours] = [href for href, _ in remote.objects() if href not in kept]
        remove_on_server(remote, ours)
        await sync_now(stack, account["id"])
        found = await read_events(stack, user)
        assert event["id"] not in {e["id"] for e in found}
        assert sorted(e["title"] for e in found) == ["事项0", "事项1"]
        offers = await scalar(
            db,
            "select count(*) from commands.stubs where user_id = :u and hold_reason = 'sync_conflict'",
            u=user,
        )
        assert offers == 0  # removed as the user's deletion, not withheld as a glitch


NEXTCLOUD_409 = (
    '<?xml version="1.0" encoding="utf-8"?>\n<d:error xmlns:d="DAV:" xmlns:cal="urn:ietf:params:xml:ns:caldav">'
    "<cal:no-uid-conflict><d:href>{href}</d:href></cal:no-uid-conflict></d:error>"
)


@pytest.mark.parametrize("named", [False, True], ids=["radicale", "nextcloud-names-the-object"])
async def test_a_uid_the_server_holds_under_another_name_is_adopted_not_doubled(
    stack: Stack,
    scripted: ScriptedModelServer,
    db: AsyncEngine,
    user: str,
    remote: Remote,
    proxy: DavProxy,
    named: bool,
) -> None:
    """While our create waited, the app stored the same UID under its own name: our PUT meets
    409 no-uid-conflict (Radicale's names no object, Nextcloud's does); that object becomes the
    event's, and no second one appears here or there (it was once marked rejected and the
    server's copy imported beside ours)."""
    connected = await connect_through(stack, user, remote, proxy)
    proxy.fail("PUT", None, 503)
    event = await create_by_chat(stack, scripted, user, "签合同", time="09:00")
    [stored] = await read_events(stack, user)
    uid = stored["uid"]
    body = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Mozilla//Thunderbird//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:{uid}\r\nDTSTAMP:20260924T000000Z\r\nDTSTART:20260925T010000Z\r\nDTEND:20260925T020000Z\r\n"
        "SUMMARY:签合同\r\nLOCATION:三楼会议室\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    theirs = put_raw(remote, "thunderbird-7f3a.ics", body)
    proxy.clear()
    if named:
        path = urlsplit(theirs).path
        proxy.fail(
            "PUT",
            r"_calagent\.ics$",
            409,
            times=1,
            body=NEXTCLOUD_409.format(href=path),
            content_type="application/xml",
        )
    await outbox_drained(db, user)
    outcome = await scalar(db, "select outcome from commands.caldav_outbox where user_id = :u", u=user)
    assert outcome in ("delivered", "conflict"), outcome
    href = await scalar(db, "select href from commands.caldav_resources where event_id = :e", e=event["id"])
    assert href.endswith("/thunderbird-7f3a.ics"), href
    await sync_now(stack, connected["id"])
    found = await read_events(stack, user)
    assert [(e["id"], e["uid"]) for e in found] == [(event["id"], uid)]
    assert found[0]["location"] == "三楼会议室"  # the object there, as the app wrote it
    assert [h for h, _ in remote.objects()] == [theirs]


# ---- a calendar that suddenly looks empty is not copied ------------------------------------------


def fill(remote: Remote, n: int, tag: str) -> list[str]:
    return [
        remote.add(f"{tag}-{i}", f"事项{i}", f"202610{1 + i:02d}T010000Z", f"202610{1 + i:02d}T020000Z")
        for i in range(n)
    ]


async def accounts_of(stack: Stack, user: str) -> list[dict[str, Any]]:
    listed = await stack.client.get("/v1/accounts", headers=stack.headers(user))
    assert listed.status_code == 200, listed.text
    found: list[dict[str, Any]] = listed.json()["accounts"]
    return found


async def test_losing_more_than_half_in_one_sync_deletes_nothing_until_the_user_confirms(
    stack: Stack, db: AsyncEngine, user: str, remote: Remote, proxy: DavProxy
) -> None:
    """12 of 20 events vanish from the calendar in one sync: none is deleted here; one held offer
    names the count; confirming it removes them here."""
    connected = await connect_through(stack, user, remote, proxy)
    hrefs = fill(remote, 20, uuid.uuid4().hex[:6])
    await sync_now(stack, connected["id"])
    assert len(await read_events(stack, user)) == 20
    for href in hrefs[:12]:
        remove_on_server(remote, href)
    await sync_now(stack, connected["id"])
    assert len(await read_events(stack, user)) == 20
    offer = await offer_of(stack, user)
    assert (offer["kind"], offer["change"]["action"], offer["change"]["removed_count"]) == (
        "change",
        "delete",
        12,
    )
    assert "8 of 20" in offer["title"]
    await sync_now(stack, connected["id"])  # asked once, not once a sync
    assert (await offer_of(stack, user))["id"] == offer["id"]

    confirmed = await command(stack, user, "confirm_command", offer["id"])
    assert confirmed["outcome"] == "deleted", confirmed
    await outbox_drained(db, user)
    await sync_now(stack, connected["id"])
    assert sorted(e["title"] for e in await read_events(stack, user)) == sorted(
        f"事项{i}" for i in range(12, 20)
    )
    assert len(remote.objects()) == 8


async def test_a_calendar_that_glitches_empty_is_not_copied_and_the_hold_lifts_when_it_shows_again(
    stack: Stack, user: str, remote: Remote, proxy: DavProxy
) -> None:
    """A server without sync tokens answers one listing empty: the 20 events stay here and the
    user is asked; the next listing shows them again, and the offer goes by itself."""
    connected = await connect_through(stack, user, remote, proxy)
    fill(remote, 20, uuid.uuid4().hex[:6])
    proxy.no_sync_tokens = True
    await sync_now(stack, connected["id"])
    assert len(await read_events(stack, user)) == 20
    proxy.empty_listings = True
    await sync_now(stack, connected["id"])
    assert len(await read_events(stack, user)) == 20
    offer = await offer_of(stack, user)
    assert offer["change"]["removed_count"] == 20
    assert "0 of 20" in offer["title"]

    proxy.empty_listings = False
    await sync_now(stack, connected["id"])
    assert len(await read_events(stack, user)) == 20
    assert (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json() is None
    waiting = (await stack.client.get("/v1/commands/waiting", headers=stack.headers(user))).json()["commands"]
    assert waiting == []
    assert len(remote.objects()) == 20


# ---- health you can see ------------------------------------------------------------------------


async def test_accounts_show_the_last_sync_the_last_error_in_our_words_pending_deliveries_and_warnings(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote, proxy: DavProxy
) -> None:
    """GET /v1/accounts tells what the log alone told: when the account last synced, its last
    error (our words: the status, never the server's text), the deliveries waiting and refused,
    and a calendar's withheld deletions until the user answers."""
    connected = await connect_through(stack, user, remote, proxy)
    [account] = await accounts_of(stack, user)
    assert account["last_synced_at"] is not None
    assert (account["last_error"], account["pending_deliveries"], account["warnings"]) == (None, 0, [])

    proxy.fail(
        "PUT", None, 503, body="<html>stack trace of the server: secret</html>", content_type="text/html"
    )
    await create_by_chat(stack, scripted, user, "复诊", time="09:00")

    async def told() -> bool:
        [now] = await accounts_of(stack, user)
        return now["last_error"] is not None

    await eventually(told, "the delivery's failure on the account")
    [account] = await accounts_of(stack, user)
    assert account["pending_deliveries"] == 1
    assert "503" in account["last_error"]["message"]
    assert "secret" not in account["last_error"]["message"]
    assert account["last_error"]["at"] is not None

    async def refused() -> bool:
        [now] = await accounts_of(stack, user)
        return bool(now["rejected_deliveries"] == 1 and now["pending_deliveries"] == 0)

    await eventually(refused, "the refused delivery to be counted")
    proxy.clear()

    # A sync that fails says so; the next one that works clears it.
    proxy.down = True
    await sync_now(stack, connected["id"])
    [account] = await accounts_of(stack, user)
    assert "could not be reached" in account["last_error"]["message"]
    proxy.down = False
    hrefs = fill(remote, 3, uuid.uuid4().hex[:6])
    await sync_now(stack, connected["id"])
    [account] = await accounts_of(stack, user)
    assert (
        account["last_error"] is not None and "could not be reached" not in account["last_error"]["message"]
    )

    for href in hrefs:
        remove_on_server(remote, href)
    await sync_now(stack, connected["id"])
    [account] = await accounts_of(stack, user)
    offer = await offer_of(stack, user)
    assert account["warnings"] == [
        {
            "kind": "events_withheld",
            "calendar": "Personal",
            "missing": 3,
            "had": 3,
            "shows": 0,
            "command_id": offer["id"],
            "href": None,
            "uid": None,
            "problem": None,
        }
    ]
    await command(stack, user, "confirm_command", offer["id"])
    [account] = await accounts_of(stack, user)
    assert account["warnings"] == []


# ---- a sync killed half-way -----------------------------------------------------------------------


async def test_a_restarted_service_does_not_wait_for_the_lease_its_killed_process_left(
    stack: Stack, db: AsyncEngine, user: str, remote: Remote
) -> None:
    """The process that held the account's lease was killed mid-sync (its pid runs no more on
    this host): the restarted service syncs the account in its first round, not after the lease
    ran out (about 20 rounds with nothing read). Another replica's live lease is still kept."""
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": remote.url, "username": remote.username, "password": remote.password},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    account_id = response.json()["id"]
    running = commands_app(stack).sync
    assert running is not None
    owner = f"commands-{instance_id()}"
    dead = f"{owner.rpartition(':')[0]}:{_gone_pid()}"  # a process of this host, killed
    async with db.begin() as conn:
        await conn.execute(
            text(
                "update commands.caldav_accounts set lease_owner = :o,"
                " lease_until = clock_timestamp() + interval '60 seconds', last_synced_at = null where id = :a"
            ),
            {"o": dead, "a": account_id},
        )
    remote.add("after-the-kill", "复盘", "20260925T010000Z", "20260925T020000Z")
    first = running.inbound
    inbound = InboundSync(first.engine, first.vault, owner, "Asia/Shanghai", first.guard, first.holds)
    restarted = SyncWorker(running.deliverer, inbound, sweep_s=0.2, sync_s=0.5)
    restarted.start()
    try:

        async def synced() -> bool:
            return any(e["title"] == "复盘" for e in await read_events(stack, user))

        await eventually(synced, "the restarted service to sync the account")
    finally:
        await restarted.stop()
    # A lease a live process of this host holds (another replica) is not taken from it.
    async with db.begin() as conn:
        await conn.execute(
            text(
                "update commands.caldav_accounts set lease_owner = :o,"
                " lease_until = clock_timestamp() + interval '60 seconds' where id = :a"
            ),
            {"o": f"{owner.rpartition(':')[0]}:{os.getppid()}", "a": account_id},
        )
    assert await inbound.release_stale() == 0
    assert await inbound.sync_account(account_id) is None


def _gone_pid() -> int:
    """The pid of a child that has exited and been reaped: no process runs under it now."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


# ---- replicas delivering one resource at once -----------------------------------------------------


async def test_two_replicas_meeting_on_one_resources_rows_do_not_deadlock(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    """Two writes of one event wait as two rows; two replicas each claim one and meet on the
    resource's lock. The one that waits steps aside instead of holding its row while the other
    needs it (a deadlock PostgreSQL broke by failing a sweep; found by the sync proof)."""
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": remote.url, "username": remote.username, "password": remote.password},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    event = await create_by_chat(stack, scripted, user, "站会", time="09:30")
    await outbox_drained(db, user)
    running = commands_app(stack).sync
    assert running is not None
    first = running.deliverer
    replicas = [
        Deliverer(first.engine, first.vault, first.clock, first.stub_ttl, first.guard) for _ in range(2)
    ]
    for _ in range(10):
        async with db.begin() as conn:
            await conn.execute(
                text(
                    "insert into commands.caldav_outbox (user_id, event_id, not_before)"
                    " select :u, :e, clock_timestamp() + interval '1 second' from generate_series(1, 2)"
                ),
                {"u": user, "e": event["id"]},
            )
        await asyncio.sleep(1.05)  # both rows due at once, for both replicas
        await asyncio.gather(*(r.deliver_due() for r in replicas))
    await outbox_drained(db, user)
    assert len(remote.objects()) == 1


async def test_a_second_conflict_on_one_event_replaces_its_first_offer(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    """Both sides changed one event twice: the user is offered their latest change on the
    server's latest version, once — not two offers about one event, the first one stale."""
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": remote.url, "username": remote.username, "password": remote.password},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    event = await create_by_chat(stack, scripted, user, "读书会", time="19:00")
    await outbox_drained(db, user)
    [(href, _)] = remote.objects()
    for n, time in enumerate(("20:00", "21:00")):
        remote.retitle(href, f"读书会（第{n + 1}次改）")
        await move_by_chat(stack, scripted, user, event["id"], time)
        await outbox_drained(db, user)
    held = await scalar(
        db,
        "select array_agg(change->'after'->>'start') from commands.stubs where user_id = :u"
        " and hold_reason = 'sync_conflict' and status = 'held'",
        u=user,
    )
    assert held == ["2026-09-25T13:00:00+00:00"]  # 21:00 in Shanghai, the latest change
