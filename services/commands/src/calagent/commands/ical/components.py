"""Which component of an object speaks for it, and its SEQUENCE: one home (issue 43 item 5, where the
master was chosen six ways and two `sequence_of` disagreed on a SEQUENCE that is not a number).

An object the sync stores must say which VEVENT is its master: `master_of` (none, or two under one
UID, is an object no reader takes). A scheduling message may carry one occurrence alone (an
invitation to it): `speaking` is its master, else its first VEVENT.
"""

from __future__ import annotations

from icalendar import Calendar, Component


class UnreadableObject(ValueError):
    """The server's object is not an event this service can hold (a task, a broken file). Its
    message says what is wrong in our words: it is shown to the user (contract §22)."""


def _masters(cal: Calendar) -> list[Component]:
    return [c for c in cal.walk("VEVENT") if "RECURRENCE-ID" not in c]


def master_of(cal: Calendar) -> Component:
    masters = _masters(cal)
    if not masters:
        raise UnreadableObject("it holds no event that is not a change of another (RECURRENCE-ID)")
    if len(masters) > 1:
        # Two events under one UID without RECURRENCE-ID: which one the object means is unknown.
        uid = str(masters[0].get("UID", "")) or "(none)"
        raise UnreadableObject(f"it holds {len(masters)} events with UID {uid} and no RECURRENCE-ID")
    return masters[0]


def speaking(cal: Calendar) -> Component | None:
    """The VEVENT a scheduling message is about: its master, else its first (one occurrence sent
    alone), None when it holds none."""
    events = list(cal.walk("VEVENT"))
    return next(iter(_masters(cal)), events[0] if events else None)


def sequence_of(component: Component | None) -> int:
    """RFC 5545 §3.8.7.4's revision number; 0 when it is missing or not a number."""
    try:
        return int(component.get("SEQUENCE", 0)) if component is not None else 0
    except (TypeError, ValueError):
        return 0
