"""A connected account's address book (contract §16) against a real CardDAV server (Radicale on
loopback): its cards are listed as read-only contacts, resolve attendees exactly like the user's
own contacts, follow the server at each sync, and go with the account.

Cards are written into Radicale over HTTP as vCards made with `vobject`; facts are read from
`GET /v1/contacts`, the chat answers and the database rows.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from xml.sax.saxutils import escape

import httpx
import pytest
import vobject
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.listeners import Answer, Listener, Seen
from calagent.devtools.testing.servers import Servers
from calagent.devtools.testing.xandikos import EmbeddedXandikos
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import caldav_stack, radicale_server
from .conftest import call, on_user, script
from .test_caldav import Remote, commands_app, connect, scalar

pytestmark = pytest.mark.e2e

# Radicale's address is the one the stack allows; anything on this one is refused.
REFUSED = "127.0.0.3"

MKCOL_ADDRESSBOOK = (
    '<?xml version="1.0" encoding="utf-8"?>'
    '<D:mkcol xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:carddav"><D:set><D:prop>'
    "<D:resourcetype><D:collection/><C:addressbook/></D:resourcetype>"
    "<D:displayname>Contacts</D:displayname>"
    "</D:prop></D:set></D:mkcol>"
)


@pytest.fixture(scope="module")
def radicale() -> Iterator[EmbeddedRadicale]:
    with radicale_server(prefix="calagent-carddav-") as server:
        yield server


@pytest.fixture(scope="module")
async def stack(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, radicale: EmbeddedRadicale
) -> AsyncIterator[Stack]:
    async with caldav_stack(servers, database_url, scripted, allow_networks=radicale.network) as system:
        yield system


@dataclass
class Book:
    """The user's account on the server, and (once made) its address book."""

    remote: Remote
    url: str | None = None

    def http(self) -> httpx.Client:
        return httpx.Client(auth=(self.remote.username, self.remote.password), timeout=10)

    def make(self) -> None:
        self.url = f"{self.remote.url}contacts/"
        with self.http() as client:
            made = client.request(
                "MKCOL",
                self.url,
                content=MKCOL_ADDRESSBOOK,
                headers={"Content-Type": "application/xml"},
            )
            assert made.status_code == 201, made.text

    def put(self, uid: str, name: str, *emails: str, nicknames: tuple[str, ...] = ()) -> None:
        card = vobject.vCard()
        card.add("uid").value = uid
        card.add("fn").value = name
        card.add("n").value = vobject.vcard.Name(family=name)
        for address in emails:
            line = card.add("email")
            line.value = address
            line.type_param = "INTERNET"
        if nicknames:
            card.add("nickname").value = ",".join(nicknames)
        assert self.url is not None
        with self.http() as client:
            stored = client.put(
                f"{self.url}{uid}.vcf",
                content=card.serialize().encode(),
                headers={"Content-Type": "text/vcard; charset=utf-8"},
            )
            assert stored.status_code in (201, 204), stored.text

    def delete(self, uid: str) -> None:
        with self.http() as client:
            assert client.delete(f"{self.url}{uid}.vcf").status_code in (200, 204)


@pytest.fixture
def book(radicale: EmbeddedRadicale) -> Book:
    name = f"r{uuid.uuid4().hex[:8]}"
    password = f"app-{uuid.uuid4().hex[:10]}"
    radicale.add_user(name, password)
    calendar_url = make_calendar(radicale.url, name, password, "Personal")
    return Book(Remote(radicale.user_url(name), name, password, calendar_url))


async def contacts(stack: Stack, user: str) -> list[dict[str, Any]]:
    response = await stack.client.get("/v1/contacts", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["contacts"]
    return found


async def sync(stack: Stack, account_id: str) -> None:
    """One inbound sync of the account, now (again if the periodic one held its lease)."""
    worker = commands_app(stack).sync
    assert worker is not None
    for _ in range(50):
        if await worker.inbound.sync_account(account_id) is not None:
            return
    raise AssertionError("the account could not be synced")


def meeting_script(scripted: ScriptedModelServer, *attendees: str) -> None:
    """The scripted model's answer to "开会": a meeting tomorrow at three with these people."""
    scripted.set_script(
        script(
            on_user(
                "开会",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="项目会",
                        date="D+1",
                        time="15:00",
                        attendees=list(attendees),
                    )
                ],
            )
        )
    )


async def test_cards_are_listed_read_only_and_a_name_on_one_becomes_the_held_invitations_recipient(
    stack: Stack, scripted: ScriptedModelServer, user: str, book: Book
) -> None:
    book.make()
    book.put("li-lei", "李雷", "lilei@example.com", nicknames=("小李",))
    book.put("han-meimei", "韩梅梅", "hanmeimei@example.com", "meimei@example.org")
    await connect(stack, user, book.remote)

    listed = await contacts(stack, user)
    assert sorted((c["name"], c["email"], c["aliases"], c["source"]) for c in listed) == [
        ("李雷", "lilei@example.com", ["小李"], "carddav"),
        ("韩梅梅", "hanmeimei@example.com", [], "carddav"),
    ]
    card = next(c for c in listed if c["name"] == "李雷")
    refused = await stack.client.delete(f"/v1/contacts/{card['id']}", headers=stack.headers(user))
    assert refused.status_code == 409
    assert len(await contacts(stack, user)) == 2
    # Another user neither sees the cards nor learns that the id exists.
    assert await contacts(stack, f"{user}-other") == []
    other = await stack.client.delete(f"/v1/contacts/{card['id']}", headers=stack.headers(f"{user}-other"))
    assert other.status_code == 404

    meeting_script(scripted, "李雷")
    held = (await stack.chat(user, "明天下午三点和李雷开会")).json()
    assert held["outcome"] == "held", held
    assert held["command"]["hold_reason"] == "sends_invitations"
    assert [(p["name"], p["email"]) for p in held["command"]["recipients"]] == [("李雷", "lilei@example.com")]

    meeting_script(scripted, "小李")
    by_alias = (await stack.chat(user, "明天下午三点和小李开会")).json()
    assert [p["email"] for p in by_alias["command"]["recipients"]] == ["lilei@example.com"]


async def test_two_cards_of_one_name_wait_with_both_and_an_own_contact_of_the_same_address_is_one_candidate(
    stack: Stack, scripted: ScriptedModelServer, user: str, book: Book
) -> None:
    book.make()
    book.put("wq-1", "王强", "wangqiang1@example.com")
    book.put("wq-2", "王强", "wangqiang2@example.com")
    await connect(stack, user, book.remote)

    meeting_script(scripted, "王强")
    waiting = (await stack.chat(user, "明天下午三点和王强开会")).json()
    assert waiting["outcome"] == "needs_attendee", waiting
    assert sorted(p["email"] for p in waiting["command"]["attendee_candidates"]) == [
        "wangqiang1@example.com",
        "wangqiang2@example.com",
    ]

    # The user's own contact with a card's address is that person: still two candidates, and the
    # one with that address is the user's own entry.
    added = await stack.client.post(
        "/v1/contacts",
        json={"name": "王强", "email": "WangQiang1@example.com", "aliases": ["强哥"]},
        headers=stack.headers(user),
    )
    assert added.status_code == 201
    again = (await stack.chat(user, "明天下午三点和王强开会")).json()
    assert again["outcome"] == "needs_attendee", again
    assert sorted(p["email"] for p in again["command"]["attendee_candidates"]) == [
        "WangQiang1@example.com",
        "wangqiang2@example.com",
    ]


async def test_a_card_changed_or_deleted_on_the_server_follows_at_the_next_sync_and_goes_with_the_account(
    stack: Stack, db: AsyncEngine, user: str, book: Book
) -> None:
    book.make()
    book.put("a", "赵敏", "zhaomin@example.com")
    book.put("b", "周芷若", "zhouzhiruo@example.com")
    connected = await connect(stack, user, book.remote)
    assert sorted(c["name"] for c in await contacts(stack, user)) == ["周芷若", "赵敏"]

    book.delete("b")
    book.put("a", "赵敏", "zhaomin@example.org")
    book.put("c", "小昭", "xiaozhao@example.com")
    await sync(stack, connected["id"])
    assert sorted((c["name"], c["email"]) for c in await contacts(stack, user)) == [
        ("小昭", "xiaozhao@example.com"),
        ("赵敏", "zhaomin@example.org"),
    ]

    removed = await stack.client.delete(f"/v1/accounts/{connected['id']}", headers=stack.headers(user))
    assert removed.status_code == 204
    assert await contacts(stack, user) == []
    assert await scalar(db, "select count(*) from commands.caldav_cards where user_id = :u", u=user) == 0


async def test_a_server_without_an_address_book_connects_with_no_cards_and_one_made_later_is_read(
    stack: Stack, db: AsyncEngine, user: str, book: Book
) -> None:
    connected = await connect(stack, user, book.remote)
    assert connected["calendars"]
    assert await contacts(stack, user) == []
    synced = await scalar(
        db, "select last_synced_at from commands.caldav_accounts where id = :a", a=connected["id"]
    )
    assert synced is not None

    book.make()
    book.put("later", "张无忌", "zhangwuji@example.com")
    await sync(stack, connected["id"])
    assert [(c["name"], c["source"]) for c in await contacts(stack, user)] == [("张无忌", "carddav")]


# ---- the address guard: a book the server names elsewhere is never reached --------------------------


def _multistatus(*responses: tuple[str, str], token: str | None = None) -> bytes:
    body = "".join(
        f"<d:response><d:href>{href}</d:href><d:propstat><d:prop>{props}</d:prop>"
        "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        for href, props in responses
    )
    tail = f"<d:sync-token>{token}</d:sync-token>" if token else ""
    return (
        '<?xml version="1.0" encoding="utf-8"?><d:multistatus xmlns:d="DAV:" '
        'xmlns:c="urn:ietf:params:xml:ns:caldav" xmlns:r="urn:ietf:params:xml:ns:carddav" '
        f'xmlns:cs="http://calendarserver.org/ns/">{body}{tail}</d:multistatus>'
    ).encode()


class NamingServer:
    """A CalDAV and CardDAV server (as far as discovery and reading go) with one calendar and one
    address book of one card, whose address book home lists a second book on another address —
    or whose address book home itself is there."""

    XML: ClassVar[dict[str, str]] = {"Content-Type": "application/xml; charset=utf-8"}
    BOOK = "<d:resourcetype><d:collection/><r:addressbook/></d:resourcetype><cs:getctag>1</cs:getctag>"

    def __init__(self, elsewhere: str, what: str) -> None:
        self.elsewhere = elsewhere
        self.what = what
        card = vobject.vCard()
        card.add("fn").value = "杨过"
        card.add("n").value = vobject.vcard.Name(family="杨过")
        card.add("email").value = "yangguo@example.com"
        self.card: str = card.serialize()

    def __call__(self, seen: Seen) -> Answer:
        if seen.path == "/home/":
            calendar = "<d:resourcetype><d:collection/><c:calendar/></d:resourcetype><d:displayname>Cal</d:displayname>"
            return Answer(
                207,
                self.XML,
                _multistatus(
                    ("/home/", "<d:resourcetype><d:collection/></d:resourcetype>"), ("/home/cal/", calendar)
                ),
            )
        if seen.path == "/home/cal/":
            return Answer(207, self.XML, _multistatus(token="t1"))
        if seen.path == "/books/":
            return Answer(
                207, self.XML, _multistatus(("/books/mine/", self.BOOK), (self.elsewhere, self.BOOK))
            )
        if seen.path == "/books/mine/" and seen.method == "PROPFIND":
            return Answer(207, self.XML, _multistatus(("/books/mine/a.vcf", '<d:getetag>"1"</d:getetag>')))
        if seen.path == "/books/mine/" and seen.method == "REPORT":
            props = f'<d:getetag>"1"</d:getetag><r:address-data>{escape(self.card)}</r:address-data>'
            return Answer(207, self.XML, _multistatus(("/books/mine/a.vcf", props)))
        books = self.elsewhere if self.what == "home" else "/books/"
        return Answer(
            207,
            self.XML,
            _multistatus(
                (
                    seen.path,
                    "<d:current-user-principal><d:href>/principal/</d:href></d:current-user-principal>"
                    "<c:calendar-home-set><d:href>/home/</d:href></c:calendar-home-set>"
                    f"<r:addressbook-home-set><d:href>{books}</d:href></r:addressbook-home-set>"
                    "<d:resourcetype><d:collection/><d:principal/></d:resourcetype>",
                )
            ),
        )


@pytest.fixture
def refused() -> Iterator[Listener]:
    with Listener(REFUSED, lambda _: Answer(207, {}, b"")) as listener:
        yield listener


async def connect_to(stack: Stack, user: str, server: Listener) -> str:
    response = await stack.client.post(
        "/v1/accounts/caldav",
        json={"url": server.url("/principal/"), "username": "someone", "password": "pw"},
        headers=stack.headers(user),
    )
    assert response.status_code == 201, response.text
    account_id: str = response.json()["id"]
    return account_id


async def test_an_address_book_the_server_lists_on_a_refused_address_is_never_reached(
    stack: Stack, radicale: EmbeddedRadicale, user: str, refused: Listener
) -> None:
    with Listener(radicale.host, NamingServer(refused.url("/books/other/"), "book")) as server:
        account_id = await connect_to(stack, user, server)
        await sync(stack, account_id)
        assert any(s.method == "REPORT" and s.path == "/books/mine/" for s in server.requests)
    assert [(c["name"], c["email"]) for c in await contacts(stack, user)] == [("杨过", "yangguo@example.com")]
    assert refused.connections == 0


async def test_an_address_book_home_on_a_refused_address_is_not_read_at_all(
    stack: Stack, db: AsyncEngine, radicale: EmbeddedRadicale, user: str, refused: Listener
) -> None:
    with Listener(radicale.host, NamingServer(refused.url("/books/"), "home")) as server:
        account_id = await connect_to(stack, user, server)
        await sync(stack, account_id)
        # The address book home was asked for, and named the refused address.
        assert any(b"addressbook-home-set" in s.body for s in server.requests)
    assert await contacts(stack, user) == []
    assert (
        await scalar(db, "select count(*) from commands.caldav_books where account_id = :a", a=account_id)
        == 0
    )
    assert refused.connections == 0


async def test_the_address_book_of_a_second_server_implementation_is_read_too(
    stack: Stack, user: str, tmp_path: Path
) -> None:
    """Xandikos lays its address book out its own way (`--defaults`: /user/contacts/addressbook/);
    discovery by the RFC finds it all the same."""
    server = EmbeddedXandikos(tmp_path / "xandikos")
    server.start()
    try:
        book = Book(Remote(server.url, "anyone", "any-password", server.calendar_url))
        book.url = f"{server.url}contacts/addressbook/"
        book.put("guo-jing", "郭靖", "guojing@example.com", nicknames=("靖哥哥",))
        await connect(stack, user, book.remote)
        assert [(c["name"], c["email"], c["aliases"], c["source"]) for c in await contacts(stack, user)] == [
            ("郭靖", "guojing@example.com", ["靖哥哥"], "carddav")
        ]
    finally:
        server.stop()
