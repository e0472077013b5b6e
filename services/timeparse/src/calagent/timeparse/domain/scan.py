"""One pass of the token grammar over a short reply: what it names (dates, times, periods, days of
a month), what it refuses and what is left over. Deciding what the findings mean together is
`replies.analyse_reply`'s."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from calagent.contracts.numerals import number
from calagent.timeparse.domain.clock import Clock, Range, Time, clock_parts, is_padded, past_parts
from calagent.timeparse.domain.grammar import TOKEN_RE
from calagent.timeparse.domain.lexicon import (
    EN_MONTHS,
    EN_REL,
    EN_WEEKDAY_PREFIX,
    MID_PERIODS,
    WEEK_WORDS,
    ZH_DAYPART,
    ZH_HOLIDAYS,
    ZH_REL,
    ZH_WEEKDAY,
    year_number,
)
from calagent.timeparse.domain.monthdays import MonthDay, is_day_of_year

__all__ = ["ReplyParse", "add_date", "scan"]


@dataclass(slots=True)
class ReplyParse:
    """What the scan found, and why the reply is refused (`reason`) once it is; `replies` writes a
    patch only from a reply that was never refused."""

    dates: list[tuple[str, str | None, int | None]] = field(default_factory=list)  # (kind, symbol, weekday)
    times: list[Time] = field(default_factory=list)
    ranges: list[Range] = field(default_factory=list)
    periods: list[str] = field(default_factory=list)
    pending: list[Clock] = field(default_factory=list)
    pending_ranges: list[tuple[Clock, Clock]] = field(default_factory=list)
    days: list[MonthDay] = field(default_factory=list)
    # 3/4, 25.09.2026 as written (first, second, year): which is the month is decided once the
    # whole message has been read (Chinese text writes the month first) and the zone is known.
    numeric_dates: list[tuple[int, int, int | None]] = field(default_factory=list)
    # The English "midnight" (00:00): refused beside a date, where which day is meant is the question.
    midnight: bool = False
    recurrence_marker: str | None = None
    leftover: str = ""
    # "sat", "sun", "wed" are also plain words: trusted only in a reply with no other words.
    loose_weekday: bool = False
    # Every character outside the recognised tokens is a reply filler, whitespace or punctuation.
    whole_message: bool = False
    # The same once the words that point at one of several things (那个, the … one) are set aside.
    pointing: bool = False
    reason: str | None = None

    def refuse(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason


def add_date(out: ReplyParse, month: int | None, day: int | None, year: int | None) -> None:
    if month is None or day is None or not is_day_of_year(month, day, year):
        out.refuse("impossible date")
        return
    if year is not None:
        out.dates.append(("date", f"{year:04d}-{month:02d}-{day:02d}", None))
    else:
        out.dates.append(("date", f"--{month:02d}-{day:02d}", None))


def _week_offset(word: str | None) -> int | None:
    if word is None:
        return None
    return WEEK_WORDS.get(word.rstrip("个個"))


def _signed(n: int) -> str:
    return f"+{n}" if n >= 0 else str(n)


def _day_symbol(shift: int) -> str:
    return f"D{_signed(shift)}" if shift else "D"


def _day_number(text: str) -> int | None:
    # 两 counts things, it never names a day (两号 is not the 2nd); a day no month has is refused later.
    return None if "两" in text else number(text)


def _add_month_day(out: ReplyParse, kind: str, g: Callable[[str], str | None]) -> None:
    """下个月5号, 本月底, the 5th of next month, the end of the month: a day of a month counted
    from this one (no month word: this month)."""
    word, day_text = {
        "zhrmend": ("rmep", None),
        "zhrmd": ("rmp", "rmd"),
        "enrmd": ("ermp", "ermd"),
        "enrmd2": ("ermp2", "ermd2"),
        "enmend": ("emep", None),
    }[kind]
    months = _week_offset(g(word)) if g(word) is not None else 0
    day = None if day_text is None else _day_number(g(day_text) or "")
    if months is None or (day_text is not None and day is None):
        out.refuse("bad number")
        return
    out.days.append(MonthDay(day, months=months))


def _read_date(kind: str, m: re.Match[str], out: ReplyParse) -> bool:
    """A date token (a day of a month, a holiday, a day counted from today) into `out`; False
    when `kind` is no date token."""
    g = m.group
    if kind == "zhymd":
        zh_year = year_number(g("zy"))
        if zh_year is None:
            out.refuse("bad year")  # 两千四年: never dropped to a date without its year
        else:
            add_date(out, number(g("zm")), number(g("zd")), zh_year)
    elif kind == "zhmend":
        end_month = number(g("mem"))
        end_year = year_number(g("mey")) if g("mey") else None
        if end_month is None or (g("mey") and end_year is None):
            out.refuse("bad number")
        else:
            out.days.append(MonthDay(None, month=end_month, year=end_year))
    elif kind in ("zhrmend", "zhrmd", "enrmd", "enrmd2", "enmend"):
        _add_month_day(out, kind, g)
    elif kind == "zhday":
        day = _day_number(g("dd"))
        if day is None:
            out.refuse("impossible date")
        else:
            out.days.append(MonthDay(day))
    elif kind == "enday":
        out.days.append(MonthDay(int(g("edd"))))
    elif kind == "isod":
        add_date(out, int(g("im")), int(g("id")), int(g("iy")))
    elif kind == "zhmd":
        add_date(out, number(g("zm2")), number(g("zd2")), None)
    elif kind == "slashd":
        second, year_text = g("sb") or g("sb2"), g("sy") or g("sy2")
        out.numeric_dates.append((int(g("sa")), int(second), int(year_text) if year_text else None))
    elif kind in ("enmd", "endm"):
        suffix = "" if kind == "enmd" else "2"
        month, year = EN_MONTHS[g(f"em{suffix}")[:3]], g(f"ey{suffix}")
        add_date(out, month, int(g(f"ed{suffix}")), int(year) if year else None)
    elif kind == "zhhol":
        out.dates.append(("date", f"H:{ZH_HOLIDAYS[g('hol')]}", None))
    elif kind == "enhol":
        out.dates.append(("date", "H:new_year", None))
    else:
        return _read_relative_day(kind, m, out)
    return True


def _read_relative_day(kind: str, m: re.Match[str], out: ReplyParse) -> bool:
    """A day counted from today (明天, next Friday, in 3 days) into `out`; False when `kind` is no
    date token."""
    g = m.group
    if kind == "zhrel":
        shift_days = ZH_REL.get(g("rel").removesuffix("个"))
        if shift_days is None:
            out.refuse("unknown relative day")  # 大明天, 大大大后天: not a word, not a guess
        else:
            out.dates.append(("date", _day_symbol(shift_days), None))
    elif kind == "zhdp":
        out.dates.append(("date", _day_symbol({"今": 0, "明": 1, "昨": -1}[g("dpd")]), None))
        out.periods.append(ZH_DAYPART[g("dpp")])
    elif kind == "zhndays":
        n = number(g("nd"))
        if n is None:
            out.refuse("bad number")
        else:
            out.dates.append(("date", f"D+{n}", None))
    elif kind == "zhweek":
        wd = g("wd")
        weekday = ZH_WEEKDAY[wd] if wd in ZH_WEEKDAY else int(wd)
        offset = _week_offset(g("wp"))
        if offset is None:
            out.dates.append(("weekday", None, weekday))
        else:
            out.dates.append(("date", f"W{weekday}{_signed(offset)}", None))
    elif kind == "zhweekend":
        offset = _week_offset(g("wep"))
        out.dates.append(("date", f"WE{_signed(offset if offset is not None else 0)}", None))
    elif kind == "enrel":
        word = " ".join(g("erel").split())
        out.dates.append(("date", _day_symbol(EN_REL[word]), None))
        if word == "tonight":
            out.periods.append("evening")
    elif kind == "enndays":
        out.dates.append(("date", f"D+{number(g('end'))}", None))
    elif kind == "enweek":
        weekday = EN_WEEKDAY_PREFIX[g("ewd")[:3]]
        out.loose_weekday = out.loose_weekday or len(g("ewd")) <= 3
        before, after = _week_offset(g("ewp")), _week_offset(g("ews"))
        if before is not None and after is not None:
            out.refuse("two week words")
        offset = before if before is not None else after
        if offset is None:
            out.dates.append(("weekday", None, weekday))
        else:
            out.dates.append(("date", f"W{weekday}{_signed(offset)}", None))
    elif kind == "enweekend":
        offset = _week_offset(g("ewep"))
        out.dates.append(("date", f"WE{_signed(offset if offset is not None else 0)}", None))
    elif kind == "enthisper":
        out.dates.append(("date", "D", None))
        out.periods.append(g("etp"))
    else:
        return False
    return True


def _read_time(kind: str, m: re.Match[str], out: ReplyParse) -> None:
    """A time token (a clock time, a range, a part of the day) into `out`."""
    g = m.group
    if kind == "midper":
        out.periods.append(MID_PERIODS[g("mp")])  # no time of its own: only for an hour beside it
    elif kind == "vagueper":
        pass  # mid-morning, late afternoon: no time and no period to apply to one
    elif kind == "enmidnight":
        out.times.append(Time(0, 0))
        out.midnight = True
    elif kind == "zhrange2":
        a, b = number(g("r2a")), number(g("r2b"))
        if a is None or b is None:
            out.refuse("bad number")
        else:
            a_part = Clock(a, 0, g("r2per"), is_padded(g("r2a")))
            out.pending_ranges.append((a_part, Clock(b, 0, None, is_padded(g("r2b")))))
    elif kind == "enrange2":
        mer = g("r3mer").replace(".", "")
        a_part = Clock(int(g("r3a")), int(g("r3am") or 0), None, is_padded(g("r3a")))
        b_part = Clock(int(g("r3b")), int(g("r3bm") or 0), mer, is_padded(g("r3b")))
        out.pending_ranges.append((a_part, b_part))
    elif kind == "enpast":
        parts = past_parts(m)
        if parts is None:
            out.refuse("malformed time")
        else:
            out.pending.append(parts)
    elif kind == "range":
        a_clock, b_clock = clock_parts(m, "a"), clock_parts(m, "b")
        if a_clock is None or b_clock is None:
            out.refuse("malformed time")
        else:
            out.pending_ranges.append((a_clock, b_clock))
    elif kind == "clock":
        parts = clock_parts(m, "c")
        if parts is None:
            out.refuse("malformed time")
        else:
            out.pending.append(parts)
    elif kind == "enat":
        out.pending.append(Clock(number(g("ath")), 0, None, is_padded(g("ath"))))
    elif kind == "noon":
        out.times.append(Time(12, 0))
    elif kind == "zhper":
        if g("zp") != "早上好":
            out.periods.append(g("zp"))
    elif kind == "enper":
        out.periods.append(g("ep"))


def scan(text: str, out: ReplyParse) -> None:
    leftover: list[str] = []
    pos = 0
    for m in TOKEN_RE.finditer(text):
        leftover.append(text[pos : m.start()])
        pos = m.end()
        kind = m.lastgroup
        if kind is None:  # pragma: no cover - every alternative is a named group
            continue
        kind = kind[2:]
        if kind in ("shift", "recur", "midnight", "vague"):
            out.refuse(kind)
        elif not _read_date(kind, m, out):
            _read_time(kind, m, out)
    leftover.append(text[pos:])
    out.leftover = " ".join(leftover)
