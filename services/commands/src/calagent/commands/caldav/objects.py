"""Calendar objects ↔ stored rows.

One object per event or series: a single event is one VEVENT, a series its master VEVENT (RRULE,
EXDATE) plus one VEVENT per override (RECURRENCE-ID), all with one UID.

Reading (`parse_resource`) turns an object into the rows the queries, free-time search and
conflict checks understand: the values the assistant models (times, title, place, notes, address,
rule, exclusions, the reminder), the UID, and on the row that owns the object its text.

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
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from icalendar import (
    Alarm,
    Calendar,
    Component,
    vCalAddress,
    vDDDLists,
    vDDDTypes,
    vDuration,
    vRecur,
    vText,
    vUri,
)
from icalendar.parser import Parameters

from calagent.commands.domain.model import Event
from calagent.commands.domain.people import normal_address
from calagent.commands.domain.series import STAMP, localise
from calagent.contracts.people import EMAIL_MAX, Attendee

DEFAULT_LENGTH = timedelta(hours=1)
UTC_ZONE = ZoneInfo("UTC")
ICS_UNTIL = "%Y%m%dT%H%M%S"
# Rewritten by a change of time, rule or title; never copied from a master into a new override.
_SERIES_ONLY = ("RRULE", "RDATE", "EXRULE", "EXDATE", "RECURRENCE-ID")


class UnreadableObject(ValueError):
    """The server's object is not an event this service can hold (a task, a broken file)."""


# ---- reading ------------------------------------------------------------------------------------


def _zone_key(value: datetime, fallback: ZoneInfo) -> str:
    tz = value.tzinfo
    if isinstance(tz, ZoneInfo):
        return tz.key
    name = getattr(tz, "zone", None) or getattr(tz, "key", None)
    if isinstance(name, str):
        try:
            return ZoneInfo(name).key
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return fallback.key if value.tzinfo is None else "UTC"


def _instant(value: date | datetime, tz: ZoneInfo) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:  # floating time: the user's wall clock
            return localise(value, tz).astimezone(UTC)
        return value.astimezone(UTC)
    return localise(datetime.combine(value, time()), tz).astimezone(UTC)


def _span(component: Component, tz: ZoneInfo) -> tuple[datetime, datetime, bool]:
    raw_start = component.decoded("DTSTART")
    all_day = not isinstance(raw_start, datetime)
    start = _instant(raw_start, tz)
    if "DTEND" in component:
        end = _instant(component.decoded("DTEND"), tz)
    elif "DURATION" in component:
        end = start + component.decoded("DURATION")
    else:
        end = start + (timedelta(days=1) if all_day else DEFAULT_LENGTH)
    if end <= start:
        end = start + (timedelta(days=1) if all_day else DEFAULT_LENGTH)
    return start, end, all_day


def _reminder_alarm(component: Component) -> Component | None:
    """The alarm that is the event's reminder: the first one some minutes before the start."""
    for alarm in component.subcomponents:
        if alarm.name != "VALARM" or "TRIGGER" not in alarm:
            continue
        related = getattr(alarm["TRIGGER"], "params", {}).get("RELATED", "START")
        if str(related).upper() != "START":
            continue
        value = alarm.decoded("TRIGGER")
        if isinstance(value, timedelta) and value <= timedelta(0):
            return alarm
    return None


def _reminder(component: Component) -> int | None:
    alarm = _reminder_alarm(component)
    if alarm is None:
        return None
    trigger = alarm.decoded("TRIGGER")
    assert isinstance(trigger, timedelta)
    return int(-trigger.total_seconds() // 60)


def _rule(component: Component, tz: ZoneInfo) -> str | None:
    if "RRULE" not in component:
        return None
    parts = []
    raw = component["RRULE"].to_ical()
    for part in (raw.decode() if isinstance(raw, bytes) else str(raw)).split(";"):
        name, _, value = part.partition("=")
        if name.upper() == "UNTIL" and value.endswith("Z"):
            # The series engine reads UNTIL on the series' wall clock: a UTC UNTIL is converted.
            instant = datetime.strptime(value, STAMP).replace(tzinfo=UTC)
            value = instant.astimezone(tz).strftime("%Y%m%dT%H%M%S")
        parts.append(f"{name.upper()}={value}")
    return ";".join(parts)


def ics_rule(rule_text: str, tz: ZoneInfo, all_day: bool) -> vRecur:
    """The stored rule as RFC 5545 wants it next to a TZID (or DATE) start: UNTIL in UTC (or as
    a DATE). The series engine reads UNTIL on the zone's wall clock (a bare date is its last
    second), so the same instant is written here."""
    parts = []
    for part in rule_text.removeprefix("RRULE:").split(";"):
        name, _, value = part.partition("=")
        if name.upper() == "UNTIL":
            local = value.rstrip("Z")
            if "T" not in local:
                local += "T235959"
            try:
                naive = datetime.strptime(local, ICS_UNTIL)
            except ValueError:
                naive = None
            if naive is not None:
                until = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
                value = naive.strftime("%Y%m%d") if all_day else until.strftime(f"{ICS_UNTIL}Z")
        parts.append(f"{name}={value}")
    rule: vRecur = vRecur.from_ical(";".join(parts))
    return rule


def _exdates(component: Component, tz: ZoneInfo) -> tuple[datetime, ...]:
    found: list[datetime] = []
    raw = component.get("EXDATE")
    if raw is None:
        return ()
    for entry in raw if isinstance(raw, list) else [raw]:
        for item in entry.dts:
            found.append(_instant(item.dt, tz))
    return tuple(sorted(set(found)))


def _text(component: Component, name: str) -> str | None:
    value = component.get(name)
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None:
        return None
    return str(value) or None


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


def override_id(master_id: str, recurrence_id: datetime) -> str:
    """The same override of the same slot keeps its id from one sync to the next."""
    seed = f"{master_id}|{recurrence_id.astimezone(UTC).isoformat()}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def _load(body: str) -> Calendar:
    try:
        return Calendar.from_ical(body)
    except ValueError as exc:
        raise UnreadableObject(f"not iCalendar: {exc}") from exc


def _master_component(parsed: Calendar) -> Component:
    masters = [c for c in parsed.walk("VEVENT") if "RECURRENCE-ID" not in c]
    if not masters:
        raise UnreadableObject("no VEVENT without RECURRENCE-ID")
    return masters[0]


def _series_zone(component: Component, fallback: ZoneInfo) -> ZoneInfo:
    raw_start = component.decoded("DTSTART")
    return ZoneInfo(_zone_key(raw_start, fallback) if isinstance(raw_start, datetime) else fallback.key)


def _modeled(component: Component, tz: ZoneInfo) -> dict[str, object]:
    start, end, all_day = _span(component, tz)
    return {
        "title": str(component.get("SUMMARY", ""))[:200] or "(untitled)",
        "start": start,
        "end": end,
        "all_day": all_day,
        "reminder_minutes": _reminder(component),
        "location": _text(component, "LOCATION"),
        "notes": _text(component, "DESCRIPTION"),
        "url": _text(component, "URL"),
        "attendees": attendees_of(component),
        "organizer": _address(component.get("ORGANIZER")),
    }


def _rows(
    parsed: Calendar, body: str, *, master_id: str, user_id: str, calendar: str, fallback_tz: ZoneInfo
) -> list[Event]:
    master_component = _master_component(parsed)
    tz = _series_zone(master_component, fallback_tz)
    uid = _text(master_component, "UID")
    rule = _rule(master_component, tz)
    exdates = list(_exdates(master_component, tz))
    overrides: list[Event] = []
    for component in parsed.walk("VEVENT"):
        if "RECURRENCE-ID" not in component or rule is None:
            continue
        slot = _instant(component.decoded("RECURRENCE-ID"), tz)
        if str(component.get("STATUS", "")).upper() == "CANCELLED":
            exdates.append(slot)
            continue
        overrides.append(
            Event(
                id=override_id(master_id, slot),
                user_id=user_id,
                calendar=calendar,
                tz=tz.key,
                series_id=master_id,
                recurrence_id=slot,
                uid=uid,
                **_modeled(component, tz),  # type: ignore[arg-type]
            )
        )
    master = Event(
        id=master_id,
        user_id=user_id,
        calendar=calendar,
        tz=tz.key,
        rrule=rule,
        exdates=tuple(sorted(set(exdates))),
        uid=uid,
        ical=body,
        **_modeled(master_component, tz),  # type: ignore[arg-type]
    )
    return [master, *overrides]


def parse_resource(
    body: str, *, master_id: str, user_id: str, calendar: str, fallback_tz: ZoneInfo
) -> list[Event]:
    """The rows of one object: its master (or single event) under `master_id`, carrying the
    object's text and UID, and overrides with ids derived from it. Cancelled overrides become
    EXDATEs, as a calendar app shows them."""
    return _rows(
        _load(body), body, master_id=master_id, user_id=user_id, calendar=calendar, fallback_tz=fallback_tz
    )


def fingerprint(rows: Sequence[Event]) -> tuple[tuple[object, ...], ...]:
    """What a calendar app shows of a resource, to tell whether two versions say the same."""
    return tuple(
        sorted(
            (
                e.recurrence_id.astimezone(UTC).isoformat() if e.recurrence_id else "",
                e.title,
                e.start.astimezone(UTC).isoformat(),
                e.end.astimezone(UTC).isoformat(),
                e.all_day,
                e.rrule or "",
                tuple(d.astimezone(UTC).isoformat() for d in e.exdates),
                e.reminder_minutes,
                e.location or "",
                e.notes or "",
                e.url or "",
                tuple((normal_address(a.email), a.status) for a in e.attendees),
                normal_address(e.organizer or ""),
            )
            for e in rows
        )
    )


# ---- writing back: patch what changed, keep the rest --------------------------------------------


@dataclass(frozen=True)
class Patched:
    calendar: Calendar
    changed: bool
    text: str  # the original text, byte for byte, when nothing changed


def _zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name) if name else UTC_ZONE
    except (ZoneInfoNotFoundError, ValueError):
        return UTC_ZONE


def _days(start: datetime, end: datetime) -> int:
    """Whole days of an all-day event: its bounds are local midnights, so a DST change in between
    makes the span an hour longer or shorter than N × 24 h."""
    return max(1, round((end - start) / timedelta(days=1)))


def _moment(instant: datetime, like: object, tz: ZoneInfo, all_day: bool) -> vDDDTypes:
    """`instant` written the way `like` (the property it replaces, or the start's) was: a DATE,
    a time in the same TZID, UTC, or floating wall clock; `tz` for a form `like` cannot give."""
    old = getattr(like, "dt", None)
    params = Parameters(getattr(like, "params", {}) or {})
    value: date | datetime
    if all_day:
        value = instant.astimezone(tz).date()
        params.pop("TZID", None)
        params["VALUE"] = "DATE"
    else:
        params.pop("VALUE", None)
        if isinstance(old, datetime) and old.tzinfo is not None and "TZID" in params:
            value = instant.astimezone(old.tzinfo)
        elif isinstance(old, datetime) and old.tzinfo is not None:
            value = instant.astimezone(UTC)
        elif isinstance(old, datetime):
            value = instant.astimezone(tz).replace(tzinfo=None)
        else:
            value = instant.astimezone(tz)
            if tz.key != "UTC":
                params["TZID"] = tz.key
    prop = vDDDTypes(value)
    prop.params = params
    return prop


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
        component["DTSTART"] = _moment(row.start, old_start, tz, row.all_day)
    length = timedelta(days=_days(row.start, row.end)) if row.all_day else row.end - row.start
    base_length = timedelta(days=_days(base.start, base.end)) if base.all_day else base.end - base.start
    if "DTEND" in component:
        if row.end != base.end or row.all_day != base.all_day:
            end = row.start + length if row.all_day else row.end
            component["DTEND"] = _moment(end, component["DTEND"], tz, row.all_day)
    elif "DURATION" in component:
        if length != base_length:
            duration = vDuration(length)
            duration.params = Parameters(component["DURATION"].params)
            component["DURATION"] = duration
    elif length != (timedelta(days=1) if row.all_day else DEFAULT_LENGTH):
        component["DTEND"] = _moment(row.start + length, old_start, tz, row.all_day)


def _set_reminder(component: Component, row: Event) -> None:
    alarm = _reminder_alarm(component)
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


def _set_attendees(component: Component, wanted: Sequence[Attendee]) -> None:
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


def _people_differ(row: Event, base: Event) -> bool:
    def key(people: Sequence[Attendee]) -> list[tuple[str, str | None, str]]:
        return sorted((normal_address(a.email), a.name, a.status) for a in people)

    return key(row.attendees) != key(base.attendees)


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
    if _people_differ(row, base):
        _set_attendees(component, row.attendees)
        changed = True
    if normal_address(row.organizer or "") != normal_address(base.organizer or ""):
        old = component.pop("ORGANIZER", None)
        if row.organizer is not None:
            component["ORGANIZER"] = organizer_property(row.organizer, old)
        changed = True
    return changed


def _with_series_people(row: Event, master: Event) -> Event:
    if row.attendees or row.organizer:
        return row
    return row.evolve(attendees=master.attendees, organizer=master.organizer)


def _set_exdates(component: Component, wanted: Sequence[datetime], tz: ZoneInfo, all_day: bool) -> None:
    like = component.get("EXDATE")
    if isinstance(like, list):
        like = like[0] if like else None
    form = component["DTSTART"]
    component.pop("EXDATE", None)
    if not wanted:
        return
    moments = [_moment(d, form, tz, all_day) for d in sorted(wanted)]
    values = vDDDLists([m.dt for m in moments])
    values.params = Parameters(moments[0].params)
    if like is not None:
        values.params.update({k: v for k, v in like.params.items() if k not in ("TZID", "VALUE")})
    component["EXDATE"] = values


def _stamp(component: Component, stamp: datetime, sequence: int | None = None) -> None:
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


def patch_object(original: str, rows: Sequence[Event], uid: str, stamp: datetime) -> Patched:
    """The object `original` with the stored `rows` of its resource written into it (module
    docstring). `rows` hold the row that owns the object (no `series_id`) and its overrides."""
    parsed = _load(original)
    missing_before = parsed.get_missing_tzids()
    owner = next(r for r in rows if r.series_id is None)
    baseline = _rows(
        parsed,
        original,
        master_id=owner.id,
        user_id=owner.user_id,
        calendar=owner.calendar,
        fallback_tz=_zone(owner.tz),
    )
    base_master, base_overrides = baseline[0], baseline[1:]
    tz = _zone(base_master.tz)
    master = _master_component(parsed)
    template = copy.deepcopy(master)
    changed: dict[int, Component] = {}
    added: list[Component] = []
    removed = False

    if _patch(master, owner, base_master, tz):
        changed[id(master)] = master
    if not _same_rule(owner.rrule, base_master.rrule, tz, owner.all_day):
        master.pop("RRULE", None)
        if owner.rrule is not None:
            master["RRULE"] = ics_rule(owner.rrule, tz, owner.all_day)
        changed[id(master)] = master
    by_slot: dict[datetime, Component] = {}
    cancelled: dict[datetime, Component] = {}
    if base_master.rrule is not None:
        for component in parsed.walk("VEVENT"):
            if "RECURRENCE-ID" in component:
                slot = _instant(component.decoded("RECURRENCE-ID"), tz)
                if str(component.get("STATUS", "")).upper() == "CANCELLED":
                    cancelled[slot] = component
                else:
                    by_slot[slot] = component
    # A cancelled occurrence the rows still exclude keeps its component; EXDATE says the rest.
    kept_cancelled = {s for s in cancelled if s in owner.exdates}
    written = _exdates(master, tz)
    wanted = sorted(set(owner.exdates) - (kept_cancelled - set(written)))
    if tuple(wanted) != written:
        _set_exdates(master, wanted, tz, owner.all_day)
        changed[id(master)] = master
    for slot, component in cancelled.items():
        if slot not in kept_cancelled:
            _remove(parsed, component)
            removed = True

    base_by_id = {b.id: b for b in base_overrides}
    base_by_slot = {b.recurrence_id: b for b in base_overrides if b.recurrence_id is not None}
    used: set[str] = set()
    for row in rows:
        if row.series_id is None or row.recurrence_id is None:
            continue
        base = base_by_id.get(row.id) or base_by_slot.get(row.recurrence_id)
        if base is not None and base.id not in used and base.recurrence_id in by_slot:
            used.add(base.id)
            component = by_slot[base.recurrence_id]
            edited = _patch(component, row, base, tz)
            if row.recurrence_id != base.recurrence_id:
                component["RECURRENCE-ID"] = _moment(
                    row.recurrence_id, component["RECURRENCE-ID"], tz, base_master.all_day
                )
                edited = True
            if edited:
                changed[id(component)] = component
            continue
        # A new override: the master as the user's app wrote it, for this one occurrence.
        fresh = copy.deepcopy(template)
        for name in _SERIES_ONLY:
            fresh.pop(name, None)
        fresh["RECURRENCE-ID"] = _moment(row.recurrence_id, template["DTSTART"], tz, base_master.all_day)
        # An override row that names no people is the series' meeting with the series' people.
        _patch(fresh, _with_series_people(row, base_master), base_master, tz)
        added.append(fresh)
    for base in base_overrides:
        if base.id not in used and base.recurrence_id in by_slot:
            _remove(parsed, by_slot[base.recurrence_id])
            removed = True

    if _text(master, "UID") != uid:
        # A series split from another is a new event: every component takes its UID.
        for component in [*parsed.walk("VEVENT"), *added]:
            component["UID"] = vText(uid)
            if all(component is not a for a in added):
                changed[id(component)] = component
    if not changed and not added and not removed:
        return Patched(parsed, False, original)
    for component in changed.values():
        _stamp(component, stamp)
    sequence = int(master.get("SEQUENCE", 0))
    for component in added:
        _stamp(component, stamp, sequence)
        parsed.add_component(component)
    if parsed.get_missing_tzids() - missing_before:
        # A time now written in a zone the object did not use yet (an all-day event given a time).
        parsed.add_missing_timezones(
            first_date=date(min(r.start for r in rows).year - 1, 1, 1),
            last_date=date(max(r.end for r in rows).year + 20, 1, 1),
        )
    return Patched(parsed, True, bytes(parsed.to_ical()).decode("utf-8"))
