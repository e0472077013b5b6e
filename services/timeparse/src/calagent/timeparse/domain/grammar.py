"""The token grammar of the short-reply parser: one alternation of named regular expressions.

Each alternative is a token kind (`T_<name>`); the order is the priority where two could match at
the same place (longer, more specific forms first). What a token means is decided in `replies`.
"""

from __future__ import annotations

import re

__all__ = ["EN_MONTH", "EN_WEEKDAY", "MER", "NUM", "TOKEN_RE", "ZH_PERIOD"]

_CN = "[零〇一二两三四五六七八九十]"
NUM = rf"(?:[0-9]{{1,2}}|{_CN}{{1,3}})"
# Two-character words before 早/晚 so 晚上 is not read as 晚 + 上.
ZH_PERIOD = "凌晨|清晨|早上|早晨|上午|中午|午间|下午|午后|傍晚|黄昏|晚上|晚间|夜里|夜晚|夜间|深夜|半夜|早|晚"
MER = r"(?:[ap]\.?m\b\.?|[ap]\.m\.)"
_ZH_WD = "一二三四五六日天1234567"
EN_WEEKDAY = (
    r"(?:monday|mon|tuesday|tues|tue|wednesday|weds|wed|thursday|thurs|thur|thu"
    r"|friday|fri|saturday|sat|sunday|sun)"
)
EN_MONTH = (
    r"(?:january|jan|february|feb|march|mar|april|apr|may|june|jun|july|jul|august|aug"
    r"|september|sept|sep|october|oct|november|nov|december|dec)"
)


# Digit by digit (二〇二六) or read out in thousands (两千零四, 二千零二十六, 两千); `lexicon.year_number`
# refuses the read-out forms nobody writes (两千四, 两千二十六) instead of reading them as a shorter year.
_CN_YEAR = "[零〇一二三四五六七八九]{4}|[一二两]千[零〇一二三四五六七八九十]{0,4}"
_ORD = r"(?:st|nd|rd|th)\b"
_ZH_MONTH_PREFIX = "下下个?|下个?|这个?|這個?|本|上上个?|上个?"
_MONTH_END = "最后一天|最後一天|底|末"
_EN_HOURS = "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_EN_MINUTES = r"twenty[\s-]five|twenty|ten|five"
# 上旬 中旬 下旬, 月初, 月中, 年初 ...; early next month, later this month, mid-month.
_VAGUE = (
    r"[上中下]旬|月初|月中|月头|月頭|年初|年中|年底|年末"
    r"|\b(?:early|mid|late|later|middle\s+of|beginning\s+of|start\s+of)[\s-]*(?:the\s+|this\s+|next\s+|last\s+)?month\b"
    r"|\bmidmonth\b"
)


def _clock(p: str) -> str:
    """One clock time; group names carry the prefix `p` so two can sit in one range pattern."""
    return (
        rf"(?:(?P<{p}per>{ZH_PERIOD})\s*)?"
        r"(?:"
        rf"(?P<{p}h>{NUM})\s*(?:点钟?|點鐘?|时|時)\s*"
        rf"(?:(?P<{p}half>半)|(?P<{p}q>[一三])刻|(?P<{p}m>{NUM})\s*(?P<{p}fen>分)?|整)?"
        rf"|(?P<{p}ch>[0-9]{{1,2}})(?::|\.(?=[0-9]{{2}}\s*{MER}))(?P<{p}cm>[0-9]{{2}})"
        rf"|(?P<{p}eh>[0-9]{{1,2}})(?=\s*(?:{MER}|o'?clock\b))"
        r")"
        rf"(?:\s*(?P<{p}mer>{MER}|o'?clock\b))?"
    )


_RANGE_SEP = r"\s*(?:到|至|~|〜|-|—|–|\bto\b|\buntil\b|\btill\b|\bthrough\b)\s*"

_TOKEN_ALTERNATIVES: tuple[tuple[str, str], ...] = (
    # Phrases that look like times but shift or blur them: "a bit later", "a little".
    ("shift", r"早一点|晚一点|早点|晚点|一点点|一点儿|有点|有一点|差一点|快一点|慢一点|早些|晚些"),
    ("recur", r"每天|每周|每个?星期|每个?礼拜|每月|每年|每晚|每早|\bevery\b|\bdaily\b|\bweekly\b"),
    # 午夜 / 半夜12点: which calendar day is meant is the question, so the reply is refused. The
    # English "midnight" is read as 00:00 when the reply names no date (see `replies`).
    ("midnight", r"午夜|半夜十二点|半夜12点"),
    ("enmidnight", r"\b(?:12\s*)?midnight\b"),
    # Parts of a month or of the day that are not one day or one time: the model asks.
    ("vague", _VAGUE),
    # Mid-morning / mid-afternoon: a period for an hour beside them, no time on their own.
    ("midper", r"\bmid[\s-]*(?P<mp>morning|afternoon)\b"),
    ("vagueper", r"\b(?:mid|late|early)[\s-]*(?:morning|afternoon|evening)\b"),
    # Dates -----------------------------------------------------------------------------------
    (
        "zhymd",
        rf"(?P<zy>[0-9]{{4}}|{_CN_YEAR})\s*年\s*(?P<zm>{NUM})\s*月\s*(?P<zd>{NUM})\s*[日号號]?",
    ),
    # A month's last day: 3月底, 2027年2月底; 月底, 本月底, 下个月底, 下个月的最后一天.
    (
        "zhmend",
        rf"(?:(?P<mey>[0-9]{{4}}|{_CN_YEAR})\s*年\s*)?(?P<mem>{NUM})\s*月\s*(?:份\s*)?的?\s*(?:{_MONTH_END})",
    ),
    ("zhrmend", rf"(?:(?P<rmep>{_ZH_MONTH_PREFIX})\s*)?月\s*的?\s*(?:{_MONTH_END})"),
    # 下个月5号, 下月5日, 本月十日, 这个月20号, 下个月的5号.
    ("zhrmd", rf"(?P<rmp>{_ZH_MONTH_PREFIX})\s*月\s*的?\s*(?P<rmd>{NUM})\s*[号日號]"),
    ("isod", r"(?P<iy>[0-9]{4})[-/.](?P<im>[0-9]{1,2})[-/.](?P<id>[0-9]{1,2})(?![0-9])"),
    ("zhmd", rf"(?P<zm2>{NUM})\s*月\s*(?P<zd2>{NUM})\s*[日号號]?"),
    # 9/30, 25/9, 9/30/2026, 25.09.2026: which number is the month depends on who writes it (see
    # `replies`). Dots only with a year: 10.30 is a time or a number as often as a date.
    (
        "slashd",
        r"(?<![0-9.])(?P<sa>[0-9]{1,2})(?:/(?P<sb>[0-9]{1,2})(?:/(?P<sy>[0-9]{4}))?(?![0-9/])"
        r"|\.(?P<sb2>[0-9]{1,2})\.(?P<sy2>[0-9]{4})(?![0-9.]))",
    ),
    (
        "enmd",
        rf"\b(?P<em>{EN_MONTH})\b\.?\s*(?:the\s+)?(?P<ed>[0-9]{{1,2}})(?:st|nd|rd|th)?\b(?:\s*,?\s*(?P<ey>[0-9]{{4}})\b)?",
    ),
    (
        "endm",
        rf"\b(?:the\s+)?(?P<ed2>[0-9]{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<em2>{EN_MONTH})\b\.?(?:\s*,?\s*(?P<ey2>[0-9]{{4}})\b)?",
    ),
    # A day of the month alone: 12号, 12日, 十二号. Not a building, a line or a room (12号楼,
    # 3号线), not part of a longer number (123号) or an ordinal (第3号), not "within 3 days" (3日内).
    (
        "zhday",
        rf"(?<!第)(?P<dd>(?<![0-9])[0-9]{{1,2}}|(?<![零〇一二两三四五六七八九十]){_CN}{{1,3}})\s*[号日號]"
        r"(?![楼樓房室线線门門床院馆館厅廳位桌台车車机機口座栋棟码碼内內游遊以之前后後])",
    ),
    ("zhhol", r"(?P<hol>国庆节?|春节|除夕|中秋节?|清明节?|端午节?|元旦|劳动节|五一劳动节|五一)"),
    ("enhol", r"\bnew year'?s day\b"),
    # 大 only ever lengthens 后天/前天; before any other day word it is not a word we know (大明天).
    ("zhrel", r"(?P<rel>大*[后前]天|大*(?:[今明]天|[今明昨]日|[今明昨]儿个?|昨天))"),
    ("zhdp", r"(?P<dpd>今|明|昨)(?P<dpp>晚|早|晨)(?:上)?"),
    ("zhndays", rf"(?P<nd>{NUM})\s*天\s*(?:以后|之后|后)"),
    (
        "zhweek",
        rf"(?P<wp>下下个?|下个?|这个?|本|上上个?|上个?)?\s*(?:周|週|星期|礼拜|禮拜)(?P<wd>[{_ZH_WD}])",
    ),
    ("zhweekend", r"(?P<wep>下下个?|下个?|这个?|本|上个?)?\s*[周週]末"),
    # The 5th of next month, next month on the 5th, the 20th of this month.
    (
        "enrmd",
        rf"\b(?:on\s+)?(?:the\s+)?(?P<ermd>[0-9]{{1,2}}){_ORD}\s+(?:of\s+)?(?P<ermp>next|this|last)\s+month\b",
    ),
    (
        "enrmd2",
        rf"\b(?P<ermp2>next|this|last)\s+month\s*,?\s*(?:on\s+)?(?:the\s+)?(?P<ermd2>[0-9]{{1,2}}){_ORD}",
    ),
    # (The) end of the month, the last day of next month.
    (
        "enmend",
        r"\b(?:the\s+)?(?:end|last\s+day)\s+of\s+(?:the\s+)?(?:(?P<emep>next|this|last)\s+)?month\b",
    ),
    # The 12th, on the 3rd, on 3rd: a day of the month alone (not the 12th of October, not the 2nd
    # option / one / slot, which picks from a list).
    (
        "enday",
        rf"\b(?:on\s+the|the|on)\s+(?P<edd>[0-9]{{1,2}}){_ORD}"
        rf"(?!\s*(?:of\b|,?\s*{EN_MONTH}\b|(?:one|ones|option|options|choice|slot|time|week)\b))",
    ),
    (
        "enrel",
        r"\b(?:the\s+)?(?P<erel>day\s+after\s+tomorrow|day\s+before\s+yesterday"
        r"|tomorrow|tmrw|tmr|today|tonight|yesterday)\b",
    ),
    ("enndays", r"\bin\s+(?P<end>[0-9]{1,2}|one|two|three|four|five|six|seven|eight|nine|ten)\s+days?\b"),
    (
        "enweek",
        rf"\b(?:(?P<ewp>next|this|last)\s+(?:week\s+(?:on\s+)?)?)?(?P<ewd>{EN_WEEKDAY})\b\.?"
        r"(?:\s+(?P<ews>next|this|last)\s+week\b)?",
    ),
    ("enweekend", r"\b(?:(?P<ewep>next|this)\s+)?weekend\b"),
    ("enthisper", r"\bthis\s+(?P<etp>morning|afternoon|evening)\b"),
    # Times -----------------------------------------------------------------------------------
    (
        "zhrange2",
        rf"(?:(?P<r2per>{ZH_PERIOD})\s*)?(?P<r2a>{NUM})\s*(?:-|~|到|至)\s*(?P<r2b>{NUM})\s*(?:点钟?|时)",
    ),
    (
        "enrange2",
        r"(?P<r3a>[0-9]{1,2})(?::(?P<r3am>[0-9]{2}))?\s*(?:-|–|—|\bto\b|\buntil\b|\btill\b)\s*"
        rf"(?P<r3b>[0-9]{{1,2}})(?::(?P<r3bm>[0-9]{{2}}))?\s*(?P<r3mer>{MER})",
    ),
    # Half past 3 pm, (a) quarter to 5pm, quarter past ten, 20 past 3, 10 minutes to 4. A bare
    # number before "to" is a range (2 to 4pm), so minutes before "to" need "quarter" or "minutes".
    (
        "enpast",
        r"\b(?:(?P<pq>(?:a\s+)?quarter)\s+(?P<pqd>past|after|to|till|of)"
        r"|(?P<ph>half)\s+past"
        rf"|(?P<pn>[0-9]{{1,2}}|{_EN_MINUTES})\s+(?:minutes?\s+)?(?P<pnd>past|after)"
        rf"|(?P<pn2>[0-9]{{1,2}}|{_EN_MINUTES})\s+minutes?\s+(?P<pnd2>to))"
        rf"\s+(?P<phr>[0-9]{{1,2}}(?![0-9])|(?:{_EN_HOURS})\b)(?![:.][0-9])(?:\s*(?P<pmer>{MER}|o'?clock\b))?",
    ),
    ("range", rf"{_clock('a')}{_RANGE_SEP}{_clock('b')}"),
    ("clock", _clock("c")),
    (
        "enat",
        r"\bat\s+(?P<ath>[0-9]{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b"
        rf"(?![:.][0-9])(?!\s*(?:{MER}|o'?clock\b))",
    ),
    ("noon", r"\b(?:12\s*)?(?:noon|mid-?day)\b|正午|中午12点整"),
    ("zhper", rf"(?P<zp>{ZH_PERIOD}|早上好)"),
    ("enper", r"\b(?:in\s+the\s+|at\s+)?(?P<ep>morning|afternoon|evening|night)\b"),
)

TOKEN_RE = re.compile("|".join(f"(?P<T_{name}>{body})" for name, body in _TOKEN_ALTERNATIVES))
