"""Which of the proposed times a reply names (contract §20), as pure code.

The reply is someone else's words: it is read for one thing only, the slot it names, and never
reaches the model as an instruction. Only the reply's own lines count — the quoted proposal below
it ("> 1. Tue …", "On … wrote:") names every slot. What a line can name:

- an ordinal: "2", "#2", "option 2", "第二个", "第2个", "the second", "2nd";
- a weekday: "周二", "星期二", "礼拜二", "Tuesday", "Tue";
- a day of the month: "29号", "9月29日", "the 29th", "Sep 29", "29 September", "9/29";
- a time: "15:00", "3pm", "3:30 pm", "下午三点", "三点半", "15点".

A weekday, day or time matches a slot when the slot's start has it in the attendee's zone (the one
the mail named first) or the user's. Every kind of cue the reply gives must agree, and together
they must single out one slot; otherwise — none, several, cues that contradict each other, or a
refusal ("none of these", "都不行") — the reply names no slot (None), and the user reads it.

Served on `calagent.time.choose_slot` to commands, which holds the proposal (its numerals, weekdays,
months and clock words are this service's lexicon, its quotation rules `contracts.transport`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from datetime import datetime
from functools import partial
from zoneinfo import ZoneInfo

from calagent.contracts.numerals import EN_ORDINALS, number
from calagent.contracts.transport import unwrap
from calagent.timeparse.domain.grammar import EN_MONTH, EN_WEEKDAY, NUM
from calagent.timeparse.domain.lexicon import EN_MONTHS, EN_WEEKDAY_PREFIX, ZH_WEEKDAY

_REFUSAL = re.compile(
    r"none of|neither|no good|doesn'?t work for me|do not work|don'?t work|can'?t make (any|it)|"
    r"都不行|都不可以|都没空|都不方便|都不合适|不行|没空",
    re.IGNORECASE,
)

_TIME_PATTERNS = (
    # 15:00, 3:30 pm
    re.compile(r"(?<![\d/])(\d{1,2}):(\d{2})\s*(am|pm|a\.m\.|p\.m\.)?", re.IGNORECASE),
    # 3pm, 3 p.m.
    re.compile(r"(?<![\d:/])(\d{1,2})\s*(am|pm|a\.m\.|p\.m\.)(?![a-z])", re.IGNORECASE),
    # 下午三点, 三点半, 15点
    re.compile(rf"(上午|早上|中午|下午|晚上)?\s*({NUM})\s*[点點时](半|一刻|三刻|(\d{{1,2}})分?)?"),
)
_DATE_PATTERNS = (
    # 9月29日 / 9月29号
    re.compile(r"(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]?"),
    # 29号 / 29日
    re.compile(r"(?<![\d月])(\d{1,2})\s*[日号]"),
    # Sep 29, September 29th
    re.compile(rf"\b({EN_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b", re.IGNORECASE),
    # 29 Sep, 29th of September
    re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({EN_MONTH})\b", re.IGNORECASE),
    # the 29th
    re.compile(r"\b(?:the\s+)(\d{1,2})(?:st|nd|rd|th)\b", re.IGNORECASE),
    # 9/29 or 29/9
    re.compile(r"(?<![\d:])(\d{1,2})/(\d{1,2})(?![\d/])"),
)
_EN_WEEKDAY_WORD = re.compile(rf"\b{EN_WEEKDAY}\b")
_ORDINAL_PATTERNS = (
    re.compile(r"第\s*([0-9]|[一二两三四五六七八九])\s*(?:个|项|种|条|个时间)?"),
    re.compile(r"(?:option|choice|slot|number|no\.?|#)\s*([1-9])\b", re.IGNORECASE),
    re.compile(rf"\b({'|'.join(EN_ORDINALS)})\b", re.IGNORECASE),
    # A bare digit standing alone ("2", "2 works", "选2").
    re.compile(r"(?<![\d:/.])([1-9])(?![\d:/.])"),
)


def own_words(body: str) -> str:
    """The lines the reply's author wrote (`contracts.transport`): without what it quotes of what
    it answers, from a quoting header ("On … wrote:", "-----Original Message-----") on, and
    without its signature. A reply that is nothing but a quotation has no words of its own."""
    unwrapped = unwrap(body, own=None)
    return "" if unwrapped.promoted else unwrapped.text


def _hour(hour: int, period: str | None) -> int:
    period = (period or "").casefold().replace(".", "")
    if period in ("pm", "下午", "晚上") and hour < 12:
        return hour + 12
    if period in ("am", "上午", "早上") and hour == 12:
        return 0
    if period == "中午" and hour < 11:
        return hour + 12
    return hour


def _times(text: str) -> tuple[set[tuple[int, int]], str]:
    """The clock times the text names (hour, minute), and the text without them."""
    found: set[tuple[int, int]] = set()

    def take(match: re.Match[str], kind: int) -> str:
        if kind == 0:
            found.add((_hour(int(match[1]), match[3]), int(match[2])))
        elif kind == 1:
            found.add((_hour(int(match[1]), match[2]), 0))
        else:
            spoken = number(match[2])
            if spoken is None:
                return match[0]
            minute = {"半": 30, "一刻": 15, "三刻": 45}.get(match[3] or "", 0)
            if match[4]:
                minute = int(match[4])
            found.add((_hour(spoken, match[1]), minute))
            if match[1] is None and spoken < 12:
                # "三点" without 上午/下午: either half of the day.
                found.add((spoken + 12, minute))
        return " "

    for kind, pattern in enumerate(_TIME_PATTERNS):
        text = pattern.sub(partial(take, kind=kind), text)
    return found, text


def _dates(text: str) -> tuple[set[tuple[int | None, int]], str]:
    """The days the text names (month or None, day of month), and the text without them."""
    found: set[tuple[int | None, int]] = set()

    def take(match: re.Match[str], kind: int) -> str:
        if kind == 0:
            found.add((int(match[1]), int(match[2])))
        elif kind in (1, 4):
            found.add((None, int(match[1])))
        elif kind == 2:
            found.add((EN_MONTHS[match[1].casefold()[:3]], int(match[2])))
        elif kind == 3:
            found.add((EN_MONTHS[match[2].casefold()[:3]], int(match[1])))
        else:
            first, second = int(match[1]), int(match[2])
            # Month/day or day/month: whichever the slots have.
            found.update({(first, second), (second, first)})
        return " "

    for kind, pattern in enumerate(_DATE_PATTERNS):
        text = pattern.sub(partial(take, kind=kind), text)
    return found, text


def _weekdays(text: str) -> tuple[set[int], str]:
    found: set[int] = set()

    def zh(match: re.Match[str]) -> str:
        found.add(ZH_WEEKDAY[match[1]])
        return " "

    text = re.sub(r"(?:周|星期|礼拜)\s*([一二三四五六日天])", zh, text)
    for word in _EN_WEEKDAY_WORD.findall(text.casefold()):
        found.add(EN_WEEKDAY_PREFIX[word[:3]])
    return found, text


def _ordinals(text: str, count: int) -> set[int]:
    found: set[int] = set()
    for pattern in _ORDINAL_PATTERNS:
        for match in pattern.finditer(text):
            raw = match[1].casefold()
            value = EN_ORDINALS.get(raw) or number(raw)
            if value is not None:
                found.add(value)
        text = pattern.sub(" ", text)
    # A number that is no slot's ("5 people") names nothing; a slot's number names it.
    return {n - 1 for n in found if 1 <= n <= count}


def _matching(
    starts: Sequence[datetime],
    zones: Iterable[ZoneInfo],
    wanted: Collection[Hashable],
    key: Callable[[datetime], Hashable],
) -> set[int]:
    """The slots whose start, in any of `zones`, has a `key` among `wanted`."""
    return {i for i, start in enumerate(starts) for tz in zones if key(start.astimezone(tz)) in wanted}


def choose(text: str, starts: Sequence[datetime], zones: Sequence[ZoneInfo]) -> int | None:
    """The index of the one slot (by its start) the reply's own words name, or None."""
    words = own_words(text)
    if not words or _REFUSAL.search(words):
        return None
    times, rest = _times(words)
    dates, rest = _dates(rest)
    weekdays, rest = _weekdays(rest)
    ordinals = _ordinals(rest, len(starts))
    every = set(range(len(starts)))
    named: list[set[int]] = []
    if ordinals:
        named.append(ordinals)
    if weekdays:
        named.append(_matching(starts, zones, weekdays, lambda t: t.isoweekday()))
    if times:
        named.append(_matching(starts, zones, times, lambda t: (t.hour, t.minute)))
    if dates:
        by_day = _matching(starts, zones, {d for m, d in dates if m is None}, lambda t: t.day)
        by_date = _matching(
            starts, zones, {(m, d) for m, d in dates if m is not None}, lambda t: (t.month, t.day)
        )
        named.append(by_day | by_date)
    if not named:
        return None
    chosen = set(every)
    for cue in named:
        chosen &= cue
    return chosen.pop() if len(chosen) == 1 else None
