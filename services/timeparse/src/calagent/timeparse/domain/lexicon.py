"""The words of the short-reply parser: numerals, weekdays, months, holidays, relative days, periods
and fillers. Data and tiny lookups only; the token grammar is in `grammar`, the reading in `replies`.
"""

from __future__ import annotations

import re

from calagent.contracts.choosing import POINTING_WORDS
from calagent.contracts.numerals import ZH_DIGITS, number

__all__ = [
    "BLOCKER_RE",
    "EN_FILLERS",
    "EN_MONTHS",
    "EN_REL",
    "EN_WEEKDAY_PREFIX",
    "MID_PERIODS",
    "PERIODS",
    "POINTING_RE",
    "RECURRENCE_MARKERS",
    "REPLY_FILLERS",
    "REPLY_FILLER_RE",
    "WEEK_WORDS",
    "WORD_RE",
    "ZH_DAYPART",
    "ZH_FILLER_RE",
    "ZH_HOLIDAYS",
    "ZH_REL",
    "ZH_WEEKDAY",
    "date_order",
    "year_number",
]

# --------------------------------------------------------------------------- numbers


def year_number(text: str) -> int | None:
    """A year in Arabic or Chinese digits (2027, 二零二七, 二〇二七) or read out in thousands
    (两千零四 2004, 二千零二十六 2026, 两千年 2000); None otherwise. Read-out years need 零 before a
    tail under 100: 两千四 is 2400 in speech and 两千二十六 is no year anyone writes, so both are
    refused rather than guessed."""
    if "千" in text:
        head, _, tail = text.partition("千")
        thousands = {"一": 1, "二": 2, "两": 2}.get(head)
        if thousands is None:
            return None
        if tail == "":
            return thousands * 1000
        rest = number(tail[1:]) if tail.startswith("零") and len(tail) > 1 else None
        if rest is None or not 1 <= rest <= 99 or tail[1] in "零〇":
            return None
        return thousands * 1000 + rest
    if len(text) != 4:
        return None
    if text.isdigit():
        return int(text)
    digits = [ZH_DIGITS.get(ch) for ch in text]
    if any(d is None for d in digits) or "两" in text:
        return None
    return int("".join(str(d) for d in digits))


# --------------------------------------------------------------------------- dates

ZH_WEEKDAY = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "日": 7, "天": 7}
EN_WEEKDAY_PREFIX = {"mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6, "sun": 7}
EN_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
ZH_HOLIDAYS = {
    "国庆": "national_day", "国庆节": "national_day", "春节": "spring_festival", "除夕": "new_years_eve",
    "中秋": "mid_autumn", "中秋节": "mid_autumn", "清明": "qingming", "清明节": "qingming",
    "端午": "dragon_boat", "端午节": "dragon_boat", "元旦": "new_year", "劳动节": "labor_day",
    "五一劳动节": "labor_day", "五一": "labor_day",
}  # fmt: skip
# Each 大 moves one day further out: 后天 D+2, 大后天 D+3, 大大后天 D+4; 前天 D-2, 大前天 D-3,
# 大大前天 D-4. The grammar reads any run of 大 before 后天/前天 as one token, so a form missing
# here (大大大后天) is refused rather than read as a shorter word with a stray 大 beside it.
ZH_REL = {
    "今天": 0, "今日": 0, "今儿": 0,
    "明天": 1, "明日": 1, "明儿": 1,
    "后天": 2, "大后天": 3, "大大后天": 4,
    "昨天": -1, "昨日": -1, "昨儿": -1,
    "前天": -2, "大前天": -3, "大大前天": -4,
}  # fmt: skip
# 今晨 / 明晨 / 昨晨 (formal "this / tomorrow's / yesterday's morning"), 今早, 今晚: the day word's
# second character -> the period it sets for a bare clock time beside it.
ZH_DAYPART = {"晚": "晚上", "早": "早上", "晨": "早上"}
EN_REL = {
    "today": 0, "tonight": 0, "tomorrow": 1, "tmr": 1, "tmrw": 1, "yesterday": -1,
    "day after tomorrow": 2, "day before yesterday": -2,
}  # fmt: skip
# Offsets of 下周 / next week; the same words count months (下个月 +1, 本月 0, last month -1).
WEEK_WORDS = {
    "下下": 2,
    "下": 1,
    "这": 0,
    "這": 0,
    "本": 0,
    "上": -1,
    "上上": -2,
    "next": 1,
    "this": 0,
    "last": -1,
}

# --------------------------------------------------------------------------- periods

# Period -> which written hours it accepts and how each maps to 24h; an hour outside is ambiguous.
_AM = {h: h for h in range(13)}
_PM = {**{h: h + 12 for h in range(1, 12)}, 12: 12, **{h: h for h in range(13, 24)}}
_EVENING = {**{h: h + 12 for h in range(5, 12)}, **{h: h for h in range(17, 24)}}
PERIODS: dict[str, dict[int, int]] = {
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
    # Mid-morning / mid-afternoon name no time on their own (the model asks), but beside an hour
    # they say which half of the day it is in: "at 3 mid-afternoon" is 15:00, "mid-morning at 3"
    # is refused. Mid-morning is 9..11, mid-afternoon 2..4 p.m.
    "midmorning": {h: h for h in range(9, 12)},
    "midafternoon": {**{h: h + 12 for h in range(2, 5)}, **{h: h for h in range(14, 17)}},
    "am": {**{h: h for h in range(1, 12)}, 12: 0},
    "pm": {**{h: h + 12 for h in range(1, 12)}, 12: 12},
}  # fmt: skip

# "mid-morning", "midmorning", "mid morning" -> the period key above.
MID_PERIODS = {"morning": "midmorning", "afternoon": "midafternoon"}

# --------------------------------------------------------------------------- numeric date order

# Which of 3/4's readings the people of a zone write: month first ("mdy": the United States,
# mainland China, Taiwan, Japan, Korea) or day first ("dmy": Europe, Australia, New Zealand, India,
# most of Latin America). A zone not listed (UTC, Canada, Hong Kong, Singapore, ...) says nothing,
# and a date whose two readings differ is then refused. Exact zones, then prefixes ending in "/".
_MONTH_FIRST_ZONES = """
America/New_York America/Chicago America/Denver America/Phoenix America/Los_Angeles America/Anchorage
America/Adak America/Boise America/Detroit America/Juneau America/Sitka America/Nome America/Yakutat
America/Metlakatla America/Menominee America/Indiana/ America/Kentucky/ America/North_Dakota/
Pacific/Honolulu US/ Asia/Shanghai Asia/Chongqing Asia/Harbin Asia/Urumqi PRC Asia/Taipei
Asia/Tokyo Japan Asia/Seoul ROK
"""
_DAY_FIRST_ZONES = """
Europe/ Australia/ Pacific/Auckland NZ Asia/Kolkata Asia/Calcutta America/Sao_Paulo America/Argentina/
America/Buenos_Aires America/Mexico_City America/Bogota America/Lima America/Santiago America/Caracas
America/Montevideo Atlantic/Reykjavik Atlantic/Canary Atlantic/Madeira Atlantic/Azores GB Eire
"""
_DATE_ORDERS = (("mdy", _MONTH_FIRST_ZONES.split()), ("dmy", _DAY_FIRST_ZONES.split()))


def date_order(tz: str | None) -> str | None:
    """The order of numeric dates written in zone `tz`: "mdy", "dmy", or None (it does not say)."""
    if not tz:
        return None
    for order, zones in _DATE_ORDERS:
        if any(tz == zone or (zone.endswith("/") and tz.startswith(zone)) for zone in zones):
            return order
    return None


# --------------------------------------------------------------------------- what a reply may hold

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
ZH_FILLER_RE = re.compile("|".join(map(re.escape, sorted(_ZH_FILLER_TEXT.split(), key=len, reverse=True))))
EN_FILLERS = frozenset(_EN_FILLER_TEXT.split())
BLOCKER_RE = re.compile(
    r"[0-9]|不|别|没|未|非|否|或|还是|每|前|后|以|之|号|號|月|周|星期|礼拜|点|點|时|時|分|年|天|早|晚|取消"
    r"|什么|几|哪|有空|有没有|忙"
    r"|\b(?:not|no|nope|don'?t|doesn'?t|isn'?t|can'?t|cannot|won'?t|never|cancel|or|every|before|after|until"
    r"|till|by|except|week|weeks|month|months|year|years|day|days|hour|hours|minutes?|next|last|coming|earlier"
    r"|later|midnight|noon|am|pm|o'?clock|past|half|quarter|mid|either|but|neither|nor|what|which|when|where|available|busy)\b"
)
WORD_RE = re.compile(r"[^\W\d_](?:[^\W\d_]|')*")

# --------------------------------------------------------------------------- a complete reply

# The only words besides recognised date/time phrases a *complete* reply may contain (contract
# section 8: the zero-model fast path merges a reply only when the grammar plus these consume the
# whole message). Bounded on purpose, unlike the generous fillers above (which only decide whether
# a message is short enough to parse at all): every word here lets more messages skip the model, so
# it holds only words that cannot change what a date/time answer means. A verb with an object of
# its own (删除, 开会, cancel) or a pronoun (把它改到周五) must leave the message to the model.
REPLY_FILLERS: tuple[str, ...] = (
    "就", "吧", "那", "那就", "改成", "改到", "换成", "换到", "定在", "放在",
    "呢", "啊", "嗯", "好", "的", "行",
    "then", "make it", "let's do", "how about", "ok", "okay", "at", "on",
)  # fmt: skip


def _filler_pattern(word: str) -> str:
    if word.isascii():  # whole words only: "on" must not eat the end of "afternoon"
        return r"\b" + r"\s+".join(map(re.escape, word.split())) + r"\b"
    return re.escape(word)


# Longest first so 那就 is removed as a whole before 那 and 就.
REPLY_FILLER_RE = re.compile("|".join(map(_filler_pattern, sorted(REPLY_FILLERS, key=len, reverse=True))))

# The words that point at one of several things ("五点那个", "周四那场", "the 3pm one"): a reply
# made of a date/time phrase and these names one of a change's candidates (contract §20), which is
# not a slot to fill — so they complete only such a choice (`ParsedReply.points_at_one`).
POINTING_RE = re.compile("|".join(map(_filler_pattern, sorted(POINTING_WORDS, key=len, reverse=True))))

# --------------------------------------------------------------------------- recurrence markers

# Contract section 9's code-side backstop: when the user's own words carry one of these and the model
# writes without `recurrence`, the agent holds the write (reason `recurrence_unclear`). Bounded on
# purpose and built of "每 + a unit of time", trigger and automation words only (no bare 每, 每个,
# each-of): a false positive costs the user one "好" on a hold, a false negative writes a one-off
# where a series was meant, so the list leans wide inside its bound, but it must stay a list a reader
# can check, not a classifier. "每个人", "每位", "每人" cannot match (每 + a person is not a time
# unit); the few cheap exclusions (下个工作日, each of us, repeat that?) are in `domain.recurrence`.
# 例会 is a noun (one meeting of a series) and is left out. Chinese numbered intervals (每两周,
# 每3天) are matched by `domain.recurrence` as a pattern beside these words.
RECURRENCE_MARKERS: tuple[str, ...] = (
    # Chinese: every day / night / morning
    "每天", "每日", "每晚", "每早", "天天", "每小时",
    # every week and every weekday
    "每周", "每週", "每星期", "每个星期", "每個星期", "每礼拜", "每个礼拜", "每個禮拜", "每禮拜",
    "每周末", "每个周末",
    *(f"{week}{day}" for week in ("每周", "每週", "每星期", "每个星期", "每礼拜") for day in "一二三四五六日天"),
    # month, quarter, year
    "每月", "每个月", "每個月", "每季度", "每年",
    # triggers, intervals, working days, automation
    "每逢", "每当", "每當", "每次", "每回", "工作日", "每个工作日", "每個工作日", "隔周", "隔週", "隔天", "每隔",
    "自动", "自動", "定期",
    # English
    "every", "everyday", "each", "daily", "weekly", "biweekly", "fortnightly", "monthly", "yearly",
    "annually", "hourly", "weekdays", "weeknights", "every weekday", "whenever", "automatically",
    "automate", "recurring", "recur", "recurs", "repeat", "repeats", "repeating",
)  # fmt: skip
