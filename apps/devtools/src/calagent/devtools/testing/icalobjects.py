"""Calendar objects as a user's calendar app writes them, and how a test compares two versions.

`property_lines` gives each property of a component as icalendar writes it (name, parameters,
value): two versions of an object keep a property exactly when its lines are equal. `rich_events`
is a hypothesis strategy of objects carrying what the assistant does not model (attendees,
organizer, classes, attachments, X- properties with odd values, alarms) beside what it does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st
from icalendar import Calendar, Component

# Rewritten by any change the assistant writes back.
STAMPS = frozenset({"SEQUENCE", "LAST-MODIFIED", "DTSTAMP"})


def property_lines(component: Component, without: Iterable[str] = ()) -> dict[str, list[str]]:
    """The component's own properties (not its alarms), name → sorted content lines."""
    skip = {n.upper() for n in without}
    found: dict[str, list[str]] = {}
    for name, value in component.items():
        if name.upper() in skip:
            continue
        for item in value if isinstance(value, list) else [value]:
            found.setdefault(name.upper(), []).append(str(component.content_line(name, item)))
    return {k: sorted(v) for k, v in found.items()}


def sequence(component: Component) -> int:
    return int(str(component.get("SEQUENCE", 0)))


def alarm_lines(component: Component) -> list[dict[str, list[str]]]:
    return [property_lines(a) for a in component.subcomponents if a.name == "VALARM"]


def vevents(body: str | bytes) -> dict[str, Component]:
    """The object's VEVENTs by RECURRENCE-ID ('' for the master or single event)."""
    parsed = Calendar.from_ical(body)
    found: dict[str, Component] = {}
    for component in parsed.walk("VEVENT"):
        rid = component.get("RECURRENCE-ID")
        found[rid.dt.astimezone(UTC).isoformat() if rid is not None else ""] = component
    return found


# ---- generated objects ---------------------------------------------------------------------------

_WORDS = (
    st.text(
        alphabet=st.characters(
            whitelist_categories=("Lu", "Ll", "Lo", "Nd", "Zs"),
            whitelist_characters=",;:\\\"'&=-_/()!?",
            max_codepoint=0x9FFF,
        ),
        min_size=1,
        max_size=40,
    )
    .map(str.strip)
    .filter(bool)
    # icalendar reads an escaped backslash followed by N (a literal "\\N" in the text) as a newline:
    # such text does not survive any icalendar round trip, patched or not.
    .filter(lambda s: "\\n" not in s.lower())
)
# icalendar writes a parameter value with a space at either end, or with "=", unquoted and reads
# it back changed: such values do not survive any icalendar round trip, patched or not.
_PARAM = st.text(alphabet="abcdefghij ,;:-", min_size=1, max_size=12).map(str.strip).filter(bool)
_X_NAME = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ-", min_size=1, max_size=12).map(lambda s: f"X-{s}")
_ZONES = ("Asia/Shanghai", "Europe/Berlin", "America/New_York", "UTC")


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\n", "\\n")


def _quote(value: str) -> str:
    value = value.replace('"', "'")  # no parameter value may hold a double quote (RFC 5545 §3.1)
    return f'"{value}"' if any(c in value for c in ",;:") else value


def _sequence(draw: st.DrawFn) -> list[str]:
    """A SEQUENCE, or none (a first version)."""
    return [f"SEQUENCE:{draw(st.integers(min_value=0, max_value=40))}"] if draw(st.booleans()) else []


def _common_optional(draw: st.DrawFn) -> dict[str, Callable[[], str]]:
    """The optional properties events and tasks both carry, each with its maker."""
    return {
        "DESCRIPTION": lambda: f"DESCRIPTION:{_escape(draw(_WORDS))}\\n{_escape(draw(_WORDS))}",
        "CATEGORIES": lambda: f"CATEGORIES:{_escape(draw(_WORDS))},{_escape(draw(_WORDS))}",
        "CREATED": lambda: "CREATED:20260801T080000Z",
        "PRIORITY": lambda: f"PRIORITY:{draw(st.integers(0, 9))}",
    }


def _some_of(draw: st.DrawFn, optional: dict[str, Callable[[], str]]) -> list[str]:
    """Any subset of the optional properties, each drawn by its own maker."""
    return [optional[name]() for name in draw(st.sets(st.sampled_from(sorted(optional))))]


def _x_properties(draw: st.DrawFn) -> list[str]:
    """Up to three X- properties, some with a parameter whose value needs quoting."""
    lines: list[str] = []
    for name in draw(st.sets(_X_NAME, max_size=3)):
        if draw(st.booleans()):
            lines.append(f'{name};X-P="{draw(_PARAM)}":{_escape(draw(_WORDS))}')
        else:
            lines.append(f"{name}:{_escape(draw(_WORDS))}")
    return lines


@st.composite
def rich_events(draw: st.DrawFn, uid: str) -> str:
    """One single event in a calendar object, between 2026-10-01 and 2026-10-20, 09:00–17:00 in
    a zone, carrying a random set of properties. Lines are unfolded; the server folds them."""
    zone = draw(st.sampled_from(_ZONES))
    day = draw(st.integers(min_value=1, max_value=20))
    hour = draw(st.integers(min_value=9, max_value=16))
    minutes = draw(st.sampled_from([30, 45, 60, 90, 120]))
    start = datetime(2026, 10, day, hour, 0)
    end = start + timedelta(minutes=minutes)
    form = draw(st.sampled_from(["tzid", "utc"] if zone != "UTC" else ["utc"]))
    lines = [f"UID:{uid}", "DTSTAMP:20260901T080000Z"]
    if form == "tzid":
        lines.append(f"DTSTART;TZID={zone}:{start:%Y%m%dT%H%M%S}")
    else:
        lines.append(f"DTSTART:{start:%Y%m%dT%H%M%S}Z")
    if draw(st.booleans()):
        lines.append(f"DURATION:PT{minutes}M")
    elif form == "tzid":
        lines.append(f"DTEND;TZID={zone}:{end:%Y%m%dT%H%M%S}")
    else:
        lines.append(f"DTEND:{end:%Y%m%dT%H%M%S}Z")
    lines.append(f"SUMMARY:{_escape(draw(_WORDS))}")
    lines += _sequence(draw)
    optional: dict[str, Callable[[], str]] = {
        **_common_optional(draw),
        "LOCATION": lambda: f"LOCATION:{_escape(draw(_WORDS))}",
        "URL": lambda: f"URL:https://example.com/{draw(st.integers(0, 999))}?a=1&b={draw(st.integers(0, 9))}",
        "CLASS": lambda: f"CLASS:{draw(st.sampled_from(['PUBLIC', 'PRIVATE', 'CONFIDENTIAL']))}",
        "TRANSP": lambda: f"TRANSP:{draw(st.sampled_from(['OPAQUE', 'TRANSPARENT']))}",
        "STATUS": lambda: f"STATUS:{draw(st.sampled_from(['CONFIRMED', 'TENTATIVE']))}",
        "ORGANIZER": lambda: f"ORGANIZER;CN={_quote(draw(_WORDS))}:mailto:boss@example.com",
    }
    lines += _some_of(draw, optional)
    for i in range(draw(st.integers(min_value=0, max_value=3))):
        status = draw(st.sampled_from(["ACCEPTED", "DECLINED", "NEEDS-ACTION", "TENTATIVE"]))
        lines.append(
            f"ATTENDEE;CN={_quote(draw(_WORDS))};PARTSTAT={status};RSVP=TRUE:mailto:p{i}@example.com"
        )
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        lines.append(
            f"ATTACH;FMTTYPE=application/pdf:https://files.example.com/{draw(st.integers(0, 99))}.pdf"
        )
    lines += _x_properties(draw)
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        if draw(st.booleans()):
            before = draw(st.sampled_from([5, 10, 15, 30, 60, 1440]))
            lines += ["BEGIN:VALARM", "ACTION:DISPLAY", f"TRIGGER:-PT{before}M"]
            lines += [f"DESCRIPTION:{_escape(draw(_WORDS))}", "END:VALARM"]
        else:
            lines += ["BEGIN:VALARM", "ACTION:AUDIO", "TRIGGER;RELATED=END:PT0S", "END:VALARM"]
    body = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//fuzz//calendar app//EN"]
    body += ["BEGIN:VEVENT", *lines, "END:VEVENT", "END:VCALENDAR"]
    return "\r\n".join(body) + "\r\n"


def vtodos(body: str | bytes) -> list[Component]:
    return list(Calendar.from_ical(body).walk("VTODO"))


@st.composite
def rich_todos(draw: st.DrawFn, uid: str) -> str:
    """One task in a calendar object as a task app writes it: a due in a zone, UTC or as a date,
    maybe a start, a priority on RFC 5545's scale, a status, and what the assistant does not
    model (subtask relations, a rule, categories, X- properties with odd values, alarms)."""
    zone = draw(st.sampled_from(_ZONES))
    due = datetime(2026, 10, draw(st.integers(min_value=2, max_value=20)), draw(st.integers(9, 17)), 0)
    lines = [f"UID:{uid}", "DTSTAMP:20260901T080000Z", f"SUMMARY:{_escape(draw(_WORDS))}"]
    form = draw(
        st.sampled_from(["tzid", "utc", "date", "none"] if zone != "UTC" else ["utc", "date", "none"])
    )
    if form == "tzid":
        lines.append(f"DUE;TZID={zone}:{due:%Y%m%dT%H%M%S}")
    elif form == "utc":
        lines.append(f"DUE:{due:%Y%m%dT%H%M%S}Z")
    elif form == "date":
        lines.append(f"DUE;VALUE=DATE:{due:%Y%m%d}")
    if form in ("tzid", "utc") and draw(st.booleans()):
        lines.append(f"DTSTART:{due - timedelta(days=1):%Y%m%dT%H%M%S}Z")
    status = draw(st.sampled_from(["", "NEEDS-ACTION", "IN-PROCESS"]))
    if status:
        lines.append(f"STATUS:{status}")
    if status == "IN-PROCESS":
        lines.append(f"PERCENT-COMPLETE:{draw(st.integers(1, 99))}")
    lines += _sequence(draw)
    optional: dict[str, Callable[[], str]] = {
        **_common_optional(draw),
        "CLASS": lambda: f"CLASS:{draw(st.sampled_from(['PUBLIC', 'PRIVATE']))}",
        "RRULE": lambda: "RRULE:FREQ=WEEKLY;COUNT=4",
        "URL": lambda: f"URL:https://example.com/{draw(st.integers(0, 999))}?a=1&b=2",
    }
    lines += _some_of(draw, optional)
    for i in range(draw(st.integers(min_value=0, max_value=2))):
        lines.append(f"RELATED-TO;RELTYPE=CHILD:sub-{i}-{uid}")
    if draw(st.booleans()):
        lines.append("RELATED-TO:parent-of-" + uid)
    lines += _x_properties(draw)
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        before = draw(st.sampled_from([5, 30, 60, 1440]))
        lines += ["BEGIN:VALARM", "ACTION:DISPLAY", f"TRIGGER;RELATED=END:-PT{before}M"]
        lines += [f"DESCRIPTION:{_escape(draw(_WORDS))}", "END:VALARM"]
    body = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//fuzz//task app//EN"]
    body += ["BEGIN:VTODO", *lines, "END:VTODO", "END:VCALENDAR"]
    return "\r\n".join(body) + "\r\n"
