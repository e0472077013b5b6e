"""A connected account's address books as this service sees them (CardDAV, RFC 6352).

Blocking, like remote.py: the callers run it in a worker thread. Every request goes through the
login's `Guard` session (addresses.py), so the address book a server names is checked like the
account URL before anything is sent to it; a book at a refused address is left out, a principal or
home at one makes the whole read `NotAllowed`. Discovery follows RFC 6352 §7: the account URL's
DAV:current-user-principal (else the one `/.well-known/carddav` on the account's host leads to),
its CARDDAV:addressbook-home-set, and the address book collections in that home. A server that
offers none of it has no address book: an empty answer, not an error.

A book whose change token (DAV:sync-token, else CS:getctag) is the one the caller read last is not
listed again; otherwise its members' ETags are listed and only the cards whose ETag changed are
fetched, in one addressbook-multiget REPORT per batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from lxml import etree

from calagent.commands.caldav.addresses import AddressNotAllowed, GuardedSession, InvalidUrl, Unresolvable
from calagent.commands.caldav.remote import (
    HTTP_TIMEOUT_S,
    Login,
    NotAllowed,
    Rejected,
    RemoteObject,
    Unavailable,
    passes,
)

DAV = "DAV:"
CARDDAV = "urn:ietf:params:xml:ns:carddav"
CS = "http://calendarserver.org/ns/"
NS = {"d": DAV, "c": CARDDAV, "cs": CS}
MULTIGET_BATCH = 100
# An answer larger than this is not read (a server's multistatus, not a data dump).
MAX_ANSWER_BYTES = 20_000_000


@dataclass(frozen=True)
class Known:
    """What the caller holds of one book: the token it read last and its cards' ETags."""

    token: str | None
    etags: Mapping[str, str | None]


@dataclass
class BookRead:
    url: str
    token: str | None
    # False: the token is the one read last, nothing below was listed.
    listed: bool = True
    # Every member's href (when listed): a held card not among them is gone.
    members: set[str] = field(default_factory=set)
    # The members that are new or whose ETag changed, with their bodies.
    changed: list[RemoteObject] = field(default_factory=list)


def _parser() -> etree.XMLParser:
    # A server's answer is untrusted: no entities, no DTD, no network.
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def _propfind(*props: tuple[str, str]) -> bytes:
    root = etree.Element(f"{{{DAV}}}propfind", nsmap={"d": DAV, "c": CARDDAV, "cs": CS})
    prop = etree.SubElement(root, f"{{{DAV}}}prop")
    for namespace, name in props:
        etree.SubElement(prop, f"{{{namespace}}}{name}")
    return bytes(etree.tostring(root, xml_declaration=True, encoding="utf-8"))


def _multiget(hrefs: Iterable[str]) -> bytes:
    root = etree.Element(f"{{{CARDDAV}}}addressbook-multiget", nsmap={"d": DAV, "c": CARDDAV})
    prop = etree.SubElement(root, f"{{{DAV}}}prop")
    etree.SubElement(prop, f"{{{DAV}}}getetag")
    etree.SubElement(prop, f"{{{CARDDAV}}}address-data")
    for href in hrefs:
        etree.SubElement(root, f"{{{DAV}}}href").text = href
    return bytes(etree.tostring(root, xml_declaration=True, encoding="utf-8"))


@dataclass(frozen=True)
class Answer:
    """One DAV:response of a multistatus: its href (absolute) and its found properties."""

    href: str
    props: list[Any]  # the DAV:prop elements of its 200 propstats


class Client:
    def __init__(self, login: Login, session: GuardedSession) -> None:
        self.login = login
        self.session = session
        session.auth = (login.username, login.password)

    def request(self, method: str, url: str, body: bytes, depth: str) -> list[Answer] | None:
        """The multistatus of one request; None when the server has no such thing here (any 4xx
        but a refused login: no CardDAV here, or none this login may read — no address book)."""
        try:
            response = self.session.request(
                method,
                url,
                data=body,
                headers={"Depth": depth, "Content-Type": "application/xml; charset=utf-8"},
                timeout=HTTP_TIMEOUT_S,
                allow_redirects=True,
            )
        except (AddressNotAllowed, InvalidUrl) as exc:
            raise NotAllowed() from exc
        except Unresolvable as exc:
            raise Unavailable("the server could not be reached (no address)") from exc
        except Exception as exc:
            if self.session.refused is not None:
                raise NotAllowed() from exc
            raise Unavailable(f"the server could not be reached ({type(exc).__name__})") from exc
        status = int(response.status_code or 0)
        if status == 401:
            raise Rejected("the server refused this login (HTTP 401)", status)
        if passes(status):
            raise Unavailable(f"the server answered HTTP {status}", status)
        if status != 207:
            return None
        content = response.content or b""
        if len(content) > MAX_ANSWER_BYTES:
            raise Unavailable("the server's answer is too large")
        try:
            root = etree.fromstring(content, parser=_parser())
        except etree.XMLSyntaxError as exc:
            raise Unavailable("the server's answer could not be read") from exc
        base = str(response.url or url)
        answers = []
        for node in root.iterfind("d:response", NS):
            href = node.findtext("d:href", namespaces=NS)
            if not href:
                continue
            props = [
                p
                for stat in node.iterfind("d:propstat", NS)
                if " 200 " in f" {stat.findtext('d:status', namespaces=NS) or ''} "
                for p in stat.iterfind("d:prop", NS)
            ]
            answers.append(Answer(urljoin(base, href.strip()), props))
        return answers

    def href_prop(self, url: str, namespace: str, name: str) -> str | None:
        """The DAV:href inside one property of `url` (Depth 0), absolute."""
        answers = self.request("PROPFIND", url, _propfind((namespace, name)), "0")
        for answer in answers or ():
            for prop in answer.props:
                found = str(prop.findtext(f"{{{namespace}}}{name}/{{{DAV}}}href") or "")
                if found.strip():
                    return urljoin(answer.href, found.strip())
        return None


def _same(one: str, other: str) -> bool:
    return unquote(one).rstrip("/") == unquote(other).rstrip("/")


def _home(client: Client, account_url: str) -> str | None:
    principal = client.href_prop(account_url, DAV, "current-user-principal")
    if principal is None:
        # RFC 6764 §5: the server's well-known entry point, on the account's own host.
        parts = urlsplit(account_url)
        well_known = f"{parts.scheme}://{parts.netloc}/.well-known/carddav"
        principal = client.href_prop(well_known, DAV, "current-user-principal")
    if principal is None:
        return None
    return client.href_prop(principal, CARDDAV, "addressbook-home-set")


def books(client: Client, account_url: str) -> list[tuple[str, str | None]]:
    """(url, change token) of every address book of the login; [] when the server has none."""
    home = _home(client, account_url)
    if home is None:
        return []
    answers = client.request(
        "PROPFIND",
        home,
        _propfind((DAV, "resourcetype"), (DAV, "sync-token"), (CS, "getctag")),
        "1",
    )
    found: list[tuple[str, str | None]] = []
    for answer in answers or ():
        props = answer.props
        if not any(p.find(f"{{{DAV}}}resourcetype/{{{CARDDAV}}}addressbook") is not None for p in props):
            continue
        token = next(
            (
                t.strip()
                for p in props
                for t in (p.findtext(f"{{{DAV}}}sync-token"), p.findtext(f"{{{CS}}}getctag"))
                if t and t.strip()
            ),
            None,
        )
        if not any(_same(answer.href, u) for u, _ in found):
            found.append((answer.href, token))
    return found


def normal_href(href: str) -> str:
    """One spelling per card address: servers percent-encode the same path in different ways."""
    return unquote(href)


def _members(client: Client, book_url: str) -> dict[str, tuple[str, str | None]]:
    """normal href → (the href as the server wrote it, its ETag) of every card in the book."""
    answers = client.request("PROPFIND", book_url, _propfind((DAV, "getetag"), (DAV, "resourcetype")), "1")
    members: dict[str, tuple[str, str | None]] = {}
    for answer in answers or ():
        if _same(answer.href, book_url):
            continue
        if any(p.find(f"{{{DAV}}}resourcetype/{{{DAV}}}collection") is not None for p in answer.props):
            continue
        etag = next((t for p in answer.props if (t := p.findtext(f"{{{DAV}}}getetag"))), None)
        members[normal_href(answer.href)] = (answer.href, etag)
    return members


def _fetch(client: Client, book_url: str, hrefs: list[str]) -> list[RemoteObject]:
    cards: list[RemoteObject] = []
    for start in range(0, len(hrefs), MULTIGET_BATCH):
        batch = hrefs[start : start + MULTIGET_BATCH]
        # The multiget names members by path and is sent to the book's own address: nothing goes
        # to a host a member's href might name.
        answers = client.request("REPORT", book_url, _multiget(urlsplit(h).path for h in batch), "1")
        for answer in answers or ():
            body = next((t for p in answer.props if (t := p.findtext(f"{{{CARDDAV}}}address-data"))), None)
            etag = next((t for p in answer.props if (t := p.findtext(f"{{{DAV}}}getetag"))), None)
            if body:
                cards.append(RemoteObject(normal_href(answer.href), etag, body))
    return cards


def read(login: Login, known: Mapping[str, Known]) -> list[BookRead]:
    """Every address book of the login, each with what changed since `known` (by book URL)."""
    with login.reach.session() as session:
        client = Client(login, session)
        out: list[BookRead] = []
        for url, token in books(client, login.url):
            try:
                session.check(url)
            except (AddressNotAllowed, InvalidUrl):
                # Refused before a byte went out to it: this book is not read (nor kept).
                session.refused = None
                continue
            except Unresolvable as exc:
                raise Unavailable("the address book's server could not be reached") from exc
            held = known.get(url)
            if held is not None and token is not None and held.token == token:
                out.append(BookRead(url, token, listed=False))
                continue
            members = _members(client, url)
            held_etags = held.etags if held is not None else {}
            wanted = [
                raw for href, (raw, etag) in members.items() if etag is None or held_etags.get(href) != etag
            ]
            changed = _fetch(client, url, wanted) if wanted else []
            out.append(BookRead(url, token, True, set(members), changed))
        return out
