"""The CalDAV server as this service sees it, through the `caldav` client library.

The library is synchronous (HTTP through niquests); every call here is blocking and is run in a
worker thread by the callers. Every request goes through the login's `Guard` (addresses.py): the
address is checked before anything is sent, redirects and server-named collections included, and
the connection goes to the checked address.

Failures come out as the kinds the sync logic decides on: `PreconditionFailed` (412: someone else
changed or made the object), `Rejected` (any other 4xx but those that pass: the server will not
take this, retrying is pointless), `NotAllowed` (the address is one the rule refuses: nothing was
sent to it), `Unavailable` (5xx, 408, 423, 429: retry later, a bounded number of times) and
`Unreachable` (no answer at all: retry until the server is back). Their messages are in our words
and carry at most the HTTP status: never the server's response body or headers, which may say
anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import unquote, urljoin, urlsplit

import caldav
from caldav.elements import dav, ical
from caldav.elements.base import BaseElement
from caldav.lib import error
from caldav.lib.namespace import ns

from calagent.commands.caldav.addresses import AddressNotAllowed, Guard, GuardedSession, InvalidUrl

HTTP_TIMEOUT_S = 15


@dataclass(frozen=True)
class Login:
    url: str
    username: str
    password: str = field(repr=False)
    # Where requests made with this login may go.
    reach: Guard = field(repr=False, compare=False)


@dataclass(frozen=True)
class FoundCalendar:
    url: str
    name: str
    color: str | None
    # The login's own calendar, not one someone else shares with it (contract §19): what arrives
    # from a calendar the user does not own is someone else's words.
    owned: bool = True


class ShareAccess(BaseElement):  # type: ignore[misc]
    """DAV:share-access (draft-pot-webdav-resource-sharing; sabre/dav: Nextcloud, Baïkal): how the
    login holds a shared collection — `shared-owner` or `not-shared` as its owner, `read` or
    `read-write` as someone it is shared with."""

    tag: ClassVar[str] = ns("D", "share-access")


# What DAV:share-access says of a collection the login is a sharee of.
SHAREE_ACCESS = frozenset({ns("D", "read"), ns("D", "read-write")})


def principal_path(href: object) -> str | None:
    """A principal's href as one spelling: its path, decoded, without the trailing slash."""
    if not href:
        return None
    path = unquote(urlsplit(str(href)).path).rstrip("/")
    return path or "/"


def owned_by_login(
    principal: str | None, home_owner: str | None, owner: str | None, share_access: object
) -> bool:
    """Whether a calendar the login's calendar home lists is the login's own.

    Not the login's when the server says so: DAV:share-access names the login a sharee (sabre/dav),
    or DAV:owner names another principal (RFC 3744). A calendar whose DAV:owner is empty is the
    login's only where the server names no owner for the login's calendar home either (Xandikos
    names no owner at all); a server that names the home's owner and none for this calendar hides
    it (Radicale's shares mapped into the login's home). All are the hrefs as `principal_path`
    spells them."""
    accesses = share_access if isinstance(share_access, list | tuple) else [share_access]
    if any(str(a) in SHAREE_ACCESS for a in accesses if a):
        return False
    if owner is not None:
        return principal is None or owner == principal
    return home_owner is None


@dataclass(frozen=True)
class RemoteObject:
    href: str
    etag: str | None
    body: str


@dataclass(frozen=True)
class Changes:
    """What changed in a calendar since `token` (all of it when the sync was not incremental)."""

    changed: list[RemoteObject]
    deleted: list[str]
    token: str | None
    complete: bool  # every object of the calendar is listed: what is not is gone
    # Every object the listing named, read or not: one whose body did not come is still there.
    listed: frozenset[str] = frozenset()


class RemoteError(Exception):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class PreconditionFailed(RemoteError):
    pass


class Rejected(RemoteError):
    pass


class Gone(Rejected):
    """404 on a PUT: the object (or its calendar) is not on the server any more."""


class UidTaken(Rejected):
    """409 with CALDAV:no-uid-conflict (RFC 4791 §5.3.2.1): the calendar holds this UID already,
    under another name — `href`, when the server names it (Nextcloud does, Radicale does not)."""

    def __init__(self, href: str | None) -> None:
        super().__init__("PUT: the calendar holds this UID under another name (409)", 409)
        self.href = href


class NotAllowed(Rejected):
    """The address (or one a redirect or the server named) is refused by the rule; no request
    was made to it."""

    def __init__(self) -> None:
        super().__init__("the server address is not allowed: it leads to a local or private network")


class Unavailable(RemoteError):
    """The server answered with a failure worth trying again (`passes`), or an answer that
    could not be read."""


class Unreachable(Unavailable):
    """No answer at all: the server is down or the network between is. Nothing reached it."""


class Refused(RemoteError):
    """The server answered but will not let this login in (401/403 on discovery), or does not
    answer as a CalDAV server."""


@contextmanager
def _client(login: Login) -> Iterator[caldav.DAVClient]:
    """A client whose every request goes through the login's guard. A refusal anywhere in the
    operation is the operation's outcome, even where the library caught it and carried on."""
    session = login.reach.session()
    try:
        client = caldav.DAVClient(
            url=login.url,
            username=login.username,
            password=login.password,
            timeout=HTTP_TIMEOUT_S,
            # Basic authentication up front (every provider this is for takes it with an app
            # password): without it each request is sent twice, the first time only to be told to
            # authenticate.
            auth_type="basic",
            # A bare domain would make the library look up SRV records and well-known URLs on its
            # own; an account URL is always a full one.
            enable_rfc6764=False,
        )
    except Exception:
        session.close()
        raise
    client.session.close()
    client.session = session
    try:
        yield client
    except (AddressNotAllowed, InvalidUrl) as exc:
        raise NotAllowed() from exc
    except Exception as exc:
        if session.refused is not None:
            raise NotAllowed() from exc
        raise
    finally:
        client.close()
    _settled(session)


def _settled(session: GuardedSession) -> None:
    if session.refused is not None:
        raise NotAllowed() from session.refused


def _status(exc: Exception) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


# The 4xx answers that pass by themselves, tried again like a 5xx (a bounded number of times): a
# timeout, a rate limit, and a lock (423; Xandikos answers it to a write that meets another one
# in its git-backed store, whose index lock it takes without waiting).
PASSING_4XX = frozenset({408, 423, 429})


def passes(status: int) -> bool:
    """Whether an answer with this status is worth trying again later."""
    return status >= 500 or status in PASSING_4XX


def _classify(exc: Exception) -> RemoteError:
    """Our own words for what went wrong: the status code, never the server's text."""
    if isinstance(exc, RemoteError):
        return exc
    status = _status(exc)
    if isinstance(exc, error.ETagMismatchError | error.ConsistencyError) or status == 412:
        return PreconditionFailed("the object changed on the server (HTTP 412)", 412)
    if isinstance(exc, error.AuthorizationError) or status in (401, 403):
        return Rejected(f"the server refused this login (HTTP {status or 403})", status or 403)
    if status is not None and 400 <= status < 500 and not passes(status):
        return Rejected(f"the server refused the request (HTTP {status})", status)
    if status is not None:
        return Unavailable(f"the server answered HTTP {status}", status)
    if isinstance(exc, error.DAVError):
        return Unavailable("the server's answer could not be read")
    return Unreachable(f"the server could not be reached ({type(exc).__name__})")


def _owner(collection: Any) -> str | None:
    """A collection's DAV:owner as `principal_path` spells it; None when the server names none."""
    return principal_path(collection.get_properties([dav.Owner()]).get(dav.Owner.tag))


def discover(login: Login) -> list[FoundCalendar]:
    """PROPFIND the principal and its calendar home: the calendars this login can see, and whether
    each is the login's own (`owned_by_login`)."""
    try:
        with _client(login) as client:
            found = []
            principal = client.principal()
            home = principal.calendar_home_set
            # Server-named collections are checked like the account URL itself before they are
            # read or stored (the PROPFIND would be refused too: this says so before it).
            client.session.check(str(home.url))
            home_owner = _owner(home)
            for calendar in principal.calendars():
                client.session.check(str(calendar.url))
                props = calendar.get_properties(
                    [dav.DisplayName(), ical.CalendarColor(), dav.Owner(), ShareAccess()]
                )
                name = props.get(dav.DisplayName.tag) or str(calendar.url).rstrip("/").rsplit("/", 1)[-1]
                color = props.get(ical.CalendarColor.tag)
                owned = owned_by_login(
                    principal_path(principal.url),
                    home_owner,
                    principal_path(props.get(dav.Owner.tag)),
                    props.get(ShareAccess.tag),
                )
                found.append(
                    FoundCalendar(str(calendar.url), str(name)[:100], str(color) if color else None, owned)
                )
    except error.AuthorizationError as exc:
        raise Refused("the server refused this user name and password", _status(exc)) from exc
    except Exception as exc:
        classified = _classify(exc)
        if isinstance(classified, NotAllowed | PreconditionFailed):
            raise classified from exc
        if classified.status in (401, 403):
            raise Refused("the server refused this user name and password", classified.status) from exc
        if isinstance(classified, Rejected):
            raise Refused(
                f"the address does not answer as a CalDAV server (HTTP {classified.status})",
                classified.status,
            ) from exc
        if isinstance(exc, error.DAVError) and classified.status is None:
            raise Refused("the address does not answer as a CalDAV server") from exc
        raise classified from exc
    return found


def _settle(status: int, what: str) -> None:
    if status == 412:
        raise PreconditionFailed(f"{what}: 412 precondition failed", 412)
    if 400 <= status < 500 and status != 404 and not passes(status):
        raise Rejected(f"{what}: refused with {status}", status)
    if passes(status):
        raise Unavailable(f"{what}: the server answered HTTP {status}", status)


def put(login: Login, calendar_url: str, href: str, body: str, etag: str | None) -> str | None:
    """Create (`etag` None: `If-None-Match: *`) or replace (`If-Match: etag`) one object in one
    conditional PUT; its new ETag, when the server tells it. (The library's `save()` would search
    the calendar for the UID first: a second round trip the precondition already makes needless.)"""
    headers = {"Content-Type": "text/calendar; charset=utf-8"}
    if etag is None:
        headers["If-None-Match"] = "*"
    else:
        headers["If-Match"] = etag
    try:
        with _client(login) as client:
            response = client.put(href, body, headers)
    except Exception as exc:
        raise _classify(exc) from exc
    if response.status == 409 and "no-uid-conflict" in str(response.raw):
        raise UidTaken(_named_href(str(response.raw), calendar_url))
    _settle(response.status, "PUT")
    if response.status == 404:
        raise Gone("PUT: the object or its calendar is gone (404)", 404)
    found = response.headers.get("ETag") if response.headers else None
    return str(found) if found else None


NAMED_HREF = re.compile(r"no-uid-conflict[^>]*>\s*<(?:\w+:)?href[^>]*>([^<]+)<", re.IGNORECASE)


def _named_href(answer: str, calendar_url: str) -> str | None:
    """The object a no-uid-conflict names, when it lies in this calendar (an address anywhere
    else is not taken from the server's word)."""
    found = NAMED_HREF.search(answer)
    if found is None:
        return None
    href = urljoin(calendar_url, found.group(1).strip())
    return normal_href(href) if urlsplit(href).path.startswith(urlsplit(calendar_url).path) else None


def find_uid(login: Login, calendar_url: str, uid: str) -> RemoteObject | None:
    """The calendar's object with this UID (a calendar-query REPORT), or None."""
    try:
        with _client(login) as client:
            calendar = caldav.Calendar(client=client, url=calendar_url)
            found = calendar.get_object_by_uid(uid)
            return RemoteObject(normal_href(str(found.url)), found.etag, str(found.data))
    except error.NotFoundError:
        return None
    except Exception as exc:
        raise _classify(exc) from exc


def takes_todos(login: Login, calendar_url: str) -> bool:
    """Whether the calendar takes VTODOs (its CALDAV:supported-calendar-component-set; RFC 4791
    §5.2.3: a calendar that names none takes every kind)."""
    try:
        with _client(login) as client:
            calendar = caldav.Calendar(client=client, url=calendar_url)
            kinds = calendar.get_supported_components()
    except Exception as exc:
        raise _classify(exc) from exc
    return any(str(kind).upper() == "VTODO" for kind in kinds)


def delete(login: Login, calendar_url: str, href: str, etag: str | None) -> None:
    """Delete one object with `If-Match: etag`; one that is already gone counts as deleted."""
    headers = {"If-Match": etag} if etag else {}
    try:
        with _client(login) as client:
            response = client.delete(href, headers)
    except error.NotFoundError:
        return
    except Exception as exc:
        classified = _classify(exc)
        if classified.status == 404:
            return
        raise classified from exc
    _settle(response.status, "DELETE")


def fetch(login: Login, calendar_url: str, href: str) -> RemoteObject | None:
    """The object as the server holds it now, or None when it is gone. A GET whose status is read
    here: the library's `load()` takes any answer but a 404 — an error page too — for the object."""
    try:
        with _client(login) as client:
            response = client.request(href, "GET", "", {"Accept": "text/calendar"})
    except Exception as exc:
        classified = _classify(exc)
        if classified.status in (404, 410):
            return None
        raise classified from exc
    if response.status in (404, 410):
        return None
    _settle(response.status, "GET")
    if not 200 <= response.status < 300:
        raise Unavailable(f"GET: {response.status}", response.status)
    etag = response.headers.get("ETag") if response.headers else None
    return RemoteObject(normal_href(href), str(etag) if etag else None, str(response.raw))


def changes(login: Login, calendar_url: str, token: str | None) -> Changes:
    """RFC 6578 sync-collection from `token` (the whole calendar without one); where the server
    offers no sync token the library lists everything and the caller compares ETags."""
    try:
        with _client(login) as client:
            calendar = caldav.Calendar(client=client, url=calendar_url)
            found = calendar.objects_by_sync_token(sync_token=token, load_objects=True)
            deleted = {normal_href(str(u)) for u in found.deleted_urls}
            listed = frozenset(normal_href(str(o.url)) for o in found) - deleted
            changed = [
                RemoteObject(normal_href(str(o.url)), o.etag, str(o.data))
                for o in found
                if normal_href(str(o.url)) not in deleted and _read(o)
            ]
            new_token = str(found.sync_token) if found.sync_token else None
            # An object named whose body did not come (its GET failed) is asked for again: the
            # token stays where it was. Past the new one, it was lost until it changed.
            unread = any(not _read(o) for o in found if normal_href(str(o.url)) not in deleted)
            if new_token is not None and new_token.startswith("fake-"):
                # No RFC 6578 on this server: the library lists everything and hashes the ETags
                # into a token of its own; the same token back means nothing changed.
                unchanged = token == new_token
                if unchanged:
                    return Changes([], [], new_token, complete=False)
                return Changes(changed, [], token if unread else new_token, complete=True, listed=listed)
            return Changes(
                changed,
                sorted(deleted),
                token if unread else new_token,
                complete=token is None,
                listed=listed,
            )
    except error.DAVError as exc:
        if token is not None and "valid-sync-token" in str(getattr(exc, "preconditions", "")):
            # The server forgot the token (RFC 6578 §3.2): start over with a full listing.
            return changes(login, calendar_url, None)
        raise _classify(exc) from exc
    except Exception as exc:
        raise _classify(exc) from exc


def _read(obj: Any) -> bool:
    """Whether the library brought an object's body: a GET it could not do leaves an empty one
    (or the error page's text, a calendar with no component in it)."""
    data = str(obj.data or "")
    return any(f"BEGIN:{name}" in data for name in ("VEVENT", "VTODO", "VJOURNAL"))


def near(login: Login, calendar_url: str, start: datetime, end: datetime) -> list[RemoteObject]:
    """The objects with an occurrence in [start, end) (a calendar-query with a time range, series
    not expanded): what a first sync shows before the whole calendar."""
    try:
        with _client(login) as client:
            calendar = caldav.Calendar(client=client, url=calendar_url)
            found = calendar.search(event=True, start=start, end=end, expand=False)
            return [RemoteObject(normal_href(str(o.url)), o.etag, str(o.data)) for o in found if o.data]
    except Exception as exc:
        raise _classify(exc) from exc


def normal_href(href: str) -> str:
    """One spelling per object address: servers and the library disagree on percent-encoding."""
    return unquote(href)


def href_for(calendar_url: str, uid: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in uid)
    return urljoin(calendar_url if calendar_url.endswith("/") else calendar_url + "/", f"{safe}.ics")
