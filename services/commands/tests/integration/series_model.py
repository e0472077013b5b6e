"""A reference model of series edits, written from RFC 5545 and the contract (§14) alone.

The calendar is a VCALENDAR (`icalendar`): a series is a master VEVENT with DTSTART (TZID), DTEND,
SUMMARY, RRULE and EXDATE, and one VEVENT per changed occurrence with the master's UID and a
RECURRENCE-ID. Occurrences come from `recurring-ical-events`. Nothing here imports the system's
series code: the model decides each edit from the RFC's terms and the contract's words.

- An occurrence is named by its RECURRENCE-ID (the slot the rule gives it), moved or not.
- `this` writes an override VEVENT, or an EXDATE for a delete.
- `following` from slot k ends the master with UNTIL one second before k and starts a new series
  (a new UID) at k; a COUNT becomes the rule's instances left from k; EXDATEs and overrides at or
  after k move to the new series.
- `all` changes the master in place.
- A series change moves every slot by the same wall-clock amount (measured from the slot the user
  pointed at, not the time it had been moved to): DTSTART, EXDATEs, RECURRENCE-IDs and UNTIL move
  with it; BYDAY / BYMONTHDAY name the new day. A weekday move of a rule with several weekdays, or a
  month-day move whose starts are no longer one a month on one day (a day some of the series' months
  lack, any day past the 28th for an endless series), is refused and changes nothing.
- An override keeps every value it has of its own (one that differs from what the master gave its
  slot) and follows the master on the others; the occurrence pointed at takes what was asked.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import recurring_ical_events  # type: ignore[import-untyped]
from icalendar import Calendar, Event, vRecur

DAY_NAMES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
FAR = datetime(2031, 1, 1, tzinfo=UTC)


class Refused(Exception):
    """The rule cannot say the change: nothing is changed."""


@dataclass(frozen=True)
class Occurrence:
    uid: str
    slot: datetime  # RECURRENCE-ID, aware, in the series' zone
    start: datetime
    end: datetime
    title: str

    @property
    def key(self) -> tuple[datetime, datetime, str]:
        return (self.start.astimezone(UTC), self.end.astimezone(UTC), self.title)


@dataclass(frozen=True)
class Ask:
    """What the user asked to change; None leaves it as it is."""

    title: str | None = None
    day: date | None = None
    clock: time | None = None
    minutes: int | None = None


class Model:
    def __init__(self, tz: ZoneInfo) -> None:
        self.tz = tz
        self.cal = Calendar()
        self.cal.add("prodid", "-//reference model//")
        self.cal.add("version", "2.0")
        self._uids = 0

    # ---- reading --------------------------------------------------------------------------------

    def _local(self, value: datetime) -> datetime:
        return value.astimezone(self.tz)

    def _at(self, naive: datetime) -> datetime:
        return naive.replace(tzinfo=self.tz)

    def components(self, uid: str) -> list[Event]:
        return [c for c in self.cal.walk("VEVENT") if isinstance(c, Event) and str(c["UID"]) == uid]

    def master(self, uid: str) -> Event:
        [found] = [c for c in self.components(uid) if "RRULE" in c]
        return found

    def overrides(self, uid: str) -> list[Event]:
        return [c for c in self.components(uid) if "RECURRENCE-ID" in c]

    def uids(self) -> list[str]:
        return sorted({str(c["UID"]) for c in self.cal.walk("VEVENT")})

    @staticmethod
    def start_of(event: Event) -> datetime:
        value: datetime = event.decoded("DTSTART")
        return value

    @staticmethod
    def end_of(event: Event) -> datetime:
        value: datetime = event.decoded("DTEND")
        return value

    @staticmethod
    def rid_of(event: Event) -> datetime:
        value: datetime = event.decoded("RECURRENCE-ID")
        return value

    @staticmethod
    def rule_of(event: Event) -> dict[str, list[Any]]:
        recur = event["RRULE"]
        assert isinstance(recur, vRecur)
        return {key: list(value) for key, value in recur.items()}

    @staticmethod
    def exdates_of(event: Event) -> list[datetime]:
        found = event.get("EXDATE")
        if found is None:
            return []
        lists = found if isinstance(found, list) else [found]
        return [d.dt for item in lists for d in item.dts]

    def expand(self, lo: datetime, hi: datetime) -> list[Occurrence]:
        found = [
            Occurrence(
                str(c["UID"]),
                self._local(c.decoded("RECURRENCE-ID")),
                self._local(c.decoded("DTSTART")),
                self._local(c.decoded("DTEND")),
                str(c["SUMMARY"]),
            )
            for c in recurring_ical_events.of(self.cal).between(lo, hi)
        ]
        return sorted(found, key=lambda o: (o.key, o.uid))

    def slots(self, uid: str) -> list[datetime]:
        """Every start the master's rule gives, exclusions ignored (what COUNT counts)."""
        bare = Event.from_ical(self.master(uid).to_ical())
        assert isinstance(bare, Event)
        bare.pop("EXDATE", None)
        alone = Calendar()
        alone.add_component(bare)
        return [
            self._local(c.decoded("DTSTART"))
            for c in recurring_ical_events.of(alone).between(self.start_of(bare), FAR)
        ]

    def finite(self, uid: str) -> bool:
        rule = self.rule_of(self.master(uid))
        return "COUNT" in rule or "UNTIL" in rule

    def occurrence(self, uid: str, slot: datetime) -> Occurrence:
        for override in self.overrides(uid):
            if self.rid_of(override) == slot:
                return Occurrence(
                    uid,
                    slot,
                    self._local(self.start_of(override)),
                    self._local(self.end_of(override)),
                    str(override["SUMMARY"]),
                )
        master = self.master(uid)
        length = self.end_of(master) - self.start_of(master)
        return Occurrence(uid, slot, slot, slot + length, str(master["SUMMARY"]))

    # ---- writing --------------------------------------------------------------------------------

    def _new_uid(self) -> str:
        self._uids += 1
        return f"series-{self._uids}"

    def create(self, title: str, start: datetime, minutes: int, rule: dict[str, list[Any]]) -> str:
        uid = self._new_uid()
        master = Event()
        master.add("uid", uid)
        master.add("summary", title)
        master.add("dtstart", start)
        master.add("dtend", start + timedelta(minutes=minutes))
        master.add("rrule", rule)
        self.cal.add_component(master)
        return uid

    def _set(self, event: Event, name: str, value: Any) -> None:
        event.pop(name, None)
        if value is not None and value != []:
            event.add(name, value)

    def _remove(self, event: Event) -> None:
        self.cal.subcomponents.remove(event)

    def _override(self, uid: str, slot: datetime, start: datetime, end: datetime, title: str) -> None:
        for override in self.overrides(uid):
            if self.rid_of(override) == slot:
                self._remove(override)
        event = Event()
        event.add("uid", uid)
        event.add("recurrence-id", slot)
        event.add("summary", title)
        event.add("dtstart", start)
        event.add("dtend", end)
        self.cal.add_component(event)

    def update(self, uid: str, slot: datetime, scope: str, ask: Ask) -> tuple[Occurrence, Occurrence]:
        """The occurrence before, and the occurrence the user pointed at after the change."""
        before = self.occurrence(uid, slot)
        shown = before.start
        after_start = self._at(
            datetime.combine(ask.day or shown.date(), ask.clock or shown.time().replace(tzinfo=None))
        )
        after_length = timedelta(minutes=ask.minutes) if ask.minutes else before.end - before.start
        after_title = ask.title or before.title
        if scope == "this":
            self._override(uid, slot, after_start, after_start + after_length, after_title)
            return before, self.occurrence(uid, slot)
        master = self.master(uid)
        first = self._local(self.start_of(master))
        origin = first if scope == "all" or slot == first else slot
        old_wall = slot.replace(tzinfo=None)
        new_wall = datetime.combine(ask.day or old_wall.date(), ask.clock or old_wall.time())
        delta = new_wall - old_wall
        rule = self._moved_rule(uid, origin, delta)  # may refuse: nothing changed yet

        def moved(value: datetime) -> datetime:
            return self._at(self._local(value).replace(tzinfo=None) + delta)

        old_length = self.end_of(master) - self.start_of(master)
        old_title = str(master["SUMMARY"])
        new_length = timedelta(minutes=ask.minutes) if ask.minutes else old_length
        new_title = ask.title or old_title
        exdates = self.exdates_of(master)
        if origin == first:
            series, target_uid = master, uid
        else:
            # Cut: the old series ends one second before k.
            head_rule = {k: v for k, v in self.rule_of(master).items() if k not in ("COUNT", "UNTIL")}
            head_rule["UNTIL"] = [origin.astimezone(UTC) - timedelta(seconds=1)]
            self._set(master, "RRULE", head_rule)
            self._set(master, "EXDATE", [d for d in exdates if d < origin])
            target_uid = self._new_uid()
            series = Event()
            series.add("uid", target_uid)
            self.cal.add_component(series)
        new_start = moved(origin)
        self._set(series, "SUMMARY", new_title)
        self._set(series, "DTSTART", new_start)
        self._set(series, "DTEND", new_start + new_length)
        self._set(series, "RRULE", rule)
        self._set(series, "EXDATE", [moved(d) for d in exdates if d >= origin])
        for override in self.overrides(uid):
            rid = self._local(self.rid_of(override))
            if rid < origin:
                continue
            if rid == slot:
                start, end, title = after_start, after_start + after_length, after_title
            else:
                own_start = self._local(self.start_of(override))
                own_length = self.end_of(override) - self.start_of(override)
                own_title = str(override["SUMMARY"])
                start = moved(rid) if own_start == rid else own_start
                end = start + (new_length if own_length == old_length else own_length)
                title = new_title if own_title == old_title else own_title
            self._remove(override)
            replacement = Event()
            replacement.add("uid", target_uid)
            replacement.add("recurrence-id", moved(rid))
            replacement.add("summary", title)
            replacement.add("dtstart", start)
            replacement.add("dtend", end)
            self.cal.add_component(replacement)
        return before, self.occurrence(target_uid, moved(slot))

    def _moved_rule(self, uid: str, origin: datetime, delta: timedelta) -> dict[str, list[Any]]:
        master = self.master(uid)
        rule = self.rule_of(master)
        start = origin.replace(tzinfo=None)
        days = ((start + delta).date() - start.date()).days
        slots = self.slots(uid) if self.finite(uid) else []
        if days:
            if "BYDAY" in rule and days % 7:
                if len(rule["BYDAY"]) > 1:
                    raise Refused("one weekday of several")
                rule["BYDAY"] = [DAY_NAMES[(start + delta).weekday()]]
            if rule["FREQ"] == ["MONTHLY"]:
                day = start.day + days
                if self.finite(uid):
                    # A monthly rule gives one start a month on one month day: the moved starts
                    # must be that, in consecutive months.
                    moved = [s.replace(tzinfo=None) + timedelta(days=days) for s in slots if s >= origin]
                    months = [m.year * 12 + m.month for m in moved]
                    expressible = len({m.day for m in moved}) == 1 and all(
                        b - a == 1 for a, b in itertools.pairwise(months)
                    )
                    day = moved[0].day
                else:
                    expressible = 1 <= day <= 28  # an endless series meets every month
                if not expressible:
                    raise Refused("a month day some months lack")
                if "BYMONTHDAY" in rule:
                    rule["BYMONTHDAY"] = [day]
        if "COUNT" in rule:
            rule["COUNT"] = [sum(1 for s in slots if s >= origin)]
        if "UNTIL" in rule:
            last = max(s for s in slots if s >= origin)
            rule["UNTIL"] = [self._at(last.replace(tzinfo=None) + delta).astimezone(UTC)]
        return rule

    def delete(self, uid: str, slot: datetime, scope: str) -> int | None:
        """How many occurrences go (None: the series has no end)."""
        master = self.master(uid)
        if scope == "this":
            for override in self.overrides(uid):
                if self.rid_of(override) == slot:
                    self._remove(override)
            self._set(master, "EXDATE", [*self.exdates_of(master), slot])
            return 1
        first = self._local(self.start_of(master))
        origin = first if scope == "all" else slot
        exdates = {self._local(d) for d in self.exdates_of(master)}
        gone = (
            sum(1 for s in self.slots(uid) if s >= origin and s not in exdates) if self.finite(uid) else None
        )
        if origin == first:
            for event in self.components(uid):
                self._remove(event)
            return gone
        for override in self.overrides(uid):
            if self._local(self.rid_of(override)) >= origin:
                self._remove(override)
        head_rule = {k: v for k, v in self.rule_of(master).items() if k not in ("COUNT", "UNTIL")}
        head_rule["UNTIL"] = [origin.astimezone(UTC) - timedelta(seconds=1)]
        self._set(master, "RRULE", head_rule)
        self._set(master, "EXDATE", [d for d in self.exdates_of(master) if d < origin])
        return gone
