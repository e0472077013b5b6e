"""The short-reply parser: "周日下午2点" -> {"weekday": 7, "time": "14:00"}, with zero model calls.

It answers only when the whole message is a short, bounded date/time phrase; anything else is `{}`
and the model decides. Pure: no clock, no zone - it emits symbols, the resolver does the dates.

What it understands (Chinese and English):

* weekdays in every common form (周日 周天 星期天 礼拜六, Sunday sun Sat.) -> `weekday` 1..7 when
  bare; with an explicit week word they become date symbols: 这周三/本周三/this Wednesday/Wednesday
  this week -> `W3+0`, 下周三/next Wednesday -> `W3+1`, 下下周三 -> `W3+2`, 上周三/last Wednesday ->
  `W3-1`; 周末/weekend -> `WE+0`, 下周末/next weekend -> `WE+1`;
* relative days 今天 明天 后天 大后天 (today tomorrow "day after tomorrow") -> `D` .. `D+3`,
  三天后/in 3 days -> `D+3`; explicit dates 9月30日, 十月一号, 9/30, Sept 30, 30 September ->
  `--09-30`, and with a year (2026年9月30日, 2026-09-30, September 30, 2026) -> `2026-09-30`;
  Chinese holidays (国庆节, 春节, 中秋 ...) -> `H:<name>`;
* times: 24-hour (14:00, 14点, 14点30), Chinese numerals with 两 十 半 一刻 三刻 零, minutes after
  点 (下午3点45 -> 15:45, 三点零五 -> 03:05), periods 凌晨 早上 上午 中午 下午 傍晚 晚上 and
  am/pm/morning/afternoon/evening, noon; ranges (下午2点到4点, 2-4pm, 14:00-16:00) -> `time` and
  `end_time`.

Reading rules (decisions, each one a test):

* An hour without any period word or am/pm is read literally on the 24-hour clock: 三点 -> 03:00,
  15点 -> 15:00. 12am -> 00:00, 12pm / 中午12点 -> 12:00, 上午12点 -> 12:00.
* 晚上 covers 5..11 (晚上8点 -> 20:00). 晚上12点, 半夜12点, midnight, and 晚上1..4点 are not
  bounded - which calendar day is meant is exactly the question - so the reply is `{}`.
* A single-digit minute with neither 分 nor 零 (三点五) is ambiguous (3:05 or 3:30) -> `{}`.
* In a range the end inherits the start's period (下午2点到4点 -> 14:00-16:00) and the start inherits
  the end's am/pm (2-4pm); an end not after the start is `{}` (no crossing midnight).
* Never a guess: two different dates, two times that are not a range, an impossible date
  (2月30日), a recurrence (每周三, every), a negation or alternative (不是, 或者, not, or), a relative
  shift (早点, 晚一点, later), a question word (几, 哪, 什么, 有空, what, which, when), leftover digits
  or time words we did not consume (30号, 下个月, next month), or a lone 天 all give `{}`.
  Abbreviated weekdays that are also words (sat, sun, wed ...) count only when nothing but fillers
  surrounds them: "sat 10am" is Saturday, "I sat down" is not.
* Short means short: after removing the recognised tokens, filler words (好的, 吧, 改到, ok,
  please, let's ...) and punctuation, more than 12 other CJK characters or more than 6 other
  words means a free sentence, not a reply -> `{}`; so does a leftover of more than 20 CJK
  characters or 10 words fillers included.

Transport wrappers are not the user's words: `strip_transport` removes quoted lines (`>`),
channel tags (`<untrusted_channel_message ...>`, `[Telegram]`) and forwarded blocks before parsing,
so `parse_reply(wrapper(s)) == parse_reply(s)` (the gateway does the primary stripping).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date

from calagent.contracts.time import SlotPatch

__all__ = ["ReplyParse", "analyse_reply", "parse_reply", "strip_transport"]

_MAX_TEXT = 300
_MAX_CJK_LEFTOVER = 12
_MAX_WORD_LEFTOVER = 6
# Fillers are generous, so a free sentence made mostly of them is caught by its raw size.
_MAX_CJK_RAW = 20
_MAX_WORDS_RAW = 10

# --------------------------------------------------------------------------- transport


_FORWARD_START = re.compile(
    r"^\s*(?:-{2,}\s*(?:forwarded message|original message|转发的?邮件|原始邮件|转发消息)\s*-{2,}"
    r"|(?:fwd?|转发)\s*[:：]|begin forwarded message:?)",
    re.IGNORECASE,
)
_CHANNEL_TAG = re.compile(r"</?\s*untrusted_channel_message\b[^>]*>", re.IGNORECASE)
_CHANNEL_PREFIX = re.compile(
    r"^\s*\[(?:telegram|wechat|weixin|微信|email|e-mail|邮件|slack|whatsapp|signal|sms|短信|web)\]\s*",
    re.IGNORECASE,
)
_REPLY_HEADER = re.compile(
    r"^\s*(?:on\b.{0,200}\bwrote:|在.{0,200}(?:写道|wrote)\s*[:：])\s*$", re.IGNORECASE
)


def strip_transport(text: str) -> str:
    """The user's own words of a message: without quotes, channel tags and forwarded blocks.

    Line based and deliberately simple: a line starting with `>` is a quote; an
    `<untrusted_channel_message ...>` tag (not its content) and a leading `[Telegram]`-style tag are
    envelope; from a `Fwd:` / `---------- Forwarded message ----------` line to the end is someone
    else's text; an "On ... wrote:" header line belongs to the quote below it.
    """
    text = _CHANNEL_TAG.sub("\n", text)
    kept: list[str] = []
    for line in text.splitlines():
        if _FORWARD_START.match(line):
            break
        if line.lstrip().startswith((">", "＞")) or _REPLY_HEADER.match(line):
            continue
        kept.append(_CHANNEL_PREFIX.sub("", line))
    return "\n".join(kept).strip()


# --------------------------------------------------------------------------- numbers

_CN_DIGITS = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3,
    "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
_EN_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip


def _number(text: str) -> int | None:
    """Arabic or Chinese numerals up to 99 (十, 十二, 二十三, 两, 零五)."""
    if text.isdigit():
        return int(text)
    if text in _EN_NUMBERS:
        return _EN_NUMBERS[text]
    if "十" in text:
        tens_text, _, ones_text = text.partition("十")
        if tens_text in ("", "一"):
            tens = 1
        elif len(tens_text) == 1 and tens_text in _CN_DIGITS and tens_text not in "零〇两":
            tens = _CN_DIGITS[tens_text]
        else:
            return None
        if ones_text == "":
            return tens * 10
        if len(ones_text) == 1 and ones_text in _CN_DIGITS and ones_text not in "零〇两":
            return tens * 10 + _CN_DIGITS[ones_text]
        return None
    if len(text) == 2 and text[0] in "零〇" and text[1] in _CN_DIGITS:
        return _CN_DIGITS[text[1]]
    if len(text) == 1 and text in _CN_DIGITS:
        return _CN_DIGITS[text]
    return None


# --------------------------------------------------------------------------- the token grammar

_CN = "[零〇一二两三四五六七八九十]"
_NUM = rf"(?:[0-9]{{1,2}}|{_CN}{{1,3}})"
# Two-character words before 早/晚 so 晚上 is not read as 晚 + 上.
_ZH_PERIOD = "凌晨|清晨|早上|早晨|上午|中午|午间|下午|午后|傍晚|黄昏|晚上|晚间|夜里|夜晚|夜间|深夜|半夜|早|晚"
_MER = r"(?:[ap]\.?m\b\.?|[ap]\.m\.)"
_ZH_WD = "一二三四五六日天1234567"
_EN_WD = (
    r"(?:monday|mon|tuesday|tues|tue|wednesday|weds|wed|thursday|thurs|thur|thu"
    r"|friday|fri|saturday|sat|sunday|sun)"
)
_EN_MONTH = (
    r"(?:january|jan|february|feb|march|mar|april|apr|may|june|jun|july|jul|august|aug"
    r"|september|sept|sep|october|oct|november|nov|december|dec)"
)


def _clock(p: str) -> str:
    """One clock time; group names carry the prefix `p` so two can sit in one range pattern."""
    return (
        rf"(?:(?P<{p}per>{_ZH_PERIOD})\s*)?"
        r"(?:"
        rf"(?P<{p}h>{_NUM})\s*(?:点钟?|點鐘?|时|時)\s*"
        rf"(?:(?P<{p}half>半)|(?P<{p}q>[一三])刻|(?P<{p}m>{_NUM})\s*(?P<{p}fen>分)?|整)?"
        rf"|(?P<{p}ch>[0-9]{{1,2}})(?::|\.(?=[0-9]{{2}}\s*{_MER}))(?P<{p}cm>[0-9]{{2}})"
        rf"|(?P<{p}eh>[0-9]{{1,2}})(?=\s*(?:{_MER}|o'?clock\b))"
        r")"
        rf"(?:\s*(?P<{p}mer>{_MER}|o'?clock\b))?"
    )


_RANGE_SEP = r"\s*(?:到|至|~|〜|-|—|–|\bto\b|\buntil\b|\btill\b|\bthrough\b)\s*"

_TOKEN_ALTERNATIVES: tuple[tuple[str, str], ...] = (
    # Phrases that look like times but shift or blur them: "a bit later", "a little".
    ("shift", r"早一点|晚一点|早点|晚点|一点点|一点儿|有点|有一点|差一点|快一点|慢一点|早些|晚些"),
    ("recur", r"每天|每周|每个?星期|每个?礼拜|每月|每年|每晚|每早|\bevery\b|\bdaily\b|\bweekly\b"),
    ("midnight", r"\bmidnight\b|午夜|半夜十二点|半夜12点"),
    # Dates -----------------------------------------------------------------------------------
    (
        "zhymd",
        rf"(?P<zy>[0-9]{{4}})\s*年\s*(?P<zm>{_NUM})\s*月\s*(?P<zd>{_NUM})\s*[日号號]?",
    ),
    ("isod", r"(?P<iy>[0-9]{4})[-/.](?P<im>[0-9]{1,2})[-/.](?P<id>[0-9]{1,2})(?![0-9])"),
    ("zhmd", rf"(?P<zm2>{_NUM})\s*月\s*(?P<zd2>{_NUM})\s*[日号號]?"),
    ("slashd", r"(?<![0-9])(?P<sm>[0-9]{1,2})/(?P<sd>[0-9]{1,2})(?:/(?P<sy>[0-9]{4}))?(?![0-9/])"),
    (
        "enmd",
        rf"\b(?P<em>{_EN_MONTH})\b\.?\s*(?P<ed>[0-9]{{1,2}})(?:st|nd|rd|th)?\b(?:\s*,?\s*(?P<ey>[0-9]{{4}})\b)?",
    ),
    (
        "endm",
        rf"\b(?P<ed2>[0-9]{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<em2>{_EN_MONTH})\b\.?(?:\s*,?\s*(?P<ey2>[0-9]{{4}})\b)?",
    ),
    ("zhhol", r"(?P<hol>国庆节?|春节|除夕|中秋节?|清明节?|端午节?|元旦|劳动节|五一劳动节|五一)"),
    ("enhol", r"\bnew year'?s day\b"),
    ("zhrel", r"(?P<rel>大后天|后天|明天|明日|明儿|今天|今日|今儿|昨天|前天)"),
    ("zhdp", r"(?P<dpd>今|明|昨)(?P<dpp>晚|早)(?:上)?"),
    ("zhndays", rf"(?P<nd>{_NUM})\s*天\s*(?:以后|之后|后)"),
    (
        "zhweek",
        rf"(?P<wp>下下个?|下个?|这个?|本|上上个?|上个?)?\s*(?:周|週|星期|礼拜|禮拜)(?P<wd>[{_ZH_WD}])",
    ),
    ("zhweekend", r"(?P<wep>下下个?|下个?|这个?|本|上个?)?\s*[周週]末"),
    ("enrel", r"\b(?P<erel>(?:the\s+)?day\s+after\s+tomorrow|tomorrow|tmrw|tmr|today|tonight|yesterday)\b"),
    ("enndays", r"\bin\s+(?P<end>[0-9]{1,2}|one|two|three|four|five|six|seven|eight|nine|ten)\s+days?\b"),
    (
        "enweek",
        rf"\b(?:(?P<ewp>next|this|last)\s+(?:week\s+(?:on\s+)?)?)?(?P<ewd>{_EN_WD})\b\.?"
        r"(?:\s+(?P<ews>next|this|last)\s+week\b)?",
    ),
    ("enweekend", r"\b(?:(?P<ewep>next|this)\s+)?weekend\b"),
    ("enthisper", r"\bthis\s+(?P<etp>morning|afternoon|evening)\b"),
    # Times -----------------------------------------------------------------------------------
    (
        "zhrange2",
        rf"(?:(?P<r2per>{_ZH_PERIOD})\s*)?(?P<r2a>{_NUM})\s*(?:-|~|到|至)\s*(?P<r2b>{_NUM})\s*(?:点钟?|时)",
    ),
    (
        "enrange2",
        r"(?P<r3a>[0-9]{1,2})(?::(?P<r3am>[0-9]{2}))?\s*(?:-|–|—|\bto\b|\buntil\b|\btill\b)\s*"
        rf"(?P<r3b>[0-9]{{1,2}})(?::(?P<r3bm>[0-9]{{2}}))?\s*(?P<r3mer>{_MER})",
    ),
    ("range", rf"{_clock('a')}{_RANGE_SEP}{_clock('b')}"),
    ("clock", _clock("c")),
    (
        "enat",
        r"\bat\s+(?P<ath>[0-9]{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b"
        rf"(?![:.][0-9])(?!\s*(?:{_MER}|o'?clock\b))",
    ),
    ("noon", r"\b(?:12\s*)?(?:noon|midday)\b|正午|中午12点整"),
    ("zhper", rf"(?P<zp>{_ZH_PERIOD}|早上好)"),
    ("enper", r"\b(?:in\s+the\s+|at\s+)?(?P<ep>morning|afternoon|evening|night)\b"),
)

_TOKEN_RE = re.compile("|".join(f"(?P<T_{name}>{body})" for name, body in _TOKEN_ALTERNATIVES))

_ZH_WEEKDAY = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "日": 7, "天": 7}
_EN_WEEKDAY_PREFIX = {"mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6, "sun": 7}
_EN_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_ZH_HOLIDAYS = {
    "国庆": "national_day", "国庆节": "national_day", "春节": "spring_festival", "除夕": "new_years_eve",
    "中秋": "mid_autumn", "中秋节": "mid_autumn", "清明": "qingming", "清明节": "qingming",
    "端午": "dragon_boat", "端午节": "dragon_boat", "元旦": "new_year", "劳动节": "labor_day",
    "五一劳动节": "labor_day", "五一": "labor_day",
}  # fmt: skip
_ZH_REL = {
    "今天": 0, "今日": 0, "今儿": 0, "明天": 1, "明日": 1, "明儿": 1, "后天": 2, "大后天": 3,
    "昨天": -1, "前天": -2,
}  # fmt: skip
_EN_REL = {"today": 0, "tonight": 0, "tomorrow": 1, "tmr": 1, "tmrw": 1, "yesterday": -1}

# Period -> which written hours it accepts and how each maps to 24h; an hour outside is ambiguous.
_AM = {h: h for h in range(13)}
_PM = {**{h: h + 12 for h in range(1, 12)}, 12: 12, **{h: h for h in range(13, 24)}}
_EVENING = {**{h: h + 12 for h in range(5, 12)}, **{h: h for h in range(17, 24)}}
_PERIODS: dict[str, dict[int, int]] = {
    "凌晨": {**{h: h for h in range(7)}, 12: 0},
    "清晨": {h: h for h in range(4, 9)},
    "早上": _AM, "早晨": _AM, "上午": _AM, "早": _AM, "morning": {h: h for h in range(1, 12)},
    "中午": {11: 11, 12: 12, 1: 13, 2: 14, 3: 15, 13: 13, 14: 14},
    "午间": {11: 11, 12: 12, 1: 13, 2: 14, 13: 13, 14: 14},
    "下午": _PM, "午后": _PM, "afternoon": {**{h: h + 12 for h in range(1, 8)}, 12: 12},
    "傍晚": {**{h: h + 12 for h in range(4, 9)}, **{h: h for h in range(16, 21)}},
    "黄昏": {**{h: h + 12 for h in range(4, 9)}, **{h: h for h in range(16, 21)}},
    "晚上": _EVENING, "晚间": _EVENING, "夜晚": _EVENING, "夜间": _EVENING, "晚": _EVENING,
    "evening": _EVENING, "night": {h: h + 12 for h in range(6, 12)},
    "夜里": {**{h: h + 12 for h in range(8, 12)}, **{h: h for h in range(20, 24)}},
    "深夜": {**{h: h + 12 for h in range(9, 12)}, **{h: h for h in (1, 2, 3, 4, 21, 22, 23)}},
    "半夜": {h: h for h in range(1, 5)},
    "am": {**{h: h for h in range(1, 12)}, 12: 0},
    "pm": {**{h: h + 12 for h in range(1, 12)}, 12: 12},
}  # fmt: skip

# Words that carry no slot and do not make a reply long. Longest first so 好的 wins over 好.
_ZH_FILLER_TEXT = """
没问题 没关系 不错 好的 好吧 好啊 好呀 好 行吧 行 可以的 可以 对的 对 是的
嗯嗯 嗯 哦 噢 啊 呀 吧 呢 啦 了 的 哈 嘛 那就 那 就 改到 改成 改为 改在 改
换到 换成 换 定到 定在 定 放到 放在 约在 约 安排到 安排在 安排 在 是 到
要 我们 我 咱们 请 麻烦 帮我 帮忙 一下 吗 时候 那天 这天 当天 那一天
左右 大概 差不多 开始 直接 创建 建 把 它 时间 日期 这个 那个 这样 就这样
确认 也行 都行 还行 谢谢 谢了 辛苦 和 跟 从 起 整
"""
_EN_FILLER_TEXT = """
ok okay k sure yes yeah yep yup fine great good perfect cool alright right please pls plz then
let's lets let us make it do on at the a an for from in how about maybe move change to reschedule
schedule set that this one works work sounds sound go with instead i we me can could should would
will be is it's its thanks thank you thx around approx approximately starting start and hi hey hello
put book
"""
# Longest first so 好的 is removed as a whole before 好.
_ZH_FILLER_RE = re.compile("|".join(map(re.escape, sorted(_ZH_FILLER_TEXT.split(), key=len, reverse=True))))
_EN_FILLERS = frozenset(_EN_FILLER_TEXT.split())
_BLOCKER_RE = re.compile(
    r"[0-9]|不|别|没|未|非|否|或|还是|每|前|后|以|之|号|號|月|周|星期|礼拜|点|點|时|時|分|年|天|早|晚|取消"
    r"|什么|几|哪|有空|有没有|忙"
    r"|\b(?:not|no|nope|don'?t|doesn'?t|isn'?t|can'?t|cannot|won'?t|never|cancel|or|every|before|after|until"
    r"|till|by|except|week|weeks|month|months|year|years|day|days|hour|hours|minutes?|next|last|coming|earlier"
    r"|later|midnight|noon|am|pm|o'?clock|either|but|neither|nor|what|which|when|where|available|busy)\b"
)
_CJK_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD_RE = re.compile(r"[^\W\d_](?:[^\W\d_]|')*")


_Clock = tuple[int | None, int, str | None]  # written hour, minute, period word or am/pm


@dataclass(slots=True)
class ReplyParse:
    """What the scan found; `patch()` is `{}` unless the reply is bounded and unambiguous."""

    dates: list[tuple[str, str | None, int | None]] = field(default_factory=list)  # (kind, symbol, weekday)
    times: list[tuple[int, int]] = field(default_factory=list)
    ranges: list[tuple[int, int, int, int]] = field(default_factory=list)
    periods: list[str] = field(default_factory=list)
    pending: list[_Clock] = field(default_factory=list)
    pending_ranges: list[tuple[_Clock, _Clock]] = field(default_factory=list)
    leftover: str = ""
    # "sat", "sun", "wed" are also plain words: trusted only in a reply with no other words.
    loose_weekday: bool = False
    reason: str | None = None

    def refuse(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason


def _fmt(h: int, m: int) -> str:
    return f"{h:02d}:{m:02d}"


def _valid_month_day(month: int, day: int, year: int | None) -> bool:
    try:
        date(year if year is not None else 2000, month, day)  # 2000 is leap: Feb 29 allowed
    except ValueError:
        return False
    return True


def _add_date(out: ReplyParse, month: int | None, day: int | None, year: int | None) -> None:
    if month is None or day is None or not _valid_month_day(month, day, year):
        out.refuse("impossible date")
        return
    if year is not None:
        out.dates.append(("date", f"{year:04d}-{month:02d}-{day:02d}", None))
    else:
        out.dates.append(("date", f"--{month:02d}-{day:02d}", None))


_WEEK_WORDS = {"下下": 2, "下": 1, "这": 0, "本": 0, "上": -1, "上上": -2, "next": 1, "this": 0, "last": -1}


def _week_offset(word: str | None) -> int | None:
    if word is None:
        return None
    return _WEEK_WORDS.get(word.rstrip("个"))


def _signed(n: int) -> str:
    return f"+{n}" if n >= 0 else str(n)


def _apply_period(hour: int, period: str | None) -> int | None:
    if period is None:
        return hour if 0 <= hour <= 23 else None
    return _PERIODS.get(period, {}).get(hour)


def _clock_parts(m: re.Match[str], p: str) -> _Clock | None:
    """(written hour, minute, own period) of one clock match; None if malformed."""
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
        hour = _number(g(f"{p}h"))
        if g(f"{p}half"):
            minute: int | None = 30
        elif g(f"{p}q"):
            minute = 15 if g(f"{p}q") == "一" else 45
        elif g(f"{p}m") is not None:
            text = g(f"{p}m")
            minute = _number(text)
            # 三点五 / 3点5 could be 3:05 or 3:30; 三点零五, 3点05, 3点5分, 三点十 are not.
            if len(text) == 1 and minute is not None and minute < 10 and not g(f"{p}fen"):
                return None
        else:
            minute = 0
        if hour is None or minute is None:
            return None
        return hour, minute, period
    if g(f"{p}ch") is not None:
        return int(g(f"{p}ch")), int(g(f"{p}cm")), period
    return int(g(f"{p}eh")), 0, period


def _scan(text: str, out: ReplyParse) -> None:
    leftover: list[str] = []
    pos = 0
    for m in _TOKEN_RE.finditer(text):
        leftover.append(text[pos : m.start()])
        pos = m.end()
        kind = m.lastgroup
        if kind is None:  # pragma: no cover - every alternative is a named group
            continue
        kind = kind[2:]
        g = m.group
        if kind in ("shift", "recur", "midnight"):
            out.refuse(kind)
        elif kind == "zhymd":
            _add_date(out, _number(g("zm")), _number(g("zd")), int(g("zy")))
        elif kind == "isod":
            _add_date(out, int(g("im")), int(g("id")), int(g("iy")))
        elif kind == "zhmd":
            _add_date(out, _number(g("zm2")), _number(g("zd2")), None)
        elif kind == "slashd":
            _add_date(out, int(g("sm")), int(g("sd")), int(g("sy")) if g("sy") else None)
        elif kind in ("enmd", "endm"):
            suffix = "" if kind == "enmd" else "2"
            month, year = _EN_MONTHS[g(f"em{suffix}")[:3]], g(f"ey{suffix}")
            _add_date(out, month, int(g(f"ed{suffix}")), int(year) if year else None)
        elif kind == "zhhol":
            out.dates.append(("date", f"H:{_ZH_HOLIDAYS[g('hol')]}", None))
        elif kind == "enhol":
            out.dates.append(("date", "H:new_year", None))
        elif kind == "zhrel":
            out.dates.append(("date", f"D{_signed(_ZH_REL[g('rel')])}" if _ZH_REL[g("rel")] else "D", None))
        elif kind == "zhdp":
            shift = {"今": 0, "明": 1, "昨": -1}[g("dpd")]
            out.dates.append(("date", f"D{_signed(shift)}" if shift else "D", None))
            out.periods.append("晚上" if g("dpp") == "晚" else "早上")
        elif kind == "zhndays":
            n = _number(g("nd"))
            if n is None:
                out.refuse("bad number")
            else:
                out.dates.append(("date", f"D+{n}", None))
        elif kind == "zhweek":
            wd = g("wd")
            weekday = _ZH_WEEKDAY[wd] if wd in _ZH_WEEKDAY else int(wd)
            offset = _week_offset(g("wp"))
            if offset is None:
                out.dates.append(("weekday", None, weekday))
            else:
                out.dates.append(("date", f"W{weekday}{_signed(offset)}", None))
        elif kind == "zhweekend":
            offset = _week_offset(g("wep"))
            out.dates.append(("date", f"WE{_signed(offset if offset is not None else 0)}", None))
        elif kind == "enrel":
            word = g("erel")
            if word.endswith("after tomorrow"):
                out.dates.append(("date", "D+2", None))
            else:
                shift = _EN_REL[word]
                out.dates.append(("date", f"D{_signed(shift)}" if shift else "D", None))
                if word == "tonight":
                    out.periods.append("evening")
        elif kind == "enndays":
            out.dates.append(("date", f"D+{_number(g('end'))}", None))
        elif kind == "enweek":
            weekday = _EN_WEEKDAY_PREFIX[g("ewd")[:3]]
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
            a, b = _number(g("r2a")), _number(g("r2b"))
            if a is None or b is None:
                out.refuse("bad number")
            else:
                out.pending_ranges.append(((a, 0, g("r2per")), (b, 0, None)))
        elif kind == "enrange2":
            mer = g("r3mer").replace(".", "")
            a_part: _Clock = (int(g("r3a")), int(g("r3am") or 0), None)
            out.pending_ranges.append((a_part, (int(g("r3b")), int(g("r3bm") or 0), mer)))
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
            out.pending.append((_number(g("ath")), 0, None))
        elif kind == "noon":
            out.times.append((12, 0))
        elif kind == "zhper":
            if g("zp") != "早上好":
                out.periods.append(g("zp"))
        elif kind == "enper":
            out.periods.append(g("ep"))
    leftover.append(text[pos:])
    out.leftover = " ".join(leftover)


def _add_range(out: ReplyParse, a: _Clock, b: _Clock, default_period: str | None) -> None:
    a_hour, a_min, a_per = a
    b_hour, b_min, b_per = b
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
    if a_per is None and b_per in ("am", "pm"):
        # 2-4pm: the start shares the end's am/pm, unless that puts it after the end (11-1pm).
        a_per = b_per
        shared, end_hour = _apply_period(a_hour, a_per), _apply_period(b_hour, b_per)
        if shared is not None and end_hour is not None and (shared, a_min) >= (end_hour, b_min):
            a_per = "am" if b_per == "pm" else "pm"
    start, end = _apply_period(a_hour, a_per), _apply_period(b_hour, b_per)
    if start is None or end is None or a_min > 59 or b_min > 59:
        out.refuse("time outside its period")
        return
    if (end, b_min) <= (start, a_min):
        out.refuse("range end not after start")
        return
    out.ranges.append((start, a_min, end, b_min))


def _leftover_is_small(leftover: str, loose_weekday: bool) -> str | None:
    if len(_CJK_RE.findall(leftover)) > _MAX_CJK_RAW:
        return "long free text"
    if sum(1 for w in _WORD_RE.findall(leftover) if not _CJK_RE.match(w)) > _MAX_WORDS_RAW:
        return "long free text"
    rest = _ZH_FILLER_RE.sub(" ", leftover)
    if _BLOCKER_RE.search(rest):
        return "unconsumed date/time, negation or question words"
    if len(_CJK_RE.findall(rest)) > _MAX_CJK_LEFTOVER:
        return "long free text"
    words = [w for w in _WORD_RE.findall(rest) if not _CJK_RE.match(w)]
    others = sum(1 for w in words if w not in _EN_FILLERS)
    if others > _MAX_WORD_LEFTOVER:
        return "long free text"
    if loose_weekday and others:
        return "abbreviated weekday inside other words"
    return None


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return text.replace("’", "'").replace("：", ":")


def analyse_reply(text: str) -> ReplyParse:
    """The full scan, with the reason a reply was refused (for tests and debugging)."""
    out = ReplyParse()
    body = _normalise(strip_transport(text))
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
    for hour, minute, own in out.pending:
        if hour is None:
            out.refuse("bad number")
            continue
        resolved = _apply_period(hour, own if own is not None else period)
        if own is not None and period is not None and _apply_period(hour, period) != resolved:
            out.refuse("two periods")  # 明天早上下午3点: which one?
        if resolved is None or minute > 59:
            out.refuse("time outside its period")
            continue
        out.times.append((resolved, minute))
    for a, b in out.pending_ranges:
        _add_range(out, a, b, period)
    reason = _leftover_is_small(out.leftover, out.loose_weekday)
    if reason:
        out.refuse(reason)
    if len(set(out.dates)) > 1:
        out.refuse("two dates")
    if len(set(out.times)) + len(set(out.ranges)) > 1:
        out.refuse("two times")
    return out


def _patch_of(out: ReplyParse) -> SlotPatch:
    if out.reason is not None:
        return SlotPatch.model_construct()
    symbol: str | None = None
    weekday: int | None = None
    start: str | None = None
    end: str | None = None
    if out.dates:
        _, symbol, weekday = out.dates[0]
    if out.ranges:
        sh, sm, eh, em = out.ranges[0]
        start, end = _fmt(sh, sm), _fmt(eh, em)
    elif out.times:
        start = _fmt(*out.times[0])
    values = {"date": symbol, "weekday": weekday, "time": start, "end_time": end}
    # Only the slots the reply bound count as set, so `exclude_unset` and `exclude_none` agree.
    return SlotPatch.model_construct(
        _fields_set={key for key, value in values.items() if value is not None},
        date=symbol,
        weekday=weekday,
        time=start,
        end_time=end,
    )


def parse_reply(text: str) -> SlotPatch:
    """The slot patch of a short reply; `{}` when nothing bounded and unambiguous was said."""
    try:
        return _patch_of(analyse_reply(text))
    except Exception:  # a parser bug must degrade to "the model decides", never crash the turn
        return SlotPatch.model_construct()
