"""Who the model means: names resolved against the user's contacts (contract §16).

The model names people the way the user did ("张三", "Bob", "bob@example.com"); code decides who
that is. An address is taken as written. A name (or alias) matches when it is equal after case
and whitespace are set aside; exactly one contact → that person, none or several → the request
waits (`needs_attendee`) with the candidates. The user's own contacts come before the cards of a
connected address book: a card whose address an own contact has is that contact (its names lead to
it too), so one person is never two candidates. Pure: the contacts are passed in.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from calagent.contracts.address import is_address
from calagent.contracts.people import Attendee, ProposalOut

SUGGESTIONS_MAX = 5


@dataclass(frozen=True)
class Contact:
    id: str
    name: str
    email: str
    aliases: tuple[str, ...] = ()
    created_at: datetime | None = None
    # "carddav": a card of a connected account's address book, read-only here.
    source: Literal["own", "carddav"] = "own"

    def as_attendee(self) -> Attendee:
        # A card's name is someone else's words (contract §19): the attendee says so wherever it goes.
        return Attendee(name=self.name, email=self.email, card=self.source == "carddav")


@dataclass(frozen=True)
class Unresolved:
    """A name that names nobody, or several: the candidates (possibly none) to choose from."""

    query: str
    candidates: tuple[Attendee, ...]


def normal_name(value: str) -> str:
    return "".join(value.casefold().split())


def normal_address(value: str) -> str:
    return value.strip().removeprefix("mailto:").removeprefix("MAILTO:").casefold()


def _names(contact: Contact) -> Iterable[str]:
    yield normal_name(contact.name)
    yield from (normal_name(a) for a in contact.aliases)


def _unique(people: Iterable[Attendee]) -> tuple[Attendee, ...]:
    seen: set[str] = set()
    out: list[Attendee] = []
    for person in people:
        key = normal_address(person.email)
        if key not in seen:
            seen.add(key)
            out.append(person)
    return tuple(out)


def directory(contacts: Sequence[Contact]) -> list[Contact]:
    """One entry per address: own contacts first, in their order; a later contact (a card, or an
    own contact again) with an address already there adds its names to that entry."""
    by_address: dict[str, Contact] = {}
    ordered = sorted(contacts, key=lambda c: c.source != "own")
    for contact in ordered:
        key = normal_address(contact.email)
        first = by_address.get(key)
        if first is None:
            by_address[key] = contact
        else:
            by_address[key] = replace(first, aliases=(*first.aliases, contact.name, *contact.aliases))
    return list(by_address.values())


def resolve_one(requested: str, contacts: Sequence[Contact]) -> Attendee | Unresolved:
    contacts = directory(contacts)
    text = requested.strip()
    if is_address(text):
        address = text.removeprefix("mailto:")
        known = [c for c in contacts if normal_address(c.email) == normal_address(address)]
        return known[0].as_attendee() if known else Attendee(email=address)
    wanted = normal_name(text)
    exact = _unique(c.as_attendee() for c in contacts if wanted in set(_names(c)))
    if len(exact) == 1:
        return exact[0]
    if exact:
        return Unresolved(text, exact)
    # Nobody by that name: those whose name holds it, or is held by it ("张" → 张三), as suggestions.
    near = _unique(
        c.as_attendee()
        for c in contacts
        if wanted and any(wanted in n or (n and n in wanted) for n in _names(c))
    )
    return Unresolved(text, near[:SUGGESTIONS_MAX])


def resolve_attendees(
    requested: Sequence[str], contacts: Sequence[Contact]
) -> tuple[Attendee, ...] | Unresolved:
    """Every requested person resolved (each address once, in the order asked), or the first
    that is not."""
    found: list[Attendee] = []
    for item in requested:
        person = resolve_one(item, contacts)
        if isinstance(person, Unresolved):
            return person
        found.append(person)
    return _unique(found)


def keep_answers(wanted: Sequence[Attendee], current: Sequence[Attendee]) -> tuple[Attendee, ...]:
    """The new list of attendees with the answers (and names) of the ones already invited kept."""
    known = {normal_address(a.email): a for a in current}
    out: list[Attendee] = []
    for person in wanted:
        before = known.get(normal_address(person.email))
        if before is not None:
            person = person.model_copy(update={"status": before.status, "name": person.name or before.name})
        out.append(person)
    return tuple(out)


@dataclass(frozen=True)
class Told:
    """What the people invited to one event (one UID) were last sent, as the mail outbox has it:
    the highest SEQUENCE of its REQUESTs and CANCELs, and whether every message of that sequence
    was a cancellation."""

    sequence: int
    cancelled: bool

    def withdrawn_after(self, kept: int) -> bool:
        """Whether the event was cancelled for its people after its object of SEQUENCE `kept` was
        kept: the CANCEL of a whole event is the one message whose object is not kept (the event
        is gone), so it alone goes above the kept object's sequence."""
        return self.cancelled and self.sequence > kept


@dataclass(frozen=True)
class SentProposal:
    """A proposal of times the user confirmed (contract §20): as its offers show it, the tentative
    events holding its slots (in slot order; one the user removed meanwhile is simply gone), the
    Message-ID of its mail (a reply names it), and the event booked from it, once one is."""

    proposal: ProposalOut
    hold_ids: tuple[str, ...]
    message_id: str
    booked: str | None = None


def next_sequence(sequence: int, told: Told | None) -> int:
    """The SEQUENCE of the next message about an event: the object's with this change, and above
    anything its people were sent (RFC 5546 §2.1.4: a message at or below the sequence a
    recipient holds is stale, and a re-issued event after its CANCEL needs a higher one)."""
    return sequence if told is None else max(sequence, told.sequence + 1)


def new_mail_address(domain: str) -> str:
    """An unguessable address: whoever knows it can reach the user's assistant."""
    return f"{secrets.token_hex(12)}@{domain}"
