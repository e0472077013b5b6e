"""A CalDAV address cannot be turned against the server (contract §12), through the whole system:
`POST /v1/accounts/caldav`, the outbox and the inbound sync.

The stack allows exactly one loopback address (127.0.0.2/32), where a real CalDAV server runs;
listeners on other loopback addresses count every connection they get, so "refused, and no request
was made" is a number read from the listener, not a message. Everything stays on loopback.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.listeners import Answer, Listener, Seen
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import caldav_stack, radicale_server
from .test_caldav import Remote, commands_app, connect, create_by_chat, eventually, outbox_drained, scalar

pytestmark = pytest.mark.e2e

ALLOWED = "127.0.0.2"
REFUSED = "127.0.0.3"
SECRET = "SECRET-INTERNAL-BODY"


@pytest.fixture(scope="module")
def radicale() -> Iterator[EmbeddedRadicale]:
    with radicale_server(host=ALLOWED) as server:
        yield server


@pytest.fixture(scope="module")
async def stack(servers: Servers, database_url: str, scripted: ScriptedModelServer) -> AsyncIterator[Stack]:
    async with caldav_stack(servers, database_url, scripted, allow_networks=f"{ALLOWED}/32") as system:
        yield system


@pytest.fixture
def remote(radicale: EmbeddedRadicale) -> Remote:
    name = f"r{uuid.uuid4().hex[:8]}"
    password = f"app-{uuid.uuid4().hex[:10]}"
    radicale.add_user(name, password)
    calendar_url = make_calendar(radicale.url, name, password, "Personal")
    return Remote(radicale.user_url(name), name, password, calendar_url)


@pytest.fixture
def refused() -> Iterator[Listener]:
    with Listener(REFUSED, lambda _: Answer(207, {}, b"")) as listener:
        yield listener


async def post_account(stack: Stack, user: str, url: str, password: str = "pw") -> tuple[int, dict[str, Any]]:
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": url, "username": "someone", "password": password},
        headers=stack.headers(user),
    )
    return response.status_code, response.json()


async def stored_accounts(db: AsyncEngine, user: str) -> int:
    return int(await scalar(db, "select count(*) from commands.caldav_accounts where user_id = :u", u=user))


# ---- connecting ---------------------------------------------------------------------------------


async def test_the_allowed_address_connects(stack: Stack, user: str, remote: Remote) -> None:
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": remote.url, "username": remote.username, "password": remote.password},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    assert [c["url"] for c in response.json()["calendars"]] == [remote.calendar_url]


async def test_an_address_outside_the_allowed_networks_is_refused_before_any_request(
    stack: Stack, db: AsyncEngine, user: str, refused: Listener
) -> None:
    status, body = await post_account(stack, user, refused.url("/dav/"))
    assert (status, body["error"]["code"]) == (422, "address_not_allowed")
    assert refused.connections == 0
    assert await stored_accounts(db, user) == 0


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture
def loopback() -> Iterator[list[Listener]]:
    """Listeners on 127.0.0.1 and (where the host has it) ::1, on one port."""
    with Listener("127.0.0.1", lambda _: Answer(207, {}, b"")) as v4:
        if not _ipv6_loopback():
            yield [v4]
            return
        with Listener("::1", lambda _: Answer(207, {}, b""), port=v4.port) as v6:
            yield [v4, v6]


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "0x7f000001", "2130706433", "0177.0.0.1", "127.1", "localhost", "[::1]", "LocalHost"],
)
async def test_other_spellings_of_loopback_are_refused_before_any_request(
    stack: Stack, user: str, loopback: list[Listener], host: str
) -> None:
    status, body = await post_account(stack, user, f"http://{host}:{loopback[0].port}/dav/")
    assert (status, body["error"]["code"]) == (422, "address_not_allowed")
    assert [listener.connections for listener in loopback] == [0] * len(loopback)


async def test_a_user_name_in_the_url_cannot_disguise_the_host(
    stack: Stack, user: str, refused: Listener
) -> None:
    status, body = await post_account(stack, user, f"http://{ALLOWED}@{REFUSED}:{refused.port}/dav/")
    assert (status, body["error"]["code"]) == (422, "invalid_url")
    assert refused.connections == 0


@pytest.mark.parametrize("code", [301, 302, 307, 308])
async def test_a_redirect_to_a_refused_address_is_refused_and_not_followed(
    stack: Stack, db: AsyncEngine, user: str, refused: Listener, code: int
) -> None:
    with Listener(ALLOWED, lambda s: Answer(code, {"Location": refused.url(s.path)})) as redirector:
        status, body = await post_account(stack, user, redirector.url("/dav/"))
    assert (status, body["error"]["code"]) == (422, "address_not_allowed")
    assert redirector.connections >= 1
    assert refused.connections == 0
    assert await stored_accounts(db, user) == 0


def _multistatus(*responses: tuple[str, str]) -> bytes:
    body = "".join(
        f"<d:response><d:href>{href}</d:href><d:propstat><d:prop>{props}</d:prop>"
        "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        for href, props in responses
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<d:multistatus xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">{body}</d:multistatus>'
    ).encode()


class NamingServer:
    """A CalDAV server (as far as discovery goes) whose calendar home, or the one calendar listed
    in its home, is on another address."""

    def __init__(self, elsewhere: str, what: str) -> None:
        self.elsewhere = elsewhere
        self.what = what

    def __call__(self, seen: Seen) -> Answer:
        xml = {"Content-Type": "application/xml; charset=utf-8"}
        if seen.path == "/home/":
            return Answer(
                207,
                xml,
                _multistatus(
                    ("/home/", "<d:resourcetype><d:collection/></d:resourcetype>"),
                    (
                        self.elsewhere,
                        "<d:resourcetype><d:collection/><c:calendar/></d:resourcetype>"
                        "<d:displayname>Elsewhere</d:displayname>",
                    ),
                ),
            )
        home = self.elsewhere if self.what == "home" else "/home/"
        return Answer(
            207,
            xml,
            _multistatus(
                (
                    seen.path,
                    "<d:current-user-principal><d:href>/principal/</d:href></d:current-user-principal>"
                    f"<c:calendar-home-set><d:href>{home}</d:href></c:calendar-home-set>"
                    "<d:resourcetype><d:collection/><d:principal/></d:resourcetype>",
                )
            ),
        )


async def test_a_calendar_home_the_server_names_on_a_refused_address_is_refused(
    stack: Stack, db: AsyncEngine, user: str, refused: Listener
) -> None:
    with Listener(ALLOWED, NamingServer(refused.url("/elsewhere/"), "home")) as server:
        status, body = await post_account(stack, user, server.url("/principal/"))
    assert (status, body["error"]["code"]) == (422, "address_not_allowed"), body
    assert any(s.method == "PROPFIND" for s in server.requests)
    assert refused.connections == 0
    assert await stored_accounts(db, user) == 0


async def test_a_calendar_the_server_lists_on_another_address_is_never_reached_there(
    stack: Stack, db: AsyncEngine, user: str, refused: Listener
) -> None:
    """The client library reads a listed calendar's href as a path on the server that listed it;
    whatever it makes of it, nothing reaches the other address and nothing stored leads there."""
    with Listener(ALLOWED, NamingServer(refused.url("/elsewhere/"), "calendar")) as server:
        await post_account(stack, user, server.url("/principal/"))
    assert refused.connections == 0
    stored = await scalar(
        db,
        "select coalesce(array_agg(c.url), '{}') from commands.caldav_calendars c"
        " join commands.caldav_accounts a on a.id = c.account_id where a.user_id = :u",
        u=user,
    )
    assert all(url.startswith(f"http://{ALLOWED}:") for url in stored)


@pytest.mark.parametrize(
    ("code", "error"), [(405, "refused"), (401, "refused"), (500, "unreachable"), (400, "refused")]
)
async def test_the_servers_answer_never_reaches_the_user(
    stack: Stack, db: AsyncEngine, user: str, code: int, error: str
) -> None:
    answer = Answer(
        code,
        {
            "Content-Type": "application/json",
            "X-Debug": f"{SECRET}-HEADER",
            "WWW-Authenticate": 'Basic realm="x"',
        },
        ('{"error": "' + SECRET + '", "trace": "/srv/internal/app.py"}').encode(),
    )
    with Listener(ALLOWED, lambda _: answer) as server:
        status, body = await post_account(stack, user, server.url("/dav/"))
    assert (status, body["error"]["code"]) == (422, error)
    assert server.requests, "the server was asked"
    assert SECRET not in str(body) and "/srv/internal" not in str(body)
    listed = await stack.client.get("/v1/accounts", headers=stack.headers(user))
    assert SECRET not in listed.text
    assert await stored_accounts(db, user) == 0


# ---- after the connection: the outbox and the inbound sync go through the same guard ---------------


async def _move_account(db: AsyncEngine, account_id: str, server: Listener) -> None:
    """The stored account now leads elsewhere (as after a change of DNS, or of the allowed
    networks): the next request is checked like the first one was."""
    async with db.begin() as conn:
        await conn.execute(
            text("update commands.caldav_accounts set url = :u where id = :a"),
            {"u": server.url("/"), "a": account_id},
        )
        await conn.execute(
            text("update commands.caldav_calendars set url = :u where account_id = :a"),
            {"u": server.url("/calendar/"), "a": account_id},
        )


async def test_a_delivery_to_a_refused_address_is_not_sent_and_its_error_is_ours(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote, refused: Listener
) -> None:
    account_id = (await connect(stack, user, remote))["id"]
    await _move_account(db, account_id, refused)
    await create_by_chat(stack, scripted, user, "不该送出去的会")
    await outbox_drained(db, user)
    outcome = await scalar(db, "select outcome from commands.caldav_outbox where user_id = :u", u=user)
    assert outcome == "rejected"
    assert refused.connections == 0
    assert remote.objects() == []


async def test_a_delivery_that_fails_stores_our_words_not_the_servers_body(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, remote: Remote
) -> None:
    """The server takes the PUT without an ETag, then answers the GET that asks for it with an
    error page: the delivery is retried, and what is stored about it is ours."""

    def respond(seen: Seen) -> Answer:
        if seen.method == "PUT":
            return Answer(201)
        return Answer(500, {"X-Debug": SECRET}, f'{{"error": "{SECRET}"}}'.encode())

    account_id = (await connect(stack, user, remote))["id"]
    with Listener(ALLOWED, respond) as server:
        await _move_account(db, account_id, server)
        await create_by_chat(stack, scripted, user, "出错的会")

        async def failed() -> bool:
            found = await scalar(
                db, "select last_error from commands.caldav_outbox where user_id = :u", u=user
            )
            return found is not None

        await eventually(failed, "the delivery to fail")
    assert [s.method for s in server.requests][:2] == ["PUT", "GET"]
    last_error = await scalar(db, "select last_error from commands.caldav_outbox where user_id = :u", u=user)
    assert SECRET not in last_error
    events = await stack.client.get(
        "/v1/events",
        params={"start": "2026-09-01T00:00:00+08:00", "end": "2026-10-30T00:00:00+08:00"},
        headers=stack.headers(user),
    )
    assert SECRET not in events.text


async def test_the_inbound_sync_of_a_refused_address_sends_nothing(
    stack: Stack, db: AsyncEngine, user: str, remote: Remote, refused: Listener
) -> None:
    account_id = (await connect(stack, user, remote))["id"]
    await _move_account(db, account_id, refused)
    sync = commands_app(stack).sync
    assert sync is not None
    assert await sync.inbound.sync_account(account_id) is None
    assert refused.connections == 0
