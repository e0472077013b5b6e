"""The recurrence / trigger marker of a message (contract section 9's code-side backstop).

`recurrence_marker(text)` is the first word of `lexicon.RECURRENCE_MARKERS` (or a numbered interval,
每两周 / 每3天) found anywhere in the user's own words, as written, or None. It reads whole messages,
not only short replies: a create's resolution carries the marker of the words that asked for it,
and commands holds a create that lacks `recurrence` when a marker is present. Pure; transport
wrappers (quotes, forwarded blocks) are not the user's words and are removed first, as for the
reply parser.

Exclusions are only the cheap, obvious ones, because a missed marker costs more than a spurious one:

* 工作日 after 下 / 上 / 这 / 本 / 第 / 个 / a numeral: 下个工作日, 3个工作日内 name days, not a rule
  (每个工作日 still matches, as a whole, before its 工作日);
* every / each before a person or "of", "other", "one": each of us, every attendee, each other;
* repeat that? / repeat yourself / repeat after me / repeat the question: asking to hear it again.

每个人, 每位, 每人 need no exclusion: no marker is 每 followed by a person.
"""

from __future__ import annotations

import re

from calagent.timeparse.domain.lexicon import RECURRENCE_MARKERS
from calagent.timeparse.domain.transport import strip_transport

__all__ = ["marker_of_words", "recurrence_marker"]

# Long enough for any message the bus carries (ParseReplyRequest.text has max_length 4000).
_MAX_TEXT = 4000
# Every match is short (whitespace inside a marker is bounded below); ParsedReply allows 32.
_MAX_MARKER = 32


def _word(marker: str) -> str:
    if marker.isascii():  # whole words: "each" is not inside "reach", "every" not "everyone"
        return r"\b" + r"\s{1,3}".join(map(re.escape, marker.split())) + r"\b"
    return re.escape(marker)


# Numbered intervals: 每两周, 每3天, 每隔一天 (每隔 alone is a listed word), 每半小时.
_NUMBERED = r"每(?:隔)?\s?(?:[0-9]{1,3}|[一二两三四五六七八九十几半]{1,3})\s?个?\s?(?:天|日|周|週|星期|礼拜|月|年|小时|钟头)"
# Longest first, so 每周三 is returned whole rather than as 每周, and "every weekday" over "every".
_MARKER_RE = re.compile(
    "|".join([_NUMBERED, *map(_word, sorted(RECURRENCE_MARKERS, key=len, reverse=True))]),
    re.IGNORECASE,
)
_NOT_A_RULE_BEFORE_WORKDAY = re.compile(r"[下上这這本第个個0-9一二两三四五六七八九十几]\s*$")
_PERSON_AFTER = re.compile(
    r"\s+(?:of|other|one|person|people|member|members|attendee|attendees|participant|participants"
    r"|guest|guests|student|students|employee|employees|colleague|colleagues|team\s+member)\b",
    re.IGNORECASE,
)
_HEAR_AGAIN = re.compile(
    r"\s+(?:yourself|after\s+me|the\s+question|what\b"
    r"|that(?=\s*(?:[?.!,，。？！]|please\b|again\b|$)))",
    re.IGNORECASE,
)


# A character that makes a day word with the 天 after it (今天, 明天, 昨天, 那天 …): a 天天 that
# starts there is that word's 天 followed by the next word's (今天 + 天气), not "every day".
_DAY_WORD_BEFORE_TIAN = frozenset("今明后昨前当那这哪白整")


def _excluded(text: str, m: re.Match[str]) -> bool:
    word = m.group().lower()
    rest = text[m.end() :]
    if word == "天天":
        return m.start() > 0 and text[m.start() - 1] in _DAY_WORD_BEFORE_TIAN
    if word == "工作日":
        return bool(_NOT_A_RULE_BEFORE_WORKDAY.search(text[max(0, m.start() - 4) : m.start()]))
    if word in ("every", "each"):
        return bool(_PERSON_AFTER.match(rest))
    if word == "repeat":
        return bool(_HEAR_AGAIN.match(rest))
    return False


# A cheap test that a message may hold a marker, so most messages skip the long alternation above
# (every create's words are read): a Chinese marker contains one of these (天天 is the only one
# starting otherwise), an English one starts with one of these words.
_ZH_CUES = frozenset("每工隔自定")
_EN_FIRST_WORDS = frozenset(m.split()[0].lower() for m in RECURRENCE_MARKERS if m.isascii())
_LATIN_WORD = re.compile(r"[a-z]+")


def _may_have_marker(body: str) -> bool:
    if not _ZH_CUES.isdisjoint(body) or "天天" in body:
        return True
    return not _EN_FIRST_WORDS.isdisjoint(_LATIN_WORD.findall(body.lower()))


def marker_of_words(body: str) -> str | None:
    """`recurrence_marker` of text already stripped of its transport wrappers."""
    body = body[:_MAX_TEXT]
    if not _may_have_marker(body):
        return None
    for m in _MARKER_RE.finditer(body):
        if not _excluded(body, m):
            return m.group()[:_MAX_MARKER]
    return None


def recurrence_marker(text: str) -> str | None:
    """The first recurrence or trigger marker of the user's own words, as written, else None."""
    return marker_of_words(strip_transport(text))
