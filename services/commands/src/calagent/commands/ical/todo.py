"""A task as a calendar object (contract §21): one VTODO, written, read and patched.

A task the assistant makes is written fresh (`render_todo`). A VTODO another app wrote is read
into a task (`parse_todo`) and written back by patching its text (`patch_todo`), as events are
(patch.py): the object is read again into a task (the baseline), and only the properties whose
modeled value differs between the baseline and the stored task are rewritten, keeping their
parameters. The component that changed gets SEQUENCE raised by one, LAST-MODIFIED and DTSTAMP;
everything else — alarms, RELATED-TO of subtasks, RRULE, CATEGORIES, X- properties — stays as
the object had it.

What a task has and RFC 5545 does not say (the minutes it needs, the shortest and longest piece,
whose hours it uses) is carried in X-CALAGENT- properties: ESTIMATED-DURATION is only a draft
(draft-ietf-calext-ical-tasks; RFC 9253 defines relations, not estimates) and no calendar app
reads it. They are written only where the user changed those values or the object is ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from icalendar import Calendar, Component, Todo, vDDDTypes, vDuration, vInt, vText
from icalendar.parser import Parameters

from calagent.commands.ical.parse import UnreadableObject, load_object, text_of
from calagent.commands.ical.patch import stamp_changed
from calagent.commands.ical.zones import utc_instant, written_like
from calagent.contracts.tasks import (
    CHUNK_MINUTES_DEFAULT,
    MAX_CHUNK_MINUTES_DEFAULT,
    TASK_MINUTES_MAX,
    TaskHours,
    TaskOut,
)

PRODID = "-//calagent//commands//EN"
X_MINUTES = "X-CALAGENT-DURATION"
X_CHUNK = "X-CALAGENT-CHUNK-MIN"
X_MAX_CHUNK = "X-CALAGENT-CHUNK-MAX"
X_HOURS = "X-CALAGENT-HOURS"
# The minutes of a task another app wrote without saying how long it takes: one piece.
UNSTATED_MINUTES = CHUNK_MINUTES_DEFAULT
PIECE_MINUTES = (15, 8 * 60)  # the bounds contracts.tasks gives a piece

# Our priorities 1 (high) … 4 on RFC 5545's 1 (highest) … 9 (§3.8.1.9: 1–4 high, 5 medium,
# 6–9 low, 0 undefined), written one way and read back the same.
_PRIORITY_OUT = {1: 1, 2: 3, 3: 5, 4: 9}
DEFAULT_PRIORITY = 3


def rfc_priority(priority: int) -> int:
    return _PRIORITY_OUT[priority]


def our_priority(value: int) -> int:
    """An RFC 5545 PRIORITY as ours: 0 (undefined) is our default, 1–2 high, 3–4 next, 5 medium,
    6–9 low."""
    if value <= 0 or value > 9:
        return DEFAULT_PRIORITY
    if value <= 2:
        return 1
    if value <= 4:
        return 2
    return 3 if value == 5 else 4


def is_todo(body: str) -> bool:
    """The object is a task: it holds a VTODO and no VEVENT."""
    try:
        parsed = load_object(body)
    except UnreadableObject:
        return False
    return bool(parsed.walk("VTODO")) and not parsed.walk("VEVENT")


def todo_of(parsed: Calendar) -> Component:
    found = [c for c in parsed.walk("VTODO") if "RECURRENCE-ID" not in c]
    if not found:
        raise UnreadableObject("no VTODO without RECURRENCE-ID")
    return found[0]


def _minutes(component: Component, name: str) -> int | None:
    """An X-CALAGENT- duration in minutes (icalendar reads an X- property as text)."""
    value = component.get(name)
    if value is None:
        return None
    raw = value.to_ical() if hasattr(value, "to_ical") else value
    try:
        # icalendar's from_ical carries no annotations.
        span = vDDDTypes.from_ical(raw.decode() if isinstance(raw, bytes) else str(raw))  # type: ignore[no-untyped-call]
    except (ValueError, TypeError):
        return None
    if not isinstance(span, timedelta):
        return None
    return int(span.total_seconds() // 60)


def _instant(component: Component, name: str, tz: ZoneInfo, *, day_end: bool) -> datetime | None:
    """A DUE or DTSTART as an instant; a DATE due is due by the end of that day, a DATE start
    begins at its start (on `tz`'s wall clock, as a floating time is)."""
    if name not in component:
        return None
    value = component.decoded(name)
    if isinstance(value, date) and not isinstance(value, datetime) and day_end:
        value = value + timedelta(days=1)
    return utc_instant(value, tz)


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


@dataclass(frozen=True)
class ReadTodo:
    task: TaskOut
    uid: str | None


def read_todo(component: Component, *, task_id: str, tz: ZoneInfo) -> ReadTodo:
    """The task a VTODO says, under `task_id`. What it does not say takes our defaults; values
    out of our bounds are brought within them (a task is stored only within them)."""
    due = _instant(component, "DUE", tz, day_end=True)
    earliest = _instant(component, "DTSTART", tz, day_end=False)
    if due is None and earliest is not None and "DURATION" in component:
        due = earliest + component.decoded("DURATION")  # RFC 5545 §3.6.2: DTSTART + DURATION
    if due is not None and earliest is not None and earliest >= due:
        earliest = None  # not before a time at or after its due says nothing we can place by
    status = str(component.get("STATUS", "")).strip().upper()
    done = status in ("COMPLETED", "CANCELLED")
    try:
        percent = _clamp(int(component.get("PERCENT-COMPLETE", 0)), 0, 100)
    except (TypeError, ValueError):
        percent = 0
    completed = component.decoded("COMPLETED") if "COMPLETED" in component else None
    chunk = _clamp(_minutes(component, X_CHUNK) or CHUNK_MINUTES_DEFAULT, *PIECE_MINUTES)
    max_chunk = _clamp(_minutes(component, X_MAX_CHUNK) or MAX_CHUNK_MINUTES_DEFAULT, chunk, PIECE_MINUTES[1])
    hours: TaskHours = "personal" if str(component.get(X_HOURS, "")).strip().lower() == "personal" else "work"
    try:
        priority = our_priority(int(component.get("PRIORITY", 0)))
    except (TypeError, ValueError):
        priority = DEFAULT_PRIORITY
    task = TaskOut(
        id=task_id,
        title=str(component.get("SUMMARY", "")).strip()[:200] or "(untitled)",
        duration_minutes=_clamp(_minutes(component, X_MINUTES) or UNSTATED_MINUTES, 1, TASK_MINUTES_MAX),
        due=due,
        earliest=earliest,
        priority=priority,
        chunk_minutes=chunk,
        max_chunk_minutes=max_chunk,
        hours=hours,
        status="done" if done else "open",
        percent=percent,
        completed_at=utc_instant(completed, tz) if isinstance(completed, date) else None,
    )
    return ReadTodo(task, text_of(component, "UID"))


def parse_todo(body: str, *, task_id: str, tz: ZoneInfo) -> ReadTodo:
    """The task one object holds (its first VTODO that is not an override)."""
    return read_todo(todo_of(load_object(body)), task_id=task_id, tz=tz)


# ---- writing -------------------------------------------------------------------------------------


def _utc(moment: datetime) -> vDDDTypes:
    return vDDDTypes(moment.astimezone(UTC))


def _duration(minutes: int) -> vDuration:
    return vDuration(timedelta(minutes=minutes))


def _status(task: TaskOut) -> str:
    if task.status == "done":
        return "COMPLETED"
    return "IN-PROCESS" if task.percent > 0 else "NEEDS-ACTION"


def render_todo(task: TaskOut, uid: str, stamp: datetime) -> str:
    """A task the assistant made, as a calendar object of its own."""
    item = Todo()
    item.add("uid", uid)
    item.add("dtstamp", stamp.astimezone(UTC))
    item.add("summary", task.title)
    if task.earliest is not None:
        item["DTSTART"] = _utc(task.earliest)
    if task.due is not None:
        item["DUE"] = _utc(task.due)
    item["PRIORITY"] = vInt(rfc_priority(task.priority))
    item["STATUS"] = vText(_status(task))
    if task.percent:
        item["PERCENT-COMPLETE"] = vInt(task.percent)
    if task.completed_at is not None:
        item["COMPLETED"] = _utc(task.completed_at)
    item[X_MINUTES] = _duration(task.duration_minutes)
    if task.chunk_minutes != CHUNK_MINUTES_DEFAULT:
        item[X_CHUNK] = _duration(task.chunk_minutes)
    if task.max_chunk_minutes != MAX_CHUNK_MINUTES_DEFAULT:
        item[X_MAX_CHUNK] = _duration(task.max_chunk_minutes)
    if task.hours != "work":
        item[X_HOURS] = vText(task.hours)
    cal = Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    cal.add_component(item)
    return bytes(cal.to_ical()).decode("utf-8")


Value = vText | vInt | vDuration | vDDDTypes


def _kept_params(component: Component, name: str, value: Value) -> Value:
    params = getattr(component.get(name), "params", None)
    if params:
        value.params = Parameters(params)
    return value


def _same_instant(a: datetime | None, b: datetime | None) -> bool:
    """Equal to the second: an object holds no fractions of one."""
    if a is None or b is None:
        return a is b
    return a.replace(microsecond=0) == b.replace(microsecond=0)


def _set(component: Component, name: str, value: Value | None) -> None:
    """`name` rewritten with `value` (its parameters kept), or removed when `value` is None."""
    if value is None:
        component.pop(name, None)
        return
    component[name] = _kept_params(component, name, value)


def _when(component: Component, name: str, moment: datetime | None, tz: ZoneInfo) -> None:
    if moment is None:
        component.pop(name, None)
        return
    old = component.get(name)
    if isinstance(getattr(old, "dt", None), datetime):
        component[name] = written_like(moment, old, tz, False)  # its TZID, UTC or floating form
    else:
        component[name] = _utc(moment)  # a DATE (or nothing) before: now a time, in UTC


def _patch(component: Component, task: TaskOut, base: TaskOut, tz: ZoneInfo) -> set[str]:
    """Rewrite the properties whose modeled value differs between `base` (what the component
    says) and `task` (what is stored now); the names of those rewritten (or removed)."""
    touched: set[str] = set()
    if task.title != base.title:
        _set(component, "SUMMARY", vText(task.title))
        touched.add("SUMMARY")
    if not _same_instant(task.due, base.due):
        component.pop("DURATION", None)  # DUE and DURATION exclude each other (§3.6.2)
        _when(component, "DUE", task.due, tz)
        touched |= {"DUE", "DURATION"}
    if not _same_instant(task.earliest, base.earliest):
        if "DURATION" in component and task.earliest is not None and task.due is not None:
            component.pop("DURATION", None)
            _when(component, "DUE", task.due, tz)
            touched |= {"DUE", "DURATION"}
        _when(component, "DTSTART", task.earliest, tz)
        touched.add("DTSTART")
    if task.priority != base.priority:
        _set(component, "PRIORITY", vInt(rfc_priority(task.priority)))
        touched.add("PRIORITY")
    if task.status != base.status or (task.status == "open" and (task.percent > 0) != (base.percent > 0)):
        _set(component, "STATUS", vText(_status(task)))
        touched.add("STATUS")
    if task.percent != base.percent:
        _set(component, "PERCENT-COMPLETE", vInt(task.percent))
        touched.add("PERCENT-COMPLETE")
    if not _same_instant(task.completed_at, base.completed_at):
        _set(component, "COMPLETED", None if task.completed_at is None else _utc(task.completed_at))
        touched.add("COMPLETED")
    for name, ours, theirs in (
        (X_MINUTES, task.duration_minutes, base.duration_minutes),
        (X_CHUNK, task.chunk_minutes, base.chunk_minutes),
        (X_MAX_CHUNK, task.max_chunk_minutes, base.max_chunk_minutes),
    ):
        if ours != theirs:
            _set(component, name, _duration(ours))
            touched.add(name)
    if task.hours != base.hours:
        _set(component, X_HOURS, vText(task.hours))
        touched.add(X_HOURS)
    return touched


# ---- splicing: the rewritten properties put into the object's own text -------------------------
#
# icalendar writes a whole object its own way (properties sorted, parameters quoted only where
# needed, lines folded at its own points). The properties nobody changed are kept as the app
# wrote them by taking the object's text line by line and replacing only the content lines of the
# properties rewritten; their new lines are icalendar's.


def _logical_lines(body: str) -> tuple[list[str], str]:
    """The object's content lines, each with its folded continuation lines as written, and the
    line break it uses."""
    newline = "\r\n" if "\r\n" in body else "\n"
    logical: list[str] = []
    for physical in body.split(newline):
        if physical[:1] in (" ", "\t") and logical:
            logical[-1] += newline + physical
        else:
            logical.append(physical)
    return logical, newline


def _name(line: str) -> str:
    head = line.split(":", 1)[0].split(";", 1)[0]
    return head.strip().upper()


def _todo_span(lines: list[str]) -> tuple[int, int] | None:
    """Where the VTODO `todo_of` reads lies: the indexes of its BEGIN and END lines."""
    depth, begin, own = 0, -1, False
    for index, line in enumerate(lines):
        name = _name(line)
        if name == "BEGIN":
            depth += 1
            if depth == 2 and line.split(":", 1)[1].strip().upper() == "VTODO":
                begin, own = index, False
        elif name == "END":
            if depth == 2 and begin >= 0 and line.split(":", 1)[1].strip().upper() == "VTODO":
                if not own:
                    return begin, index
                begin = -1
            depth -= 1
        elif depth == 2 and begin >= 0 and name == "RECURRENCE-ID":
            own = True  # an override: not the task itself
    return None


def _spliced(body: str, component: Component, touched: set[str]) -> str | None:
    """`body` with the `touched` properties of its VTODO replaced by how `component` has them
    now; None when the object's text cannot be followed (the caller writes it whole)."""
    lines, newline = _logical_lines(body)
    span = _todo_span(lines)
    if span is None:
        return None
    begin, end = span
    fresh: dict[str, list[str]] = {}
    for name in touched:
        value = component.get(name)
        values = value if isinstance(value, list) else [] if value is None else [value]
        fresh[name] = [
            bytes(component.content_line(name, item).to_ical()).decode("utf-8").replace("\r\n", newline)
            for item in values
        ]
    out: list[str] = lines[: begin + 1]
    depth = 0
    for line in lines[begin + 1 : end]:
        name = _name(line)
        if name == "BEGIN":
            depth += 1
        elif name == "END":
            depth -= 1
        elif depth == 0 and name in fresh:
            out.extend(fresh.pop(name))  # in the place of its first line; any others dropped
            continue
        elif depth == 0 and name in touched:
            continue
        if depth == 1 and name == "BEGIN" and fresh:
            # Properties the object did not have go before its first alarm.
            out.extend(line for new in fresh.values() for line in new)
            fresh.clear()
        out.append(line)
    out.extend(line for new in fresh.values() for line in new)
    out.extend(lines[end:])
    return newline.join(out)


@dataclass(frozen=True)
class PatchedTodo:
    changed: bool
    text: str  # the original text, byte for byte, when nothing changed


def patch_todo(body: str, task: TaskOut, stamp: datetime, tz: ZoneInfo) -> PatchedTodo:
    """The object `body` with `task` written into its VTODO, changing only what differs from
    what the object says; `tz` reads its floating and DATE values, as `parse_todo` did."""
    parsed = load_object(body)
    component = todo_of(parsed)
    base = read_todo(component, task_id=task.id, tz=tz).task
    touched = _patch(component, task, base, tz)
    if not touched:
        return PatchedTodo(False, body)
    stamp_changed(component, stamp)
    text = _spliced(body, component, touched | {"SEQUENCE", "LAST-MODIFIED", "DTSTAMP"})
    return PatchedTodo(
        True, text if text is not None else bytes(parsed.to_ical(sorted=False)).decode("utf-8")
    )


def todo_body(task: TaskOut, uid: str, ical: str | None, stamp: datetime, tz: ZoneInfo) -> str:
    """The object to send for a task: its kept object patched, else one written fresh (also
    when the kept one cannot be read any more)."""
    if ical:
        try:
            return patch_todo(ical, task, stamp, tz).text
        except (UnreadableObject, ValueError, KeyError):
            pass
    return render_todo(task, uid, stamp)


def todo_fingerprint(task: TaskOut) -> tuple[object, ...]:
    """What a task app shows of a task, to tell whether two versions say the same."""
    seconds = {
        name: moment.replace(microsecond=0)
        for name in ("due", "earliest", "completed_at")
        if isinstance(moment := getattr(task, name), datetime)
    }
    shown = task.model_copy(update=seconds)
    return tuple(shown.model_dump(exclude={"id", "at_risk", "missing_minutes"}).values())
