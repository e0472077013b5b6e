"""Overlap on half-open ranges: [a0, a1) meets [b0, b1) iff a0 < b1 and a1 > b0.

Touching ranges (one ends when the other starts) do not meet. An all-day event blocks its whole
local day(s) in the zone the question is asked in, whatever instants were stored for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from calagent.commands.domain.model import Event
from calagent.commands.domain.timeutil import local_date, local_midnight


def overlaps(a_start: datetime, a_end: datetime, b_start: datetime, b_end: datetime) -> bool:
    return a_start < b_end and a_end > b_start


def in_window(start: datetime, end: datetime, window_start: datetime, window_end: datetime) -> bool:
    """Whether an entry shows in a range: it overlaps it, or it ends when it starts (RFC 5545
    §3.6.1) at an instant of the range."""
    if start == end:
        return window_start <= start < window_end
    return overlaps(start, end, window_start, window_end)


def blocked_span(start: datetime, end: datetime, all_day: bool, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """The span an entry keeps busy: itself, or for an all-day entry every local day it touches."""
    if not all_day:
        return start, end
    first = local_date(start, tz)
    # `end` is exclusive: an all-day event ending at next midnight covers only its own day.
    last = local_date(max(start, end - timedelta(microseconds=1)), tz)
    return local_midnight(first, tz), local_midnight(last + timedelta(days=1), tz)


def event_span(event: Event, tz: ZoneInfo) -> tuple[datetime, datetime]:
    return blocked_span(event.start, event.end, event.all_day, tz)


def keeps_time(event: Event) -> bool:
    """Whether an event holds its owner's time at all: not when it is done or marked free
    (TRANSP:TRANSPARENT, as a task's block is while its task could go elsewhere, contract §21),
    nor when it ends as it starts (a timed VEVENT without DTEND or DURATION, contract §14).
    The one home of that rule: `freetime.shows_as` and `find_conflicts` both ask it."""
    return not (event.completed or event.transparent) and event.end > event.start


def find_conflicts(
    start: datetime,
    end: datetime,
    all_day: bool,
    events: Iterable[Event],
    tz: ZoneInfo,
    *,
    ignore_ids: frozenset[str] = frozenset(),
) -> list[Event]:
    """The user's events that keep time (`keeps_time`) the proposed entry would meet, in start
    order."""
    a0, a1 = blocked_span(start, end, all_day, tz)
    hits = [
        ev
        for ev in events
        if keeps_time(ev) and ev.id not in ignore_ids and overlaps(a0, a1, *event_span(ev, tz))
    ]
    return sorted(hits, key=lambda ev: (ev.start, ev.id))
