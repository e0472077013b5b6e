"""Attendees and organizer of a calendar object: read into `Attendee`s and addresses, and written
back keeping every parameter of what did not change.
"""

from __future__ import annotations

from collections.abc import Sequence

from icalendar import (
    Component,
    vCalAddress,
)
from icalendar.parser import Parameters

from calagent.commands.domain.model import Event
from calagent.commands.domain.people import normal_address
from calagent.contracts.address import EMAIL_MAX
from calagent.contracts.people import Attendee

PARTSTATS = frozenset({"NEEDS-ACTION", "ACCEPTED", "DECLINED", "TENTATIVE", "DELEGATED"})


def _address(value: object) -> str | None:
    """The address of a CAL-ADDRESS (`mailto:` in any case stripped), None when it is none."""
    if value is None:
        return None
    text = str(value).strip()
    if text[:7].lower() == "mailto:":
        text = text[7:]
    return text if 3 <= len(text) <= EMAIL_MAX and "@" in text else None


def address_of(value: object) -> str | None:
    """The address an ORGANIZER or ATTENDEE property names, `mailto:` stripped."""
    return _address(value)


def _properties(component: Component, name: str) -> list[object]:
    raw = component.get(name)
    if raw is None:
        return []
    return list(raw) if isinstance(raw, list) else [raw]


def _attendee(prop: object) -> Attendee | None:
    email = _address(prop)
    if email is None:
        return None
    params = getattr(prop, "params", {}) or {}
    status = str(params.get("PARTSTAT", "NEEDS-ACTION")).upper()
    name = params.get("CN")
    return Attendee.model_validate(
        {
            "name": str(name)[:200] if name else None,
            "email": email,
            "status": status if status in PARTSTATS else "NEEDS-ACTION",
        }
    )


def attendees_of(component: Component) -> tuple[Attendee, ...]:
    return tuple(a for a in (_attendee(p) for p in _properties(component, "ATTENDEE")) if a is not None)


def attendee_property(person: Attendee) -> vCalAddress:
    """A new ATTENDEE as RFC 5545 §3.8.4.1 reads it: who, in which role, what they answered,
    and that an answer is wanted."""
    prop = vCalAddress(f"mailto:{person.email}")
    if person.name:
        prop.params["CN"] = person.name
    prop.params["ROLE"] = "REQ-PARTICIPANT"
    prop.params["PARTSTAT"] = person.status
    prop.params["RSVP"] = "TRUE"
    return prop


def organizer_property(address: str, like: object = None) -> vCalAddress:
    prop = vCalAddress(f"mailto:{address}")
    if like is not None and getattr(like, "params", None):
        prop.params = Parameters(like.params)  # type: ignore[attr-defined]
    return prop


def set_attendees(component: Component, wanted: Sequence[Attendee]) -> None:
    """The ATTENDEE properties for `wanted`: an attendee the object already had, unchanged, keeps
    its property as written (every parameter); one whose name or answer changed keeps its other
    parameters; a new one is added after them; one no longer wanted goes."""
    by_address = {normal_address(a.email): a for a in wanted}
    kept: list[object] = []
    seen: set[str] = set()
    for prop in _properties(component, "ATTENDEE"):
        person = _attendee(prop)
        key = normal_address(person.email) if person is not None else None
        if person is None or key is None or key not in by_address or key in seen:
            continue
        seen.add(key)
        want = by_address[key]
        if (want.name or person.name, want.status) == (person.name, person.status):
            kept.append(prop)
            continue
        edited = vCalAddress(str(prop))
        edited.params = Parameters(getattr(prop, "params", {}) or {})
        if want.name:
            edited.params["CN"] = want.name
        edited.params["PARTSTAT"] = want.status
        kept.append(edited)
    kept += [attendee_property(a) for a in wanted if normal_address(a.email) not in seen]
    component.pop("ATTENDEE", None)
    if kept:
        component["ATTENDEE"] = kept if len(kept) > 1 else kept[0]


def people_differ(row: Event, base: Event) -> bool:
    def key(people: Sequence[Attendee]) -> list[tuple[str, str | None, str]]:
        return sorted((normal_address(a.email), a.name, a.status) for a in people)

    return key(row.attendees) != key(base.attendees)


def with_series_people(row: Event, master: Event) -> Event:
    if row.attendees or row.organizer:
        return row
    return row.evolve(attendees=master.attendees, organizer=master.organizer)
