"""The token grammar of the short-reply parser: one alternation of named regular expressions.

Each alternative is a token kind (`T_<name>`); the order is the priority where two could match at
the same place (longer, more specific forms first). What a token means is decided in `replies`.
"""

from __future__ import annotations

import re

__all__ = ["MER", "NUM", "TOKEN_RE", "ZH_PERIOD"]

_CN = "[零〇一二两三四五六七八九十]"
NUM = rf"(?:[0-9]{{1,2}}|{_CN}{{1,3}})"
# Two-character words before 早/晚 so 晚上 is not read as 晚 + 上.
ZH_PERIOD = "凌晨|清晨|早上|早晨|上午|中午|午间|下午|午后|傍晚|黄昏|晚上|晚间|夜里|夜晚|夜间|深夜|半夜|早|晚"
MER = r"(?:[ap]\.?m\b\.?|[ap]\.m\.)"
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
    ("midnight", r"\bmidnight\b|午夜|半夜十二点|半夜12点"),
    # Dates -----------------------------------------------------------------------------------
    (
        "zhymd",
        rf"(?P<zy>[0-9]{{4}})\s*年\s*(?P<zm>{NUM})\s*月\s*(?P<zd>{NUM})\s*[日号號]?",
    ),
    ("isod", r"(?P<iy>[0-9]{4})[-/.](?P<im>[0-9]{1,2})[-/.](?P<id>[0-9]{1,2})(?![0-9])"),
    ("zhmd", rf"(?P<zm2>{NUM})\s*月\s*(?P<zd2>{NUM})\s*[日号號]?"),
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
    # 大 only ever lengthens 后天/前天; before any other day word it is not a word we know (大明天).
    ("zhrel", r"(?P<rel>大*[后前]天|大*(?:[今明]天|[今明昨]日|[今明昨]儿个?|昨天))"),
    ("zhdp", r"(?P<dpd>今|明|昨)(?P<dpp>晚|早)(?:上)?"),
    ("zhndays", rf"(?P<nd>{NUM})\s*天\s*(?:以后|之后|后)"),
    (
        "zhweek",
        rf"(?P<wp>下下个?|下个?|这个?|本|上上个?|上个?)?\s*(?:周|週|星期|礼拜|禮拜)(?P<wd>[{_ZH_WD}])",
    ),
    ("zhweekend", r"(?P<wep>下下个?|下个?|这个?|本|上个?)?\s*[周週]末"),
    (
        "enrel",
        r"\b(?:the\s+)?(?P<erel>day\s+after\s+tomorrow|day\s+before\s+yesterday"
        r"|tomorrow|tmrw|tmr|today|tonight|yesterday)\b",
    ),
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
        rf"(?:(?P<r2per>{ZH_PERIOD})\s*)?(?P<r2a>{NUM})\s*(?:-|~|到|至)\s*(?P<r2b>{NUM})\s*(?:点钟?|时)",
    ),
    (
        "enrange2",
        r"(?P<r3a>[0-9]{1,2})(?::(?P<r3am>[0-9]{2}))?\s*(?:-|–|—|\bto\b|\buntil\b|\btill\b)\s*"
        rf"(?P<r3b>[0-9]{{1,2}})(?::(?P<r3bm>[0-9]{{2}}))?\s*(?P<r3mer>{MER})",
    ),
    ("range", rf"{_clock('a')}{_RANGE_SEP}{_clock('b')}"),
    ("clock", _clock("c")),
    (
        "enat",
        r"\bat\s+(?P<ath>[0-9]{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b"
        rf"(?![:.][0-9])(?!\s*(?:{MER}|o'?clock\b))",
    ),
    ("noon", r"\b(?:12\s*)?(?:noon|midday)\b|正午|中午12点整"),
    ("zhper", rf"(?P<zp>{ZH_PERIOD}|早上好)"),
    ("enper", r"\b(?:in\s+the\s+|at\s+)?(?P<ep>morning|afternoon|evening|night)\b"),
)

TOKEN_RE = re.compile("|".join(f"(?P<T_{name}>{body})" for name, body in _TOKEN_ALTERNATIVES))
