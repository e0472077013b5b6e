"""The short-reply parser: "周日下午2点" -> {"weekday": 7, "time": "14:00"}, with zero model calls.

It answers only when the whole message is a short, bounded date/time phrase; anything else is `{}`
and the model decides. Pure: no clock. It emits symbols and the resolver does the dates, except
for the month-day forms below, which are dates only for a given today: `now` and `tz` are then
arguments (when either is missing, or the zone is unknown, those forms give `{}`).

What it understands (Chinese and English):

* weekdays in every common form (周日 周天 星期天 礼拜六, Sunday sun Sat.) -> `weekday` 1..7 when
  bare; with an explicit week word they become date symbols: 这周三/本周三/this Wednesday/Wednesday
  this week -> `W3+0`, 下周三/next Wednesday -> `W3+1`, 下下周三 -> `W3+2`, 上周三/last Wednesday ->
  `W3-1`; 周末/weekend -> `WE+0`, 下周末/next weekend -> `WE+1`;
* relative days, each 大 one day further: 大大前天 `D-4`, 大前天 `D-3`, 前天 `D-2`, 昨天/昨日 `D-1`,
  今天/今日 `D`, 明天/明日 `D+1`, 后天 `D+2`, 大后天 `D+3`, 大大后天 `D+4` (a 大 before any other
  day word, 大明天, is refused); yesterday today tomorrow, "the day before yesterday" / "the day
  after tomorrow"; 三天后/in 3 days -> `D+3`; explicit dates 9月30日, 十月一号, 9/30, Sept 30, 30 September ->
  `--09-30`, and with a year (2026年9月30日, 2026-09-30, September 30, 2026) -> `2026-09-30`;
  Chinese holidays (国庆节, 春节, 中秋 ...) -> `H:<name>`; Chinese-numeral years
  (二零二七年三月一日 -> `2027-03-01`);
* month-day forms, needing `now` and `tz`, always written `YYYY-MM-DD`: a day of the month alone
  (12号, 12日, 十二号, the 12th, on the 3rd) -> the next such day on or after today (see
  `monthdays.resolve_month_day`); against a month word (下个月5号, 下月5日, 本月十日, 这个月20号, next month on
  the 5th, the 5th of next month) -> that day of that month, also when it has passed (like `W3+0`),
  `{}` when the month lacks it (下个月31号 in a 30-day month); a month's last day (月底, 本月底,
  下个月底, 月末, 下个月的最后一天, end of the month, the last day of next month; 3月底 -> the next
  March's). A bare weekday beside such a date must be its weekday (12号周一), else `{}`;
* times: 24-hour (14:00, 14点, 14点30), Chinese numerals with 两 十 半 一刻 三刻 零, minutes after
  点 (下午3点45 -> 15:45, 三点零五 -> 03:05), periods 凌晨 早上 上午 中午 下午 傍晚 晚上 and
  am/pm/morning/afternoon/evening, noon, midnight (00:00, only when no date is named); half past
  3 pm, (a) quarter to 5pm, quarter past ten, 20 past 3, 10 minutes to 4pm; ranges (下午2点到4点,
  2-4pm, 14:00-16:00) -> `time` and `end_time`. Mid-morning / late afternoon name no time.

Reading rules (decisions, each one a test):

* An hour 1..6 without any period word, am/pm or leading zero (3点一刻, 三点, 3:15, at 3) is
  ambiguous: people mean the afternoon far more often, and a confident 03:15 writes the wrong
  time. The patch carries its a.m. reading as `ambiguous_time` (never `time`); whoever learns the
  half of the day calls `SlotPatch.resolve_period`. Hours 7..12 keep their literal reading
  (八点 -> 08:00, 十二点 -> 12:00); 0, 13..23 and a leading zero are the 24-hour clock (0点,
  15点, 15:00, 03:15). 12am -> 00:00, 12pm / 中午12点 -> 12:00, 上午12点 -> 12:00.
* In a range whose start is ambiguous the end shares its unknown half of the day
  (3点到4点 -> `ambiguous_time` 03:00, `ambiguous_end_time` 04:00): the end must then be a bare
  hour 1..11 too, else `{}` (3点到晚上8点, 3点到15点).
* 晚上 covers 5..11 (晚上8点 -> 20:00). 晚上12点, 半夜12点, 午夜 and 晚上1..4点 are not
  bounded - which calendar day is meant is exactly the question - so the reply is `{}`. The
  English "midnight" alone is 00:00; beside a date or weekday (Friday midnight) it is `{}`.
* A single-digit minute with neither 分 nor 零 (三点五) is ambiguous (3:05 or 3:30) -> `{}`.
* In a range the end inherits the start's period (下午2点到4点 -> 14:00-16:00) and the start inherits
  the end's period when that keeps it before the end (2-4pm, 3点到下午5点 -> 15:00-17:00; 11-1pm
  flips to 11am; 10点到下午2点 keeps 10:00); an end not after the start is `{}` (no crossing
  midnight).
* Never a guess: two different dates, two times that are not a range, an impossible date
  (2月30日, 32号), a recurrence marker anywhere (`domain.recurrence`: 每周三, 工作日, every, daily),
  a part of a month that is not one day (上旬 中旬 下旬 月初 月中 年底, early next month, later this
  month, mid-month), a negation or alternative (不是, 或者, not, or), a relative shift (早点, 晚一点,
  later), a question word (几, 哪, 什么, 有空, what, which, when), leftover digits or time words we
  did not consume (下个月, next month, half past midnight; 30号 without `now`/`tz`), a number that
  names a thing (12号楼, 3号线, 第3号, 3日内), or a lone 天 all give `{}`.
  Abbreviated weekdays that are also words (sat, sun, wed ...) count only when nothing but fillers
  surrounds them: "sat 10am" is Saturday, "I sat down" is not.
* Short means short: after removing the recognised tokens, filler words (好的, 吧, 改到, ok,
  please, let's ...) and punctuation, more than 12 other CJK characters or more than 6 other
  words means a free sentence, not a reply -> `{}`; so does a leftover of more than 20 CJK
  characters or 10 words fillers included.

Whole message (contract section 8): `parsed_reply` also says whether the reply is `complete` -
every character outside the recognised tokens is one of `lexicon.REPLY_FILLERS` (就 吧 那就 改到
then, make it ...), whitespace or punctuation, and the patch holds something. "删除明天下午四点的会"
still yields its date and time, but is not complete, so the fast path leaves it to the model.
It also carries `recurrence_marker` (contract section 9), read from the whole message whatever
its length; a message with a marker never has a patch.

Transport wrappers are not the user's words: `strip_transport` (the gateway's rule,
`calagent.contracts.transport`) removes quoted lines, channel tags and forwarded blocks before
parsing, so `parse_reply(wrapper(s)) == parse_reply(s)` (the gateway does the primary stripping).

Layout: the words live in `lexicon`, the token regular expressions in `grammar`, the wrappers in
`transport`, which month-days exist and their arithmetic in `monthdays`; this module reads the tokens
of one message into a patch. `strip_transport` is re-exported here so existing imports keep working.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import NamedTuple

from calagent.contracts.text import HAN
from calagent.contracts.time import ParsedReply, SlotPatch
from calagent.timeparse.domain.grammar import TOKEN_RE
from calagent.timeparse.domain.lexicon import (
    BLOCKER_RE,
    EN_FILLERS,
    EN_MONTHS,
    EN_REL,
    EN_WEEKDAY_PREFIX,
    MID_PERIODS,
    PERIODS,
    REPLY_FILLER_RE,
    WEEK_WORDS,
    WORD_RE,
    ZH_DAYPART,
    ZH_FILLER_RE,
    ZH_HOLIDAYS,
    ZH_REL,
    ZH_WEEKDAY,
    date_order,
    number,
    year_number,
)
from calagent.timeparse.domain.monthdays import MonthDay, is_day_of_year, resolve_month_day
from calagent.timeparse.domain.recurrence import marker_of_words, recurrence_marker
from calagent.timeparse.domain.symbols import local_today_or_none
from calagent.timeparse.domain.transport import strip_transport

__all__ = ["ReplyParse", "analyse_reply", "parse_reply", "parsed_reply", "strip_transport"]

_MAX_TEXT = 300
_MAX_CJK_LEFTOVER = 12
_MAX_WORD_LEFTOVER = 6
# Fillers are generous, so a free sentence made mostly of them is caught by its raw size.
_MAX_CJK_RAW = 20
_MAX_WORDS_RAW = 10


class _Clock(NamedTuple):
    """One written clock time before its period is applied."""

    hour: int | None  # as written: 3 in 下午3点, 15 in 15:00
    minute: int
    period: str | None  # its own period word or am/pm
    # Written with a leading zero (03:15, 03点): the 24-hour clock, so never an ambiguous hour.
    padded: bool = False


class _Time(NamedTuple):
    hour: int  # 24-hour; for an ambiguous hour its a.m. reading
    minute: int
    ambiguous: bool = False


class _Range(NamedTuple):
    start: _Time
    end: _Time


@dataclass(slots=True)
class ReplyParse:
    """What the scan found; `patch()` is `{}` unless the reply is bounded and unambiguous."""

    dates: list[tuple[str, str | None, int | None]] = field(default_factory=list)  # (kind, symbol, weekday)
    times: list[_Time] = field(default_factory=list)
    ranges: list[_Range] = field(default_factory=list)
    periods: list[str] = field(default_factory=list)
    pending: list[_Clock] = field(default_factory=list)
    pending_ranges: list[tuple[_Clock, _Clock]] = field(default_factory=list)
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
    reason: str | None = None

    def refuse(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason


def _fmt(h: int, m: int) -> str:
    return f"{h:02d}:{m:02d}"


def _add_date(out: ReplyParse, month: int | None, day: int | None, year: int | None) -> None:
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


def _apply_period(hour: int, period: str | None) -> int | None:
    if period is None:
        return hour if 0 <= hour <= 23 else None
    return PERIODS.get(period, {}).get(hour)


def _padded(hour_text: str) -> bool:
    return len(hour_text) == 2 and hour_text[0] in "0零〇"


def _is_ambiguous_hour(hour: int, padded: bool) -> bool:
    """An hour 1..6 with no period word, am/pm or leading zero: 3点一刻 is far more often 15:15
    than 03:15, so neither is written; 7..12 keep their literal reading (八点 is 08:00), and
    0, 13..23 and 03:15 are the 24-hour clock."""
    return 1 <= hour <= 6 and not padded


def _clock_parts(m: re.Match[str], p: str) -> _Clock | None:
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
        return _Clock(hour, minute, period, _padded(g(f"{p}h")))
    if g(f"{p}ch") is not None:
        return _Clock(int(g(f"{p}ch")), int(g(f"{p}cm")), period, _padded(g(f"{p}ch")))
    return _Clock(int(g(f"{p}eh")), 0, period, _padded(g(f"{p}eh")))


def _day_number(text: str) -> int | None:
    # 两 counts things, it never names a day (两号 is not the 2nd); a day no month has is refused later.
    return None if "两" in text else number(text)


_EN_MINUTES = {"five": 5, "ten": 10, "twenty": 20, "twenty five": 25, "twenty-five": 25}


def _past_parts(m: re.Match[str]) -> _Clock | None:
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
    return _Clock(hour, minute, mer)


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


def _scan(text: str, out: ReplyParse) -> None:
    leftover: list[str] = []
    pos = 0
    for m in TOKEN_RE.finditer(text):
        leftover.append(text[pos : m.start()])
        pos = m.end()
        kind = m.lastgroup
        if kind is None:  # pragma: no cover - every alternative is a named group
            continue
        kind = kind[2:]
        g = m.group
        if kind in ("shift", "recur", "midnight", "vague"):
            out.refuse(kind)
        elif kind == "midper":
            out.periods.append(MID_PERIODS[g("mp")])  # no time of its own: only for an hour beside it
        elif kind == "vagueper":
            pass  # mid-morning, late afternoon: no time and no period to apply to one
        elif kind == "enmidnight":
            out.times.append(_Time(0, 0))
            out.midnight = True
        elif kind == "zhymd":
            zh_year = year_number(g("zy"))
            if zh_year is None:
                out.refuse("bad year")  # 两千四年: never dropped to a date without its year
            else:
                _add_date(out, number(g("zm")), number(g("zd")), zh_year)
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
            _add_date(out, int(g("im")), int(g("id")), int(g("iy")))
        elif kind == "zhmd":
            _add_date(out, number(g("zm2")), number(g("zd2")), None)
        elif kind == "slashd":
            second, year_text = g("sb") or g("sb2"), g("sy") or g("sy2")
            out.numeric_dates.append((int(g("sa")), int(second), int(year_text) if year_text else None))
        elif kind in ("enmd", "endm"):
            suffix = "" if kind == "enmd" else "2"
            month, year = EN_MONTHS[g(f"em{suffix}")[:3]], g(f"ey{suffix}")
            _add_date(out, month, int(g(f"ed{suffix}")), int(year) if year else None)
        elif kind == "zhhol":
            out.dates.append(("date", f"H:{ZH_HOLIDAYS[g('hol')]}", None))
        elif kind == "enhol":
            out.dates.append(("date", "H:new_year", None))
        elif kind == "zhrel":
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
        elif kind == "zhrange2":
            a, b = number(g("r2a")), number(g("r2b"))
            if a is None or b is None:
                out.refuse("bad number")
            else:
                a_part = _Clock(a, 0, g("r2per"), _padded(g("r2a")))
                out.pending_ranges.append((a_part, _Clock(b, 0, None, _padded(g("r2b")))))
        elif kind == "enrange2":
            mer = g("r3mer").replace(".", "")
            a_part = _Clock(int(g("r3a")), int(g("r3am") or 0), None, _padded(g("r3a")))
            b_part = _Clock(int(g("r3b")), int(g("r3bm") or 0), mer, _padded(g("r3b")))
            out.pending_ranges.append((a_part, b_part))
        elif kind == "enpast":
            parts = _past_parts(m)
            if parts is None:
                out.refuse("malformed time")
            else:
                out.pending.append(parts)
        elif kind == "range":
            a_clock, b_clock = _clock_parts(m, "a"), _clock_parts(m, "b")
            if a_clock is None or b_clock is None:
                out.refuse("malformed time")
            else:
                out.pending_ranges.append((a_clock, b_clock))
        elif kind == "clock":
            parts = _clock_parts(m, "c")
            if parts is None:
                out.refuse("malformed time")
            else:
                out.pending.append(parts)
        elif kind == "enat":
            out.pending.append(_Clock(number(g("ath")), 0, None, _padded(g("ath"))))
        elif kind == "noon":
            out.times.append(_Time(12, 0))
        elif kind == "zhper":
            if g("zp") != "早上好":
                out.periods.append(g("zp"))
        elif kind == "enper":
            out.periods.append(g("ep"))
    leftover.append(text[pos:])
    out.leftover = " ".join(leftover)


def _add_range(out: ReplyParse, a: _Clock, b: _Clock, default_period: str | None) -> None:
    a_hour, a_min, a_per, a_padded = a
    b_hour, b_min, b_per, b_padded = b
    if a_hour is None or b_hour is None:
        out.refuse("bad number")
        return
    if default_period is not None:
        for hour, own in ((a_hour, a_per), (b_hour, b_per)):
            if own is not None and _apply_period(hour, own) != _apply_period(hour, default_period):
                out.refuse("two periods")
                return
    if a_per is None and b_per is None:
        a_per = default_period
    if b_per is None:
        b_per = a_per  # 下午2点到4点: the end is in the afternoon too
    if a_per is None and b_per is not None:
        # 2-4pm, 3点到下午5点: the start shares the end's period when that keeps it before the end;
        # 11-1pm flips to the other half of the day; 10点到下午2点 keeps its bare 10.
        shared, end_hour = _apply_period(a_hour, b_per), _apply_period(b_hour, b_per)
        if shared is not None and end_hour is not None and (shared, a_min) < (end_hour, b_min):
            a_per = b_per
        elif b_per in ("am", "pm"):
            a_per = "am" if b_per == "pm" else "pm"
    if a_min > 59 or b_min > 59:
        out.refuse("time outside its period")
        return
    if a_per is None and _is_ambiguous_hour(a_hour, a_padded):
        # 3点到4点: the end shares the start's unknown half of the day, so it must be a bare hour
        # whose p.m. reading is still the same day; 3点到晚上8点 or 3点到15点 is not guessed.
        if b_per is not None or b_padded or not 1 <= b_hour <= 11:
            out.refuse("ambiguous start, explicit end")
            return
        if (b_hour, b_min) <= (a_hour, a_min):
            out.refuse("range end not after start")
            return
        out.ranges.append(_Range(_Time(a_hour, a_min, True), _Time(b_hour, b_min, True)))
        return
    start, end = _apply_period(a_hour, a_per), _apply_period(b_hour, b_per)
    if start is None or end is None:
        out.refuse("time outside its period")
        return
    if (end, b_min) <= (start, a_min):
        out.refuse("range end not after start")
        return
    out.ranges.append(_Range(_Time(start, a_min), _Time(end, b_min)))


def _leftover_is_small(leftover: str, loose_weekday: bool) -> str | None:
    if len(HAN.findall(leftover)) > _MAX_CJK_RAW:
        return "long free text"
    if sum(1 for w in WORD_RE.findall(leftover) if not HAN.match(w)) > _MAX_WORDS_RAW:
        return "long free text"
    rest = ZH_FILLER_RE.sub(" ", leftover)
    if BLOCKER_RE.search(rest):
        return "unconsumed date/time, negation or question words"
    if len(HAN.findall(rest)) > _MAX_CJK_LEFTOVER:
        return "long free text"
    words = [w for w in WORD_RE.findall(rest) if not HAN.match(w)]
    others = sum(1 for w in words if w not in EN_FILLERS)
    if others > _MAX_WORD_LEFTOVER:
        return "long free text"
    if loose_weekday and others:
        return "abbreviated weekday inside other words"
    return None


def _only_reply_fillers(leftover: str) -> bool:
    rest = REPLY_FILLER_RE.sub(" ", leftover)
    return all(ch.isspace() or unicodedata.category(ch).startswith("P") for ch in rest)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return text.replace("’", "'").replace("：", ":")


def _add_days(out: ReplyParse, today: date | None) -> None:
    """Month-day forms become `YYYY-MM-DD` dates; without today (no `now`/`tz`) they are refused."""
    for spec in out.days:
        if today is None:
            out.refuse("a day of the month needs now and tz")
            return
        day = resolve_month_day(spec, today)
        if day is None:
            out.refuse("impossible date")
            return
        out.dates.append(("date", day.isoformat(), None))


def _add_numeric_dates(out: ReplyParse, order: str | None, chinese: bool) -> None:
    """3/4 is 4 March to a New Yorker and 3 April to a Berliner: the reading comes from the zone's
    order (`lexicon.date_order`) and from Chinese text, which writes the month first. When they
    disagree both readings stay possible; a date whose possible readings differ, or that none of
    them makes a real date, is refused. With neither, only the month-first reading is taken, and
    only when the day-first one is no date at all or the same one (9/30, 3/3): 3/4 and 30/9 are
    refused, never guessed."""
    orders = {order} if order is not None else set()
    if chinese:
        orders.add("mdy")
    for first, second, year in out.numeric_dates:
        readings = {"mdy": (first, second), "dmy": (second, first)}
        valid = {k: md for k, md in readings.items() if is_day_of_year(*md, year)}
        if orders:
            chosen = {valid[k] for k in orders if k in valid}
        elif "mdy" in valid and valid.get("dmy", valid["mdy"]) == valid["mdy"]:
            chosen = {valid["mdy"]}
        else:
            chosen = set()
        if len(chosen) != 1:
            out.refuse("numeric date: the zone and the text do not say which number is the month")
            return
        ((month, day),) = chosen
        _add_date(out, month, day, year)


def _check_weekday(out: ReplyParse) -> None:
    """A bare weekday beside a full date (12号周五, Friday the 12th) must be that date's weekday:
    it is then dropped, else the reply is refused."""
    full = {symbol for kind, symbol, _ in out.dates if kind == "date" and symbol and symbol[:1].isdigit()}
    weekdays = {wd for kind, _, wd in out.dates if kind == "weekday"}
    if len(full) != 1 or not weekdays:
        return
    (symbol,) = full
    if weekdays != {date.fromisoformat(symbol).isoweekday()}:
        out.refuse("weekday does not match the date")
        return
    out.dates = [entry for entry in out.dates if entry[0] != "weekday"]


def analyse_reply(text: str, now: datetime | None = None, tz: str | None = None) -> ReplyParse:
    """The full scan, with the reason a reply was refused (for tests and debugging)."""
    out = ReplyParse()
    words = strip_transport(text)
    # Any length, before the size checks: the marker is about the whole message (contract §9).
    out.recurrence_marker = marker_of_words(words)
    if out.recurrence_marker is not None:
        out.refuse("recurrence")
    body = _normalise(words)
    if not body:
        out.refuse("empty")
        return out
    if len(body) > _MAX_TEXT:
        out.refuse("too long")
        return out
    _scan(body, out)
    # Standalone periods (今晚, 下午 3点 said apart, tomorrow morning) apply to bare clock times.
    if len(set(out.periods)) > 1:
        out.refuse("two periods")
    period = out.periods[0] if out.periods else None
    for hour, minute, own, padded in out.pending:
        if hour is None:
            out.refuse("bad number")
            continue
        effective = own if own is not None else period
        resolved = _apply_period(hour, effective)
        if own is not None and period is not None and _apply_period(hour, period) != resolved:
            out.refuse("two periods")  # 明天早上下午3点: which one?
        if resolved is None or minute > 59:
            out.refuse("time outside its period")
            continue
        out.times.append(_Time(resolved, minute, effective is None and _is_ambiguous_hour(hour, padded)))
    for a, b in out.pending_ranges:
        _add_range(out, a, b, period)
    reason = _leftover_is_small(out.leftover, out.loose_weekday)
    if reason:
        out.refuse(reason)
    out.whole_message = _only_reply_fillers(out.leftover)
    _add_days(out, local_today_or_none(now, tz))
    _add_numeric_dates(out, date_order(tz), HAN.search(body) is not None)
    _check_weekday(out)
    if out.midnight and out.dates:
        out.refuse("midnight beside a date: which day is meant is the question")
    if len(set(out.dates)) > 1:
        out.refuse("two dates")
    if len(set(out.times)) + len(set(out.ranges)) > 1:
        out.refuse("two times")
    return out


def _slot(at: _Time | None, ambiguous: bool) -> str | None:
    """`at` formatted for the slot that matches its ambiguity, else None."""
    return _fmt(at.hour, at.minute) if at is not None and at.ambiguous == ambiguous else None


def _patch_of(out: ReplyParse) -> SlotPatch:
    if out.reason is not None:
        return SlotPatch.model_construct()
    symbol: str | None = None
    weekday: int | None = None
    start: _Time | None = None
    end: _Time | None = None
    if out.dates:
        _, symbol, weekday = out.dates[0]
    if out.ranges:
        start, end = out.ranges[0]
    elif out.times:
        start = out.times[0]
    values = {
        "date": symbol,
        "weekday": weekday,
        "time": _slot(start, ambiguous=False),
        "end_time": _slot(end, ambiguous=False),
        "ambiguous_time": _slot(start, ambiguous=True),
        "ambiguous_end_time": _slot(end, ambiguous=True),
    }
    # Only the slots the reply bound count as set, so `exclude_unset` and `exclude_none` agree.
    return SlotPatch.model_construct(
        _fields_set={key for key, value in values.items() if value is not None},
        date=symbol,
        weekday=weekday,
        time=_slot(start, ambiguous=False),
        end_time=_slot(end, ambiguous=False),
        ambiguous_time=_slot(start, ambiguous=True),
        ambiguous_end_time=_slot(end, ambiguous=True),
    )


def _marker_or_none(text: str) -> str | None:
    try:
        return recurrence_marker(text)
    except Exception:  # pragma: no cover - same rule as below: degrade, never crash the turn
        return None


def parsed_reply(text: str, now: datetime | None = None, tz: str | None = None) -> ParsedReply:
    """The patch of a reply, whether it is `complete` and its recurrence marker.

    `complete`: the whole message (after transport stripping, whitespace and punctuation aside) is
    recognised date/time phrases plus `lexicon.REPLY_FILLERS`, and the patch holds something. Only
    a complete reply may be merged with zero model calls; "删除明天下午四点的会" has a patch but is
    not complete. `now` and `tz` are needed only by the month-day forms (12号, 下个月5号, 月底, the
    12th), which they turn into `YYYY-MM-DD`; without them those forms give `{}`.
    `recurrence_marker`: see `domain.recurrence`; set for any message, short or not."""
    try:
        out = analyse_reply(text, now, tz)
        patch = _patch_of(out)
        return ParsedReply(
            patch=patch,
            complete=out.whole_message and not patch.is_empty(),
            recurrence_marker=out.recurrence_marker,
        )
    except Exception:  # a parser bug must degrade to "the model decides", never crash the turn
        return ParsedReply(
            patch=SlotPatch.model_construct(), complete=False, recurrence_marker=_marker_or_none(text)
        )


def parse_reply(text: str, now: datetime | None = None, tz: str | None = None) -> SlotPatch:
    """The slot patch of a short reply; `{}` when nothing bounded and unambiguous was said."""
    return parsed_reply(text, now, tz).patch
