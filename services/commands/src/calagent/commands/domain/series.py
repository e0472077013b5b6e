"""Repeating events (RFC 5545): a master with a rule, exceptions (EXDATE) and overrides
(RECURRENCE-ID), expanded into occurrences with dateutil's rrule — never with home-made date loops.

The rule runs on the wall clock of the zone the series was made in: a weekly 09:00 meeting stays
at 09:00 local across a DST change, so its UTC instant moves. Every occurrence has an id of its own,
`<master id>:<UTC start as YYYYMMDDTHHMMSSZ>`, so a tool can name one occurrence, and the id of a
moved override still names the slot it replaced.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

from dateutil.rrule import rrule, rrulestr

from calagent.commands.domain.model import Event
from calagent.commands.domain.overlap import in_window
from calagent.commands.domain.timeutil import local_days, whole_days

STAMP = "%Y%m%dT%H%M%SZ"


class InvalidRecurrenceError(ValueError):
    """The rule does not parse, or gives no occurrence at all."""


class InexpressibleChangeError(ValueError):
    """A change to a series that its rule cannot say: moving it would add, drop or misplace an
    occurrence (one weekday of several, a month day some months lack)."""


WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# How many of a rule's starts are compared when a moved rule is checked against the moved starts:
# past a few years of any rule in the contract's subset, every pattern has repeated.
CHECKED_STARTS = 400


def occurrence_id(master_id: str, start: datetime) -> str:
    return f"{master_id}:{start.astimezone(UTC).strftime(STAMP)}"


def split_occurrence_id(value: str) -> tuple[str, datetime] | None:
    """`master:20261001T010000Z` → (master, that instant); anything else → None."""
    master, sep, stamp = value.partition(":")
    if not sep or not master:
        return None
    try:
        return master, datetime.strptime(stamp, STAMP).replace(tzinfo=UTC)
    except ValueError:
        return None


def zone_of(event: Event) -> ZoneInfo:
    """The zone whose wall clock the series' rule runs on."""
    return ZoneInfo(event.tz or "UTC")


def rule_for(rule_text: str, first_start: datetime, tz: ZoneInfo) -> rrule:
    """The dateutil rule anchored at the first start's local wall-clock time."""
    local = first_start.astimezone(tz).replace(tzinfo=None)
    text = rule_text.removeprefix("RRULE:")
    try:
        # UNTIL in UTC form ("…Z") does not mix with a naive DTSTART; read it as a local day end.
        parsed = rrulestr(_local_until(text), dtstart=local)
    except (ValueError, TypeError) as exc:
        raise InvalidRecurrenceError(f"recurrence {rule_text!r} does not parse: {exc}") from exc
    if not isinstance(parsed, rrule):
        raise InvalidRecurrenceError(f"recurrence {rule_text!r} is not a single rule")
    return parsed


def _local_until(text: str) -> str:
    parts = []
    for part in text.split(";"):
        if part.startswith("UNTIL="):
            value = part.removeprefix("UNTIL=").rstrip("Z")
            if "T" not in value:
                value += "T235959"
            part = f"UNTIL={value}"
        parts.append(part)
    return ";".join(parts)


def localise(naive: datetime, tz: ZoneInfo) -> datetime:
    """fold=0: a wall-clock time that occurs twice means the earlier instant; one that does not
    occur (spring forward) lands the gap later, as the time service resolves it."""
    return naive.replace(tzinfo=tz, fold=0).astimezone(UTC).astimezone(tz)


def validate_rule(rule_text: str, first_start: datetime, tz: ZoneInfo) -> None:
    rule = rule_for(rule_text, first_start, tz)
    if rule.after(first_start.astimezone(tz).replace(tzinfo=None), inc=True) is None:
        raise InvalidRecurrenceError("the rule gives no occurrence")


def starts(
    master: Event, window_start: datetime, window_end: datetime, *, inclusive_before: timedelta
) -> list[datetime]:
    """Occurrence starts (aware, local) of a master whose occurrences may overlap the window."""
    assert master.rrule is not None
    tz = zone_of(master)
    rule = rule_for(master.rrule, master.start, tz)
    lo = (window_start - inclusive_before).astimezone(tz).replace(tzinfo=None)
    hi = window_end.astimezone(tz).replace(tzinfo=None)
    excluded = {d.astimezone(UTC) for d in master.exdates}
    found = []
    for naive in rule.between(lo, hi, inc=True):
        start = localise(naive, tz)
        if start.astimezone(UTC) not in excluded:
            found.append(start)
    return found


def next_starts(
    rule_text: str, first_start: datetime, tz: ZoneInfo, after: datetime, count: int
) -> list[datetime]:
    """The first `count` starts at or after `after` (for a plan's receipt)."""
    rule = rule_for(rule_text, first_start, tz)
    found: list[datetime] = []
    cursor = after.astimezone(tz).replace(tzinfo=None)
    for naive in rule.xafter(cursor, count=count, inc=True):
        found.append(localise(naive, tz))
    return found


def occurrence_count(rule_text: str, first_start: datetime, tz: ZoneInfo, after: datetime) -> int | None:
    """How many starts are left at or after `after`; None for a rule without an end."""
    if not any(p.startswith(("COUNT=", "UNTIL=")) for p in rule_text.split(";")):
        return None
    rule = rule_for(rule_text, first_start, tz)
    cursor = after.astimezone(tz).replace(tzinfo=None)
    return sum(1 for _ in rule.xafter(cursor, inc=True))


def expand(events: Iterable[Event], window_start: datetime, window_end: datetime) -> list[Event]:
    """Singles and overrides as they are, masters replaced by their occurrences overlapping
    [window_start, window_end) — minus the slots an override replaces. Sorted by start."""
    events = list(events)
    replaced = {
        (e.series_id, e.recurrence_id.astimezone(UTC))
        for e in events
        if e.series_id is not None and e.recurrence_id is not None
    }
    out: list[Event] = []
    for event in events:
        if event.rrule is None:
            if in_window(event.start, event.end, window_start, window_end):
                out.append(event)
            continue
        duration = event.end - event.start
        tz = zone_of(event)
        # An all-day series covers whole local days: its length is counted in days, not hours (a
        # first day of 23 or 25 hours must not shift the end of every later occurrence).
        days = local_days(event.start, event.end, tz)
        try:
            found = starts(event, window_start, window_end, inclusive_before=duration)
        except InvalidRecurrenceError:
            # A rule a calendar app wrote that dateutil cannot follow (RFC 7529 RSCALE/SKIP): the
            # series shows its first occurrence and never takes the read of a range down.
            if in_window(event.start, event.end, window_start, window_end):
                out.append(event.evolve(rrule=None))
            continue
        for start in found:
            if (event.id, start.astimezone(UTC)) in replaced:
                continue
            if event.all_day:
                end = whole_days(start.astimezone(tz).date(), days, tz)[1].astimezone(tz)
            else:
                end = start + duration
            if in_window(start, end, window_start, window_end):
                out.append(
                    event.evolve(
                        id=occurrence_id(event.id, start),
                        start=start,
                        end=end,
                        series_id=event.id,
                        occurrence_start=start,
                    )
                )
    out.sort(key=lambda e: (e.start, e.id))
    return out


def until_before(rule_text: str, occurrence_start: datetime, tz: ZoneInfo) -> str:
    """The rule cut so its last occurrence is the one before `occurrence_start` (a split for
    `scope=following`): COUNT and UNTIL are replaced by an UNTIL one second before it."""
    last = (occurrence_start.astimezone(tz) - timedelta(seconds=1)).replace(tzinfo=None)
    parts = [p for p in rule_text.split(";") if not p.startswith(("COUNT=", "UNTIL="))]
    parts.append(f"UNTIL={last.strftime('%Y%m%dT%H%M%S')}")
    return ";".join(parts)


def remaining_rule(rule_text: str, first_start: datetime, tz: ZoneInfo, from_start: datetime) -> str:
    """The rule for the tail of a split series starting at `from_start`: COUNT shrinks to what is
    left; UNTIL and an endless rule stay as they are."""
    parts = rule_text.split(";")
    if not any(p.startswith("COUNT=") for p in parts):
        return rule_text
    left = occurrence_count(rule_text, first_start, tz, from_start) or 1
    return ";".join(f"COUNT={left}" if p.startswith("COUNT=") else p for p in parts)


def live_count(master: Event, from_start: datetime) -> int | None:
    """How many occurrences of a series are still on the calendar at or after `from_start`: the
    rule's starts minus its exclusions (an override is an occurrence too). None: no end."""
    assert master.rrule is not None
    tz = zone_of(master)
    total = occurrence_count(master.rrule, master.start, tz, from_start)
    if total is None:
        return None
    excluded = {d.astimezone(UTC) for d in master.exdates if d >= from_start}
    return total - len(excluded)


def wall(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


@dataclass(frozen=True)
class MovedRule:
    """A series moved on its wall clock by `delta`: the rule rewritten to give exactly the moved
    starts, and the map from an old start (a RECURRENCE-ID, an EXDATE) to its new one."""

    rule: str
    delta: timedelta
    tz: ZoneInfo

    def slot(self, old: datetime) -> datetime:
        return localise(wall(old, self.tz) + self.delta, self.tz).astimezone(UTC)


def move_rule(rule_text: str, first_start: datetime, tz: ZoneInfo, delta: timedelta) -> MovedRule:
    """Every start of the rule (anchored at `first_start`) moved by `delta` on the wall clock: the
    weekday (BYDAY) or month day (BYMONTHDAY) rewritten to the new day, UNTIL moved with the starts,
    COUNT kept. Raises InexpressibleChangeError when no rewritten rule gives the moved starts."""
    first = wall(first_start, tz)
    new_first = first + delta
    days = (new_first.date() - first.date()).days
    parts: list[str] = []
    for part in rule_text.removeprefix("RRULE:").split(";"):
        key, _, value = part.partition("=")
        if key == "BYDAY" and days % 7:
            if value not in WEEKDAYS:
                raise InexpressibleChangeError(
                    f"the series repeats on {value}; its rule cannot move one occurrence's weekday "
                    "for the whole series (change this occurrence only, or make a new series)"
                )
            value = WEEKDAYS[new_first.weekday()]
        elif key == "BYMONTHDAY" and days:
            if not value.isdigit():
                raise InexpressibleChangeError(
                    f"the series repeats on month days {value}; its rule cannot move one of them "
                    "(change this occurrence only, or make a new series)"
                )
            value = str(new_first.day)
        elif key == "UNTIL":
            # The new UNTIL is the last start moved: UNTIL itself moved could take in one more
            # start where months differ in length (the 1st moved to the 30th of a shorter month).
            until = datetime.strptime(_local_until(part).removeprefix("UNTIL="), "%Y%m%dT%H%M%S")
            found = list(rule_for(rule_text, first_start, tz))
            last = found[-1] if found else until
            value = (last + delta).strftime("%Y%m%dT%H%M%S")
        parts.append(f"{key}={value}")
    moved = MovedRule(";".join(parts), delta, tz)
    old_starts = list(islice(rule_for(rule_text, first_start, tz), CHECKED_STARTS))
    new_starts = list(islice(rule_for(moved.rule, localise(new_first, tz), tz), CHECKED_STARTS))
    if [s + delta for s in old_starts] != new_starts:
        raise InexpressibleChangeError(
            "the series' rule cannot say the new day for every occurrence (some months or weeks "
            "do not have it); change this occurrence only, or make a new series"
        )
    return moved
