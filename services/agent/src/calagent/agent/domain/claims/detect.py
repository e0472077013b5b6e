"""A reply's claims: sentences and lines in, `Claims` out, each language's grammar per clause.

Besides clause by clause, a reply claims through its layout: a header that reports operations as
done makes the list under it the changes made, and a list of timed lines with calendar nouns or
the user states what the calendar holds. `find_claims` is pure and fast: it runs on every streamed
prefix of a reply, and sentences already seen come from a memo.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from calagent.agent.domain.claims import en, zh
from calagent.agent.domain.claims.clauses import sentences
from calagent.agent.domain.claims.lexicon import lexicon
from calagent.contracts.text import HAN

__all__ = ["Claims", "claims_creation", "claims_schedule_read", "find_claims"]


@dataclass(frozen=True)
class Claims:
    write: bool = False  # asserts the user's calendar was changed
    read: bool = False  # asserts the calendar's contents or emptiness/availability

    @property
    def any(self) -> bool:
        return self.write or self.read


NONE = Claims()


def _both(name: str) -> re.Pattern[str]:
    """One pattern over a class both languages hold (a reply may mix them)."""
    return re.compile(lexicon("zh").source(name) + "|" + lexicon("en").source(name))


_LATIN = re.compile(r"[a-z]")
# The agent says it has not looked at (or cannot see) the calendar: nothing in that sentence states
# what the calendar holds, whichever clause the not-looking is in ("Heads up: I haven't checked
# your calendar yet", "提醒一下：我还没查你的日程"). Reads only: a change can still be reported.
_NOT_LOOKED = _both("not_looked")
# A header that reports a list of operations as done ("**已完成以下操作：**", "Here's what I did:").
_DONE_HEADER = _both("done_header")
_DONE_CUE = _both("done_cue")
# Words that make an enumeration a proposal rather than the calendar's contents.
_HEDGE = _both("hedge")
# A list item: a bullet or a number opens the line.
_ITEM = re.compile(r"[-•*·+]|\d{1,2}[.、)）]")
_YOU = re.compile(r"[你您]|\byour?\b")
_OFFERS = (zh.MOOD.cond, zh.MOOD.modal, en.MOOD.cond, en.MOOD.modal)


def _done_header(text: str) -> bool:
    """`text` reports operations as done, and nothing before that makes it a condition or an offer
    ("如果操作已完成：…", "once I've made the following changes")."""
    m = _DONE_HEADER.search(text) if _DONE_CUE.search(text) else None
    if m is None:
        return False
    head = text[: m.start()]
    return not any(rx.search(head) for rx in _OFFERS)


def _done_lists(norm: str) -> tuple[str, bool]:
    """`norm` without the lines of completed-operations lists (their header and the items under it),
    and whether there was one."""
    lines = norm.split("\n")
    keep: list[str] = []
    found = in_list = False
    for line in lines:
        stripped = line.strip()
        if in_list and _ITEM.match(stripped):
            continue
        in_list = False
        if stripped and stripped[-1] not in "?？" and _done_header(stripped):
            found = in_list = True
            continue
        keep.append(line)
    return "\n".join(keep), found


@lru_cache(maxsize=4096)
def sentence_claims(sentence: str, asked: bool) -> tuple[bool, bool]:
    """(write, read) asserted by one normalised sentence. Memoised: a streamed reply re-checks its
    finished sentences on every prefix, and only the growing last one is new."""
    write, read = _sentence_found(sentence, asked)
    if read and _NOT_LOOKED.search(sentence):
        read = False
    return write, read


def _sentence_found(sentence: str, asked: bool) -> tuple[bool, bool]:
    write = read = False
    if not asked:
        write = _done_header(sentence)  # "已完成以下操作：新建…、邀请…"
    ascii_only = sentence.isascii()
    for lang in (zh, en):
        if lang is zh and (ascii_only or not HAN.search(sentence)):
            continue
        if lang is en and not ascii_only and not _LATIN.search(sentence):
            continue
        clauses, plain = lang.MOOD.clauses(sentence, asked)
        for c in clauses:
            w, r = lang.write(c, sentence)
            write = write or w
            read = read or r or lang.read(c, sentence, asked)
            if write and read:
                return True, True
        if not read and plain and lang.listed(sentence):
            # "我可以约9点、10点的会", "slots that could work: 10am, 2pm": offers, not contents
            read = not (lang.MOOD.modal.search(sentence) or _HEDGE.search(sentence))
    return write, read


def _listed_lines(norm: str) -> bool:
    """A list over lines ("- 周一 9:00 晨会\n- 周二 14:00 评审"): at least two lines with a clock time,
    a calendar noun or the user in the reply, and no line that asks, offers, conditions or gives
    examples."""
    lines = [line.strip() for line in norm.split("\n") if line.strip()]
    timed = [line for line in lines if zh.CLOCK.search(line) or en.CLOCK.search(line)]
    if len(timed) < 2:
        return False
    if not (zh.CAL_NOUN.search(norm) or en.CAL_NOUN.search(norm) or _YOU.search(norm)):
        return False
    for line in lines:
        if line[-1] in "?？":
            return False
        for mood in (zh.MOOD, en.MOOD):
            if any(rx.search(line) for rx in (mood.opener, *mood.asks, mood.modal, mood.header, mood.cond)):
                return False
    return True


def find_claims(text: str) -> Claims:
    """The claims asserted by `text` (a whole reply or a streamed prefix of one)."""
    if not text:
        return NONE
    norm = text.replace("’", "'").replace("‘", "'").lower()
    write = read = False
    if "\n" in norm and _DONE_CUE.search(norm):
        norm, write = _done_lists(norm)
    for sentence, asked in sentences(norm):
        w, r = sentence_claims(sentence, asked)
        write = write or w
        read = read or r
        if write and read:
            break
    if not read and "\n" in norm:
        read = _listed_lines(norm)
    return Claims(write, read) if write or read else NONE


def claims_creation(text: str) -> bool:
    """Alias kept while the runner switches to `find_claims`: the reply asserts a calendar change."""
    return find_claims(text).write


def claims_schedule_read(text: str) -> bool:
    """Alias kept while the runner switches to `find_claims`: the reply asserts calendar contents."""
    return find_claims(text).read
