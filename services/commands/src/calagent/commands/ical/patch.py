"""Writing stored rows back into a calendar object.

Writing back (`patch_object`) patches that text, it does not rebuild it: the object is read into
rows again (the baseline), and only the properties whose modeled value differs between the
baseline and the stored rows are rewritten, in the form the object already used (a DURATION stays
a DURATION, a time stays in its TZID, UTC or floating). Each component that changed gets SEQUENCE
raised by one, LAST-MODIFIED and DTSTAMP. Everything else — attendees, organizer, X- properties,
other alarms, VTIMEZONEs, overrides nobody touched — is left exactly as the object had it, and
nothing of the assistant's own (CATEGORIES) is added.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from icalendar import (
    Alarm,
    Calendar,
    Component,
    vDDDLists,
    vDDDTypes,
    vDuration,
    vText,
    vUri,
)
from icalendar.parser import Parameters

from calagent.commands.domain.model import Event
from calagent.commands.domain.people import normal_address
from calagent.commands.ical.attendees import (
    organizer_property,
    people_differ,
    set_attendees,
    with_series_people,
)
from calagent.commands.ical.parse import (
    exdates_of,
    fingerprint,
    ics_rule,
    implied_length,
    load_object,
    master_of,
    object_rows,
    reminder_alarm,
    text_of,
)
from calagent.commands.ical.zones import add_new_zones, utc_instant, written_like, zone_named

# Rewritten by a change of time, rule or title; never copied from a master into a new override.
_SERIES_ONLY = ("RRULE", "RDATE", "EXRULE", "EXDATE", "RECURRENCE-ID")


@dataclass(frozen=True)
class Patched:
    calendar: Calendar
    changed: bool
    text: str  # the original text, byte for byte, when nothing changed


def _days(start: datetime, end: datetime) -> int:
    """Whole days of an all-day event: its bounds are local midnights, so a DST change in between
    makes the span an hour longer or shorter than N × 24 h."""
    return max(1, round((end - start) / timedelta(days=1)))


def _set_text(component: Component, name: str, value: str | None, kind: type = vText) -> None:
    old = component.get(name)
    if isinstance(old, list):
        old = old[0] if old else None
    component.pop(name, None)
    if value is None:
        return
    new = kind(value)
    if old is not None and getattr(old, "params", None):
        new.params = Parameters(old.params)
    component[name] = new


def _set_times(component: Component, row: Event, base: Event, tz: ZoneInfo) -> None:
    old_start = component.get("DTSTART")
    moved_start = row.start != base.start or row.all_day != base.all_day
    if moved_start:
        component["DTSTART"] = written_like(row.start, old_start, tz, row.all_day)
    length = timedelta(days=_days(row.start, row.end)) if row.all_day else row.end - row.start
    base_length = timedelta(days=_days(base.start, base.end)) if base.all_day else base.end - base.start
    if "DTEND" in component:
        if row.end != base.end or row.all_day != base.all_day:
            end = row.start + length if row.all_day else row.end
            component["DTEND"] = written_like(end, component["DTEND"], tz, row.all_day)
    elif "DURATION" in component:
        if length != base_length:
            duration = vDuration(length)
            duration.params = Parameters(component["DURATION"].params)
            component["DURATION"] = duration
    elif length != implied_length(row.all_day):
        component["DTEND"] = written_like(row.start + length, old_start, tz, row.all_day)


def _set_reminder(component: Component, row: Event) -> None:
    alarm = reminder_alarm(component)
    if row.reminder_minutes is None:
        if alarm is not None:
            component.subcomponents.remove(alarm)
        return
    trigger = vDDDTypes(timedelta(minutes=-row.reminder_minutes))
    if alarm is not None:
        trigger.params = Parameters(alarm["TRIGGER"].params)
        alarm["TRIGGER"] = trigger
        return
    fresh = Alarm()
    fresh.add("action", "DISPLAY")
    fresh["TRIGGER"] = trigger
    fresh.add("description", row.title)
    component.add_component(fresh)


def _patch(component: Component, row: Event, base: Event, tz: ZoneInfo) -> bool:
    """Rewrite the properties of `component` whose modeled value differs between `base` (what
    the component says) and `row` (what is stored now); whether anything was rewritten."""
    changed = False
    for name, attr, kind in (
        ("SUMMARY", "title", vText),
        ("LOCATION", "location", vText),
        ("DESCRIPTION", "notes", vText),
        ("URL", "url", vUri),
    ):
        if getattr(row, attr) != getattr(base, attr):
            _set_text(component, name, getattr(row, attr), kind)
            changed = True
    if (row.start, row.end, row.all_day) != (base.start, base.end, base.all_day):
        _set_times(component, row, base, tz)
        changed = True
    if row.reminder_minutes != base.reminder_minutes:
        _set_reminder(component, row)
        changed = True
    if row.transparent != base.transparent:
        # A block turned busy or free (contract §21): what free/busy readers see of it.
        component.pop("TRANSP", None)
        if row.transparent:
            component.add("TRANSP", "TRANSPARENT")
        changed = True
    if people_differ(row, base):
        set_attendees(component, row.attendees)
        changed = True
    if normal_address(row.organizer or "") != normal_address(base.organizer or ""):
        old = component.pop("ORGANIZER", None)
        if row.organizer is not None:
            component["ORGANIZER"] = organizer_property(row.organizer, old)
        changed = True
    return changed


def _set_exdates(component: Component, wanted: Sequence[datetime], tz: ZoneInfo, all_day: bool) -> None:
    like = component.get("EXDATE")
    if isinstance(like, list):
        like = like[0] if like else None
    form = component["DTSTART"]
    component.pop("EXDATE", None)
    if not wanted:
        return
    moments = [written_like(d, form, tz, all_day) for d in sorted(wanted)]
    values = vDDDLists([m.dt for m in moments])
    values.params = Parameters(moments[0].params)
    if like is not None:
        values.params.update({k: v for k, v in like.params.items() if k not in ("TZID", "VALUE")})
    component["EXDATE"] = values


def stamp_changed(component: Component, stamp: datetime, sequence: int | None = None) -> None:
    """A component that changed: SEQUENCE one higher (or `sequence`), modified now."""
    current = int(component.get("SEQUENCE", 0))
    component.pop("SEQUENCE", None)
    component.add("sequence", current + 1 if sequence is None else sequence)
    for name in ("LAST-MODIFIED", "DTSTAMP"):
        component.pop(name, None)
        component.add(name.lower(), stamp.astimezone(UTC))


def _same_rule(a: str | None, b: str | None, tz: ZoneInfo, all_day: bool) -> bool:
    """Two spellings of one rule (part order, UNTIL's form) are the same rule."""
    if a is None or b is None:
        return a == b
    return dict(ics_rule(a, tz, all_day)) == dict(ics_rule(b, tz, all_day))


def _remove(parsed: Calendar, component: Component) -> None:
    parsed.subcomponents = [c for c in parsed.subcomponents if c is not component]


@dataclass
class _Edits:
    """What a patch did to the parsed object so far: the components it changed (by identity),
    the overrides it added, whether it removed any."""

    changed: dict[int, Component] = field(default_factory=dict)
    added: list[Component] = field(default_factory=list)
    removed: bool = False

    def change(self, component: Component) -> None:
        self.changed[id(component)] = component


def patch_object(original: str, rows: Sequence[Event], uid: str, stamp: datetime) -> Patched:
    """The object `original` with the stored `rows` of its resource written into it (module
    docstring). `rows` hold the row that owns the object (no `series_id`) and its overrides."""
    parsed = load_object(original)
    missing_before = parsed.get_missing_tzids()
    owner = next(r for r in rows if r.series_id is None)
    baseline = object_rows(
        parsed,
        original,
        master_id=owner.id,
        user_id=owner.user_id,
        calendar=owner.calendar,
        fallback_tz=zone_named(owner.tz),
    )
    base_master, base_overrides = baseline[0], baseline[1:]
    tz = zone_named(base_master.tz)
    master = master_of(parsed)
    template = copy.deepcopy(master)
    edits = _Edits()

    if _patch(master, owner, base_master, tz):
        edits.change(master)
    if not _same_rule(owner.rrule, base_master.rrule, tz, owner.all_day):
        master.pop("RRULE", None)
        if owner.rrule is not None:
            master["RRULE"] = ics_rule(owner.rrule, tz, owner.all_day)
        edits.change(master)
    by_slot = _patch_exclusions(parsed, master, owner, base_master, tz, edits)
    _patch_overrides(parsed, rows, template, base_master, base_overrides, by_slot, tz, edits)

    if text_of(master, "UID") != uid:
        # A series split from another is a new event: every component takes its UID.
        for component in [*parsed.walk("VEVENT"), *edits.added]:
            component["UID"] = vText(uid)
            if all(component is not a for a in edits.added):
                edits.change(component)
    if not edits.changed and not edits.added and not edits.removed:
        return Patched(parsed, False, original)
    for component in edits.changed.values():
        stamp_changed(component, stamp)
    sequence = int(master.get("SEQUENCE", 0))
    for component in edits.added:
        stamp_changed(component, stamp, sequence)
        parsed.add_component(component)
    add_new_zones(parsed, missing_before, rows)
    return Patched(parsed, True, bytes(parsed.to_ical()).decode("utf-8"))


def _patch_exclusions(
    parsed: Calendar, master: Component, owner: Event, base_master: Event, tz: ZoneInfo, edits: _Edits
) -> dict[datetime, Component]:
    """EXDATE and cancelled occurrences as the rows exclude them; returns the live overrides of
    the object by the slot they replace."""
    by_slot: dict[datetime, Component] = {}
    cancelled: dict[datetime, Component] = {}
    if base_master.rrule is not None:
        for component in parsed.walk("VEVENT"):
            if "RECURRENCE-ID" in component:
                slot = utc_instant(component.decoded("RECURRENCE-ID"), tz)
                if str(component.get("STATUS", "")).upper() == "CANCELLED":
                    cancelled[slot] = component
                else:
                    by_slot[slot] = component
    # A cancelled occurrence the rows still exclude keeps its component; EXDATE says the rest.
    kept_cancelled = {s for s in cancelled if s in owner.exdates}
    written = exdates_of(master, tz)
    wanted = sorted(set(owner.exdates) - (kept_cancelled - set(written)))
    if tuple(wanted) != written:
        _set_exdates(master, wanted, tz, owner.all_day)
        edits.change(master)
    for slot, component in cancelled.items():
        if slot not in kept_cancelled:
            _remove(parsed, component)
            edits.removed = True
    return by_slot


def _patch_overrides(
    parsed: Calendar,
    rows: Sequence[Event],
    template: Component,
    base_master: Event,
    base_overrides: Sequence[Event],
    by_slot: dict[datetime, Component],
    tz: ZoneInfo,
    edits: _Edits,
) -> None:
    """Each override row written into the component it came from (matched by id, else by slot),
    a new one added from the master as the app wrote it, one the rows no longer have removed."""
    base_by_id = {b.id: b for b in base_overrides}
    base_by_slot = {b.recurrence_id: b for b in base_overrides if b.recurrence_id is not None}
    used: set[str] = set()
    for row in rows:
        if row.series_id is None or row.recurrence_id is None:
            continue
        base = base_by_id.get(row.id) or base_by_slot.get(row.recurrence_id)
        if (
            base is not None
            and base.recurrence_id not in by_slot
            and fingerprint([row]) == fingerprint([base])
        ):
            # An occurrence the object names without a component of its own (an RDATE, one a
            # RANGE=THISANDFUTURE change reaches), unchanged: the object already says it.
            used.add(base.id)
            continue
        if base is not None and base.id not in used and base.recurrence_id in by_slot:
            used.add(base.id)
            component = by_slot[base.recurrence_id]
            edited = _patch(component, row, base, tz)
            if row.recurrence_id != base.recurrence_id:
                component["RECURRENCE-ID"] = written_like(
                    row.recurrence_id, component["RECURRENCE-ID"], tz, base_master.all_day
                )
                edited = True
            if edited:
                edits.change(component)
            continue
        # A new override: the master as the user's app wrote it, for this one occurrence.
        fresh = copy.deepcopy(template)
        for name in _SERIES_ONLY:
            fresh.pop(name, None)
        fresh["RECURRENCE-ID"] = written_like(row.recurrence_id, template["DTSTART"], tz, base_master.all_day)
        # An override row that names no people is the series' meeting with the series' people.
        _patch(fresh, with_series_people(row, base_master), base_master, tz)
        edits.added.append(fresh)
    for base in base_overrides:
        if base.id not in used and base.recurrence_id in by_slot:
            _remove(parsed, by_slot[base.recurrence_id])
            edits.removed = True
