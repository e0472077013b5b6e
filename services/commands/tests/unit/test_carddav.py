"""A connected account's address books (contract §16), below the service: vCards read with vobject,
cards merged with the user's own contacts for resolution, and CardDAV discovery through the guarded
session against listeners on distinct loopback addresses — an address book (or home) a server
names at a refused address gets no connection at all."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import vobject

from calagent.commands.caldav import carddav
from calagent.commands.caldav.addresses import AddressRule, Guard
from calagent.commands.caldav.cards import Card, parse_card
from calagent.commands.caldav.remote import Login, NotAllowed
from calagent.commands.domain.people import Contact, Unresolved, resolve_attendees
from calagent.contracts.people import Attendee
from calagent.devtools.testing.listeners import Answer, Listener, Seen

pytestmark = pytest.mark.unit

ALLOWED = "127.0.0.2"
REFUSED = "127.0.0.3"
GUARD = Guard(AddressRule.from_setting(f"{ALLOWED}/32"))


# ---- reading a vCard --------------------------------------------------------------------------------


def vcard(
    name: str | None, *emails: tuple[str, bool], nickname: str | None = None, version: str = "3.0"
) -> str:
    card = vobject.vCard()
    if name is not None:
        card.add("fn").value = name
    card.add("n").value = vobject.vcard.Name(family=name or "")
    for address, preferred in emails:
        line = card.add("email")
        line.value = address
        if preferred:
            line.params["TYPE"] = ["INTERNET", "pref"]
    if nickname is not None:
        card.add("nickname").value = nickname
    text: str = card.serialize()
    return text.replace("VERSION:3.0", f"VERSION:{version}")


def test_a_card_gives_its_name_its_preferred_address_first_and_its_nicknames() -> None:
    body = vcard("Li Lei", ("li@home.example", False), ("li@work.example", True), nickname="Lei,Xiao Li")
    assert parse_card(body) == Card("Li Lei", ("li@work.example", "li@home.example"), ("Lei", "Xiao Li"))


def test_a_vcard4_pref_parameter_and_a_mailto_address_are_read() -> None:
    body = (
        "BEGIN:VCARD\r\nVERSION:4.0\r\nFN:Han Meimei\r\nEMAIL:meimei@a.example\r\n"
        "EMAIL;PREF=1:mailto:han@b.example\r\nEND:VCARD\r\n"
    )
    assert parse_card(body) == Card("Han Meimei", ("han@b.example", "meimei@a.example"), ())


@pytest.mark.parametrize(
    "body",
    [
        vcard("No Address"),
        vcard("Bad Address", ("not an address", False)),
        "BEGIN:VCARD\r\nVERSION:3.0\r\nEMAIL:x@example.com\r\nEND:VCARD\r\n",
        "this is no vcard",
    ],
)
def test_a_card_without_a_name_or_a_usable_address_is_no_contact(body: str) -> None:
    assert parse_card(body) is None


# ---- cards beside the user's own contacts ----------------------------------------------------------


def test_an_own_contact_wins_over_a_card_of_its_address_and_the_cards_names_lead_to_it() -> None:
    own = Contact("o1", "Bob", "bob@example.com")
    card = Contact("c1", "Robert Smith", "BOB@example.com", ("Bobby",), source="carddav")
    other = Contact("c2", "Robert Smith", "robert@example.org", source="carddav")
    # Cards come after own contacts whatever order they are handed over in.
    contacts = [card, other, own]
    assert resolve_attendees(["Bobby"], contacts) == (Attendee(name="Bob", email="bob@example.com"),)
    found = resolve_attendees(["Robert Smith"], contacts)
    assert isinstance(found, Unresolved)
    # A name the user typed is theirs; a card's name says whose it is (contract §19).
    assert found.candidates == (
        Attendee(name="Bob", email="bob@example.com"),
        Attendee(name="Robert Smith", email="robert@example.org", card=True),
    )
    assert resolve_attendees(["bob@example.com"], contacts) == (
        Attendee(name="Bob", email="bob@example.com"),
    )


# ---- discovery through the guard ----------------------------------------------------------------


def multistatus(*responses: str) -> Answer:
    body = (
        '<?xml version="1.0"?><d:multistatus xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:carddav" '
        'xmlns:cs="http://calendarserver.org/ns/">' + "".join(responses) + "</d:multistatus>"
    )
    return Answer(207, {"Content-Type": "application/xml"}, body.encode())


def response(href: str, props: str) -> str:
    return (
        f"<d:response><d:href>{href}</d:href><d:propstat><d:prop>{props}</d:prop>"
        "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
    )


BOOK = "<d:resourcetype><d:collection/><c:addressbook/></d:resourcetype>"


def server(home: str, books: list[tuple[str, str]], cards: dict[str, str]) -> Listener:
    """A CardDAV server: principal /p/, address book home `home`, its books (href, ctag), and
    cards (path → vCard) in the first book."""

    def respond(seen: Seen) -> Answer:
        body = seen.body.decode()
        if seen.method == "PROPFIND" and "current-user-principal" in body:
            return multistatus(
                response(
                    seen.path, "<d:current-user-principal><d:href>/p/</d:href></d:current-user-principal>"
                )
            )
        if seen.method == "PROPFIND" and "addressbook-home-set" in body:
            return multistatus(
                response("/p/", f"<c:addressbook-home-set><d:href>{home}</d:href></c:addressbook-home-set>")
            )
        if seen.method == "PROPFIND" and "getctag" in body:
            return multistatus(
                *(response(href, f"{BOOK}<cs:getctag>{ctag}</cs:getctag>") for href, ctag in books)
            )
        if seen.method == "PROPFIND":
            return multistatus(
                *(response(path, f'<d:getetag>"{len(v)}"</d:getetag>') for path, v in cards.items())
            )
        if seen.method == "REPORT":
            return multistatus(
                *(
                    response(path, f'<d:getetag>"{len(v)}"</d:getetag><c:address-data>{v}</c:address-data>')
                    for path, v in cards.items()
                    if path in body
                )
            )
        return Answer(404)

    return Listener(ALLOWED, respond)


@pytest.fixture
def refused() -> Iterator[Listener]:
    with Listener(REFUSED, lambda _: Answer(500)) as listener:
        yield listener


def login(listener: Listener) -> Login:
    return Login(listener.url("/"), "user", "secret", GUARD)


def test_the_cards_of_an_allowed_book_are_read_and_a_book_at_a_refused_address_gets_no_connection(
    refused: Listener,
) -> None:
    card = vcard("Li Lei", ("li@example.com", False))
    books = [("/home/book/", "1"), (refused.url("/home/elsewhere/"), "1")]
    with server("/home/", books, {"/home/book/li.vcf": card}) as allowed:
        [read] = carddav.read(login(allowed), {})
        assert read.url == allowed.url("/home/book/")
        assert read.members == {allowed.url("/home/book/li.vcf")}
        assert [parse_card(c.body) for c in read.changed] == [Card("Li Lei", ("li@example.com",), ())]
        # The same token again: the book is not listed a second time.
        before = len(allowed.requests)
        [again] = carddav.read(login(allowed), {read.url: carddav.Known("1", {})})
        assert not again.listed
        assert [s.method for s in allowed.requests[before:]] == ["PROPFIND", "PROPFIND", "PROPFIND"]
    assert refused.connections == 0


def test_a_home_at_a_refused_address_is_not_read_at_all(refused: Listener) -> None:
    with server(refused.url("/home/"), [("/home/book/", "1")], {}) as allowed:
        with pytest.raises(NotAllowed):
            carddav.read(login(allowed), {})
        assert [s.method for s in allowed.requests] == ["PROPFIND", "PROPFIND"]
    assert refused.connections == 0


def test_a_server_without_an_address_book_home_has_no_books() -> None:
    with Listener(ALLOWED, lambda _: Answer(404)) as plain:
        assert carddav.read(login(plain), {}) == []
        # The account URL, then the well-known entry point: nothing else is asked.
        assert [s.path for s in plain.requests] == ["/", "/.well-known/carddav"]


def test_a_server_that_forbids_the_address_book_home_has_no_books() -> None:
    def respond(seen: Seen) -> Answer:
        if b"current-user-principal" in seen.body:
            return multistatus(
                response(
                    seen.path, "<d:current-user-principal><d:href>/p/</d:href></d:current-user-principal>"
                )
            )
        return Answer(403)

    with Listener(ALLOWED, respond) as forbidding:
        assert carddav.read(login(forbidding), {}) == []
        assert [s.path for s in forbidding.requests] == ["/", "/p/"]
