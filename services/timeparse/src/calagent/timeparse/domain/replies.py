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
`transport`; `scan` runs the grammar over a message and collects what it names, `clock` reads
written times of day and ranges, `monthdays` owns which month-days exist and their arithmetic; this
module decides what the findings of one message mean together and writes the patch.
`strip_transport` is re-exported here so existing imports keep working.
"""

from __future__ import annotations

import unicodedata
from datetime import date, datetime

from calagent.contracts.text import HAN
from calagent.contracts.time import ParsedReply, SlotPatch
from calagent.timeparse.domain.clock import Time, apply_period, fmt, is_ambiguous_hour, read_range
from calagent.timeparse.domain.lexicon import (
    BLOCKER_RE,
    EN_FILLERS,
    POINTING_RE,
    REPLY_FILLER_RE,
    WORD_RE,
    ZH_FILLER_RE,
    date_order,
)
from calagent.timeparse.domain.monthdays import is_day_of_year, resolve_month_day
from calagent.timeparse.domain.recurrence import marker_of_words, recurrence_marker
from calagent.timeparse.domain.scan import ReplyParse, add_date, scan
from calagent.timeparse.domain.symbols import DateResolution, local_today_or_none, resolve_date
from calagent.timeparse.domain.transport import strip_transport

__all__ = ["ReplyParse", "analyse_reply", "parse_reply", "parsed_reply", "strip_transport"]

_MAX_TEXT = 300
_MAX_CJK_LEFTOVER = 12
_MAX_WORD_LEFTOVER = 6
# Fillers are generous, so a free sentence made mostly of them is caught by its raw size.
_MAX_CJK_RAW = 20
_MAX_WORDS_RAW = 10


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
        add_date(out, month, day, year)


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
    scan(body, out)
    # Standalone periods (今晚, 下午 3点 said apart, tomorrow morning) apply to bare clock times.
    if len(set(out.periods)) > 1:
        out.refuse("two periods")
    period = out.periods[0] if out.periods else None
    for hour, minute, own, padded in out.pending:
        if hour is None:
            out.refuse("bad number")
            continue
        effective = own if own is not None else period
        resolved = apply_period(hour, effective)
        if own is not None and period is not None and apply_period(hour, period) != resolved:
            out.refuse("two periods")  # 明天早上下午3点: which one?
        if resolved is None or minute > 59:
            out.refuse("time outside its period")
            continue
        out.times.append(Time(resolved, minute, effective is None and is_ambiguous_hour(hour, padded)))
    for a, b in out.pending_ranges:
        reading = read_range(a, b, period)
        if isinstance(reading, str):
            out.refuse(reading)
        else:
            out.ranges.append(reading)
    reason = _leftover_is_small(out.leftover, out.loose_weekday)
    if reason:
        out.refuse(reason)
    out.whole_message = _only_reply_fillers(out.leftover)
    out.pointing = _only_reply_fillers(POINTING_RE.sub(" ", out.leftover))
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


def _slot(at: Time | None, ambiguous: bool) -> str | None:
    """`at` formatted for the slot that matches its ambiguity, else None."""
    return fmt(at.hour, at.minute) if at is not None and at.ambiguous == ambiguous else None


def _patch_of(out: ReplyParse) -> SlotPatch:
    if out.reason is not None:
        return SlotPatch.model_construct()
    symbol: str | None = None
    weekday: int | None = None
    start: Time | None = None
    end: Time | None = None
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


def _days_named(symbol: str | None, today: date | None) -> tuple[date, ...]:
    """The days a patch's date symbol names, by the resolver's own reading (none without today)."""
    if symbol is None or today is None:
        return ()
    resolved = resolve_date(symbol, today)
    return resolved.days if isinstance(resolved, DateResolution) else ()


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
            points_at_one=out.pointing and not patch.is_empty(),
            days=_days_named(patch.date, local_today_or_none(now, tz)),
            recurrence_marker=out.recurrence_marker,
        )
    except Exception:  # a parser bug must degrade to "the model decides", never crash the turn
        return ParsedReply(
            patch=SlotPatch.model_construct(), complete=False, recurrence_marker=_marker_or_none(text)
        )


def parse_reply(text: str, now: datetime | None = None, tz: str | None = None) -> SlotPatch:
    """The slot patch of a short reply; `{}` when nothing bounded and unambiguous was said."""
    return parsed_reply(text, now, tz).patch
