"""Sync that survives servers as they are (contract §22), against a real Radicale — directly, or
through a fault-injecting proxy on loopback (`DavProxy`) that makes it answer like the servers in
the wild: a status for one method and path, ETags that change on every read, no sync tokens,
empty listings, a server that is down.

Each fault class has its own plain test; the facts are read from the server itself (the `caldav`
library, past the proxy), from `GET /v1/events`, `GET /v1/accounts` and the database rows.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from icalendar import Calendar
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.davproxy import DavProxy
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import caldav_stack, radicale_server
from .conftest import call, on_user, read_events, script
from .test_caldav import Remote, commands_app, create_by_chat, eventually, outbox_drained, scalar

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
