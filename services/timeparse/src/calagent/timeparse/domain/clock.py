"""Clock times of a short reply: what a written hour means once its period words are known.

Reading rules (the reply parser's, see `replies`): an hour 1..6 without a period word, am/pm or a
leading zero is ambiguous (its a.m. reading is kept, flagged); 7..12 keep their literal reading;
0, 13..23 and a leading zero are the 24-hour clock. In a range the end inherits the start's period
and the start the end's when that keeps it before the end; an end not after the start is refused.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from calagent.contracts.numerals import number
from calagent.timeparse.domain.lexicon import PERIODS

__all__ = [
    "Clock",
    "Range",
    "Time",
    "apply_period",
    "clock_parts",
    "fmt",
    "is_ambiguous_hour",
    "is_padded",
    "past_parts",
    "read_range",
]


class Clock(NamedTuple):
    """One written clock time before its period is applied."""

    hour: int | None  # as written: 3 in 下午3点, 15 in 15:00
    minute: int
    period: str | None  # its own period word or am/pm
    # Written with a leading zero (03:15, 03点): the 24-hour clock, so never an ambiguous hour.
    padded: bool = False


class Time(NamedTuple):
    hour: int  # 24-hour; for an ambiguous hour its a.m. reading
    minute: int
    ambiguous: bool = False


class Range(NamedTuple):
    start: Time
    end: Time


def fmt(h: int, m: int) -> str:
    return f"{h:02d}:{m:02d}"


def apply_period(hour: int, period: str | None) -> int | None:
    if period is None:
        return hour if 0 <= hour <= 23 else None
    return PERIODS.get(period, {}).get(hour)


def is_padded(hour_text: str) -> bool:
    return len(hour_text) == 2 and hour_text[0] in "0零〇"


def is_ambiguous_hour(hour: int, padded: bool) -> bool:
    """An hour 1..6 with no period word, am/pm or leading zero: 3点一刻 is far more often 15:15
    than 03:15, so neither is written; 7..12 keep their literal reading (八点 is 08:00), and
    0, 13..23 and 03:15 are the 24-hour clock."""
    return 1 <= hour <= 6 and not padded


def clock_parts(m: re.Match[str], p: str) -> Clock | None:
    """(written hour, minute, own period, padded) of one clock match; None if malformed."""
    g = m.group
    period: str | None = g(f"{p}per")
    mer = g(f"{p}mer")
    if mer is not None:
        mer = mer.replace(".", "").replace(" ", "")
        if mer.startswith("o"):
            mer = None
        elif period is not None:
            return None  # "下午3pm": two periods in one time
        else:
            period = mer
    if g(f"{p}h") is not None:
        hour = number(g(f"{p}h"))
        if g(f"{p}half"):
            minute: int | None = 30
        elif g(f"{p}q"):
            minute = 15 if g(f"{p}q") == "一" else 45
        elif g(f"{p}m") is not None:
            text = g(f"{p}m")
            minute = number(text)
            # 三点五 / 3点5 could be 3:05 or 3:30; 三点零五, 3点05, 3点5分, 三点十 are not.
            if len(text) == 1 and minute is not None and minute < 10 and not g(f"{p}fen"):
                return None
        else:
            minute = 0
        if hour is None or minute is None:
            return None
        return Clock(hour, minute, period, is_padded(g(f"{p}h")))
    if g(f"{p}ch") is not None:
        return Clock(int(g(f"{p}ch")), int(g(f"{p}cm")), period, is_padded(g(f"{p}ch")))
    return Clock(int(g(f"{p}eh")), 0, period, is_padded(g(f"{p}eh")))


_EN_MINUTES = {"five": 5, "ten": 10, "twenty": 20, "twenty five": 25, "twenty-five": 25}


def past_parts(m: re.Match[str]) -> Clock | None:
    """Half past 3 pm -> (3, 30, pm); quarter to 5pm -> (4, 45, pm); None if malformed."""
    g = m.group
    hour = number(g("phr"))
    if g("pq"):
        minute, direction = 15, g("pqd")
    elif g("ph"):
        minute, direction = 30, "past"
    else:
        text = " ".join((g("pn") or g("pn2")).split())
        written = int(text) if text.isdigit() else _EN_MINUTES.get(text)
        if written is None or not 1 <= written <= 29:
            return None
        minute, direction = written, g("pnd") or g("pnd2")
    mer = g("pmer")
    if mer is not None:
        mer = mer.replace(".", "").replace(" ", "")
        mer = None if mer.startswith("o") else mer
    if hour is None or not 1 <= hour <= 12:
        return None
    if direction in ("to", "till", "of"):
        if hour == 12 and mer is not None:
            return None  # quarter to 12am is 23:45 of the day before: not a guess
        hour, minute = (12 if hour == 1 else hour - 1), 60 - minute
    return Clock(hour, minute, mer)


def read_range(a: Clock, b: Clock, default_period: str | None) -> Range | str:
    """The range from `a` to `b` (the message's own period `default_period` applying to both), or
    why it is refused."""
    a_hour, a_min, a_per, a_padded = a
    b_hour, b_min, b_per, b_padded = b
    if a_hour is None or b_hour is None:
        return "bad number"
    if default_period is not None:
        for hour, own in ((a_hour, a_per), (b_hour, b_per)):
            if own is not None and apply_period(hour, own) != apply_period(hour, default_period):
                return "two periods"
    if a_per is None and b_per is None:
        a_per = default_period
    if b_per is None:
        b_per = a_per  # 下午2点到4点: the end is in the afternoon too
    if a_per is None and b_per is not None:
        # 2-4pm, 3点到下午5点: the start shares the end's period when that keeps it before the end;
        # 11-1pm flips to the other half of the day; 10点到下午2点 keeps its bare 10.
        shared, end_hour = apply_period(a_hour, b_per), apply_period(b_hour, b_per)
        if shared is not None and end_hour is not None and (shared, a_min) < (end_hour, b_min):
            a_per = b_per
        elif b_per in ("am", "pm"):
            a_per = "am" if b_per == "pm" else "pm"
    if a_min > 59 or b_min > 59:
        return "time outside its period"
    if a_per is None and is_ambiguous_hour(a_hour, a_padded):
        # 3点到4点: the end shares the start's unknown half of the day, so it must be a bare hour
        # whose p.m. reading is still the same day; 3点到晚上8点 or 3点到15点 is not guessed.
        if b_per is not None or b_padded or not 1 <= b_hour <= 11:
            return "ambiguous start, explicit end"
        if (b_hour, b_min) <= (a_hour, a_min):
            return "range end not after start"
        return Range(Time(a_hour, a_min, True), Time(b_hour, b_min, True))
    start, end = apply_period(a_hour, a_per), apply_period(b_hour, b_per)
    if start is None or end is None:
        return "time outside its period"
    if (end, b_min) <= (start, a_min):
        return "range end not after start"
    return Range(Time(start, a_min), Time(end, b_min))
