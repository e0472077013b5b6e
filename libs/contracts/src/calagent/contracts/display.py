"""How dates are shown to people and to the model: always with the weekday and the zone.

Models get weekdays wrong and users must see which day was meant (invariant 13), so every
receipt and tool result goes through these functions.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

Lang = Literal["zh", "en"]

WEEKDAYS_ZH = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
WEEKDAYS_EN = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS_EN = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def weekday_name(day: date, lang: Lang) -> str:
    return (WEEKDAYS_ZH if lang == "zh" else WEEKDAYS_EN)[day.weekday()]


def format_day(day: date, lang: Lang) -> str:
    """`周三 9月30日` / `Wed Sep 30`."""
    if lang == "zh":
        return f"{weekday_name(day, lang)} {day.month}月{day.day}日"
    return f"{weekday_name(day, lang)} {MONTHS_EN[day.month - 1]} {day.day}"


def format_moment(at: datetime, tz: str, lang: Lang) -> str:
    """`周三 9月30日 15:00 (Asia/Shanghai)`; `at` must already be in the user's zone."""
    return f"{format_day(at.date(), lang)} {at:%H:%M} ({tz})"


def format_span(start: datetime, end: datetime, tz: str, lang: Lang, all_day: bool = False) -> str:
    """`周三 9月30日 15:00–16:00 (Asia/Shanghai)`, spelling out the end day when it differs."""
    if all_day:
        label = "全天" if lang == "zh" else "all day"
        return f"{format_day(start.date(), lang)} {label} ({tz})"
    if end.date() == start.date():
        return f"{format_day(start.date(), lang)} {start:%H:%M}–{end:%H:%M} ({tz})"
    return (
        f"{format_day(start.date(), lang)} {start:%H:%M} – {format_day(end.date(), lang)} {end:%H:%M} ({tz})"
    )
