"""What of a connected calendar's objects the sync could not read, named for the user (contract §22).

Calendars people connect hold years of objects written by many clients. One the reader cannot take
(two DTSTARTs, a start that is text, two events under one UID) is skipped alone, and one it takes
only in part (a second RRULE, a rule it cannot follow) is shown as far as it goes: the rest of the
calendar syncs either way. Each is noted on its calendar row (`caldav_calendars.object_notes`) with
its href, its UID and what is wrong in our words, and `GET /v1/accounts` shows the notes as the
account's warnings. A note goes when its object is read again (it is noted again if still wrong)
or is gone from the server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from calagent.commands.ical.parse import UnreadableObject

# RFC 5545 §3.1: a content line "UID:…" (a parameter is allowed, though no client writes one).
_UID_LINE = re.compile(r"^UID(?:;[^:\r\n]*)?:(.*?)\r?$", re.MULTILINE)


@dataclass(frozen=True)
class ObjectNote:
    href: str
    uid: str | None
    skipped: bool  # not shown at all; False: shown as far as it could be read
    problem: str


def uid_in(body: str) -> str | None:
    """The UID an object's text carries, read off its lines: for an object no parser takes."""
    found = _UID_LINE.search(body)
    return found.group(1).strip() or None if found else None


def skipped(href: str, body: str, exc: Exception) -> ObjectNote:
    """The note of an object that could not be read at all: the reader's own words when it knew
    what was wrong, else the kind of failure (never a traceback, never the object's text)."""
    if isinstance(exc, UnreadableObject):
        problem = str(exc)
    else:
        problem = f"it could not be read ({type(exc).__name__})"
    return ObjectNote(href, uid_in(body), True, problem[:300])


def read_notes(raw: object) -> list[ObjectNote]:
    if not isinstance(raw, list):
        return []
    return [ObjectNote(**entry) for entry in raw if isinstance(entry, dict)]


def dumped(notes: Sequence[ObjectNote]) -> list[dict[str, Any]] | None:
    return [asdict(n) for n in notes] or None


def merged(
    before: Iterable[ObjectNote],
    found: Iterable[ObjectNote],
    *,
    read_again: set[str],
    gone: set[str],
    listed: frozenset[str] | None,
) -> list[ObjectNote]:
    """The calendar's notes after one listing: those of objects read again or gone are dropped
    (`listed`, for a listing of the whole calendar: what it does not name is gone), and what this
    listing found is added."""
    kept = [
        n
        for n in before
        if n.href not in read_again and n.href not in gone and (listed is None or n.href in listed)
    ]
    return sorted([*kept, *found], key=lambda n: n.href)
