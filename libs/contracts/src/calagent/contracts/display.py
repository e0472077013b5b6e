"""How dates are shown to people and to the model: always with the weekday; the zone for the
model always, for a person only when the time is shown in a zone other than their own.

Models get weekdays wrong and users must see which day was meant (invariant 13), so every
receipt and tool result goes through these functions. A date outside the current year carries
its year, and a clock time that the zone's DST change makes ambiguous (or a span across such a
change) carries its UTC offset: "01:30–01:30" is not something a person can act on.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Literal

Lang = Literal["zh", "en"]

WEEKDAYS_ZH = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
WEEKDAYS_EN = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS_EN = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def weekday_name(day: date, lang: Lang) -> str:
    return (WEEKDAYS_ZH if lang == "zh" else WEEKDAYS_EN)[day.weekday()]


def format_day(day: date, lang: Lang, today: date | None = None) -> str:
    """`周三 9月30日` / `Wed Sep 30`; `周五 2027年1月1日` / `Fri Jan 1, 2027` when `today` is in
    another year."""
    with_year = today is not None and day.year != today.year
    if lang == "zh":
        year = f"{day.year}年" if with_year else ""
        return f"{weekday_name(day, lang)} {year}{day.month}月{day.day}日"
    year = f", {day.year}" if with_year else ""
    return f"{weekday_name(day, lang)} {MONTHS_EN[day.month - 1]} {day.day}{year}"


def _offset(at: datetime) -> str:
    raw = at.strftime("%z")  # "+0800"
    return f"UTC{raw[:3]}:{raw[3:]}" if raw else ""


def is_ambiguous_local_time(at: datetime) -> bool:
    """True when the wall-clock time of `at` occurs twice in its zone (a DST fall-back)."""
    if at.tzinfo is None:
        return False
    other = at.replace(fold=1 - at.fold)
    return other.utcoffset() != at.utcoffset()


def _clock(at: datetime, with_offset: bool) -> str:
    return f"{at:%H:%M} ({_offset(at)})" if with_offset else f"{at:%H:%M}"


def _zone(tz: str | None) -> str:
    return f" ({tz})" if tz else ""


def format_moment(at: datetime, tz: str | None, lang: Lang, today: date | None = None) -> str:
    """`周三 9月30日 15:00 (Asia/Shanghai)`; `at` must already be in the zone it is shown in, and
    `tz` None leaves the zone out (a person reading a time in their own zone)."""
    return f"{format_day(at.date(), lang, today)} {_clock(at, is_ambiguous_local_time(at))}{_zone(tz)}"


def format_span(
    start: datetime,
    end: datetime,
    tz: str | None,
    lang: Lang,
    all_day: bool = False,
    today: date | None = None,
) -> str:
    """`周三 9月30日 15:00–16:00 (Asia/Shanghai)`, spelling out the end day when it differs, and
    both offsets when the span crosses a DST change or starts or ends at an ambiguous time; `tz`
    None leaves the zone out."""
    if all_day:
        label = "全天" if lang == "zh" else "all day"
        # `end` is exclusive: an all-day event ending at next midnight covers only its own day.
        last_day = (end - timedelta(microseconds=1)).date() if end > start else start.date()
        if last_day > start.date():
            return f"{format_day(start.date(), lang, today)} – {format_day(last_day, lang, today)} {label}{_zone(tz)}"
        return f"{format_day(start.date(), lang, today)} {label}{_zone(tz)}"
    offsets = (
        start.utcoffset() != end.utcoffset() or is_ambiguous_local_time(start) or is_ambiguous_local_time(end)
    )
    first, last = _clock(start, offsets), _clock(end, offsets)
    if end.date() == start.date():
        return f"{format_day(start.date(), lang, today)} {first}–{last}{_zone(tz)}"
    return f"{format_day(start.date(), lang, today)} {first} – {format_day(end.date(), lang, today)} {last}{_zone(tz)}"
