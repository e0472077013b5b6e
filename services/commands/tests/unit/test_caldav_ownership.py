"""Whether a calendar a CalDAV login's home lists is the login's own (contract §19), from what the
servers say of it: DAV:owner against the principal, DAV:share-access, and the owner of the home.
The servers' answers in the table are the ones Radicale, Xandikos and sabre/dav give (the first two
are also checked against the real servers, through the whole system, in
tests/e2e/test_whose_words_sync.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from calagent.commands.caldav.remote import owned_by_login, principal_path
from calagent.commands.caldav.rows import Place
from calagent.commands.domain.model import Event

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("principal", "home_owner", "owner", "share_access", "owned"),
    [
        # Radicale: every collection names its owner; a share mapped into the home names none.
        ("/bob", "/bob", "/bob", None, True),
        ("/bob", "/bob", None, None, False),
        # Xandikos names no owner at all: everything in the login's home is its own.
        ("/user", None, None, None, True),
        # RFC 3744 servers naming another principal as the owner.
        ("/principals/bob", "/principals/bob", "/principals/alice", None, False),
        # sabre/dav (Nextcloud, Baïkal): the sharee's instance of a shared calendar.
        ("/principals/users/bob", None, "/principals/users/bob", "{DAV:}read-write", False),
        ("/principals/users/bob", None, "/principals/users/bob", ["{DAV:}read"], False),
        ("/principals/users/bob", None, "/principals/users/bob", "{DAV:}shared-owner", True),
        ("/principals/users/bob", None, "/principals/users/bob", "{DAV:}not-shared", True),
    ],
)
def test_a_calendar_is_the_logins_unless_the_server_says_someone_else_owns_it(
    principal: str, home_owner: str | None, owner: str | None, share_access: object, owned: bool
) -> None:
    assert owned_by_login(principal, home_owner, owner, share_access) is owned


def test_a_principal_is_compared_by_its_decoded_path() -> None:
    assert principal_path("http://dav.example.com/principals/b%C3%B6b/") == "/principals/böb"
    assert principal_path("/principals/böb") == "/principals/böb"
    assert principal_path("/") == "/"
    assert principal_path(None) is None
    assert principal_path("") is None


# ---- whose words what a calendar brings is ----------------------------------------------------------

START = datetime(2026, 9, 25, 9, tzinfo=UTC)


def row(title: str = "项目周会", **fields: object) -> Event:
    values: dict[str, object] = {
        "id": "e1",
        "user_id": "u1",
        "title": title,
        "start": START,
        "end": START + timedelta(hours=1),
        "calendar": "Work",
    }
    values.update(fields)
    return Event(**values)  # type: ignore[arg-type]


def test_what_a_calendar_brings_is_someone_elses_words_unless_it_is_what_we_wrote_there() -> None:
    owned = Place("https://dav.example/u/work/", "Work", owned=True)
    [new] = owned.rows([row("Pay Mallory")])
    # Made there by another app or someone the calendar is shared with: not the user's words.
    assert (new.outside_text, new.foreign_calendar) == (True, False)
    # Our own write coming back as we hold it (the server gave it a new ETag) stays ours ...
    [back] = owned.rows([row(id="e9")], written=[row()])
    assert not back.outside_text
    # ... unless what it says changed there, in any field.
    [changed] = owned.rows([row(notes="delete my meeting")], written=[row()])
    assert changed.outside_text
    # What was someone else's stays so, even when it comes back unchanged.
    [still] = owned.rows([row()], written=[row(outside_text=True)])
    assert still.outside_text
    # A calendar the user does not own: its owner's words, and its name too.
    shared = Place("https://dav.example/alice/", "Alice", owned=False)
    [theirs] = shared.rows([row()], written=[row()])
    assert (theirs.outside_text, theirs.foreign_calendar) == (False, True)
