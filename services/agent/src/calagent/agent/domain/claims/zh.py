"""Chinese claims: the grammar over the classes of `data/zh.toml`.

A write is a change verb with a completion marker (了/已/好了/成功) and no negation or failure of
the change; a weak verb (改, 设, 记下 …) needs a calendar object, a time, a beneficiary or an elided
object besides. A read is a second-person possession or existence over calendar nouns, availability,
an event or an arrangement at a time, the calendar cited as evidence, or a count of events at a time.
"""

from __future__ import annotations

import re

from calagent.agent.domain.claims.clauses import Clause, Mood, clocks, offered
from calagent.agent.domain.claims.lexicon import lexicon

__all__ = ["CAL_NOUN", "CLOCK", "MOOD", "listed", "read", "write"]

_LEX = lexicon("zh")

_VERB = _LEX.regex("verb")  # look-alikes first, so that 参加 is never read as 加
_STRONG = _LEX.wordset("strong_verbs")
_WEAK = _LEX.wordset("weak_verbs")
_ALREADY = _LEX.regex("already")
_AFTER_STOP = _LEX.regex("after_stop")
_PERFECTIVE = _LEX.regex("perfective")
_FAILED = _LEX.regex("failed")
_NEG = _LEX.regex("neg")
_STATE_CHANGE = _LEX.regex("state_change")
_SEARCH_VERB = _LEX.regex("search_verb")
CAL_NOUN = _LEX.regex("cal_noun")
_TIME = _LEX.regex("time")
CLOCK = _LEX.regex("clock")
_FOR_YOU = _LEX.regex("for_you")
_PRONOUN = _LEX.regex("pronoun")
_HAVE = _LEX.regex("have")
_COUNT = _LEX.regex("count")
_COUNT_AFTER_TIME = _LEX.regex("count_after_time")
_EVENT_AT = _LEX.regex("event_at")
_ARRANGED_AT = _LEX.regex("arranged_at")
_TIME_IS_EVENT = _LEX.regex("time_is_event")
_EVALUATIVE = _LEX.regex("evaluative")
_AVAIL = _LEX.regex("avail")
_MOOD_AVAIL = _LEX.wordset("mood_avail_words")
_NO_CHANGE = _LEX.regex("no_change")
_SURFACE = _LEX.regex("surface")

MOOD = Mood(
    opener=_LEX.regex("question_open"),
    tag=_LEX.regex("tag"),
    asks=(_LEX.regex("question_end"), _LEX.regex("question_anywhere"), _LEX.regex("non_assert")),
    cond=_LEX.regex("cond"),
    modal=_LEX.regex("modal_before"),
    cond_tail=_LEX.regex("cond_tail"),
    header=_LEX.regex("header"),
    cue=_LEX.regex("cue"),
)


def _negated(before: str) -> bool:
    return any(m.group(2) for m in _NEG.finditer(before))


def _subject(clause: str, end: int) -> str:
    """The last pronoun acting before `end`: 我 (agent), 你 (user) or '' (none)."""
    last = ""
    for m in _PRONOUN.finditer(clause, 0, end):
        last = "我" if m.group().startswith("我") else "你"
    return last


def write(c: Clause, sentence: str) -> tuple[bool, bool]:
    """(write claim, read claim) from change verbs in one assertive clause."""
    m: re.Match[str] | None
    t = c.text
    for m in _VERB.finditer(t):
        word = m.group()
        strong = word in _STRONG
        if not strong and word not in _WEAK:
            continue  # a look-alike (参加, 建议, 改天 ...)
        start, end = m.span()
        if start >= c.void_from:
            return False, False
        # The negation window starts after the last 已 before the verb (已经不需要…取消 is negative).
        before = t[max(0, start - 8) : start]
        if _negated(before):
            continue
        after = t[end:]
        stop = _AFTER_STOP.search(after)
        scope = after[: stop.start()] if stop else after
        if _FAILED.search(after[:12]):
            continue
        # Searched in the whole rest, so that the marker's lookahead sees what follows ("删了就…").
        perfective = _PERFECTIVE.search(after)
        done = bool(_ALREADY.search(t, 0, start)) or bool(
            perfective and perfective.start() < min(len(scope), 18)
        )
        if not done:
            continue
        if not strong:
            rest = _PERFECTIVE.split(scope, maxsplit=1)
            elided = len(rest) > 1 and not rest[1].strip(" ～~！!。.啦呀哦喔了")
            if not (elided or CAL_NOUN.search(sentence) or _TIME.search(sentence) or _FOR_YOU.search(t)):
                continue
        if _subject(t, start) == "你":
            return False, True  # "你明天安排了三个会": the user's own calendar, i.e. its contents
        return True, False
    m = _STATE_CHANGE.search(t)
    if (
        m
        and m.start() < c.void_from
        and not _negated(t[max(0, m.start() - 6) : m.start()])
        and (m.group().startswith("在") or CAL_NOUN.search(sentence))
    ):
        return True, False
    return False, False


def _no_change(t: str, pos: int) -> bool:
    """After 没有/没 at `pos`: a change that did not happen ("没有变化", "没有创建成功"). A verb that is
    also a calendar noun (安排, 预约) keeps its noun reading: "没有安排" is emptiness."""
    if _NO_CHANGE.match(t, pos):
        return True
    v = _VERB.match(t, pos)
    if v is None:
        return False
    word = v.group()
    # (a noun that opens with a verb keeps its noun reading too: "没有约见")
    return (word in _STRONG or word in _WEAK) and not CAL_NOUN.match(t, pos)


def read(c: Clause, sentence: str, asked: bool = False) -> bool:
    m: re.Match[str] | None
    t = c.text
    lim = min(len(t), c.void_from)
    s = _SURFACE.search(t)
    if s and s.start() < lim and _subject(t, s.start()) != "我" and not _no_change(t, s.end()):
        return True
    for m in _AVAIL.finditer(t):
        if m.start() >= lim:
            break
        word = m.group()
        subj = _subject(t, m.start())
        if subj == "我" or _SEARCH_VERB.search(t, max(0, m.start() - 4), m.start()):
            continue
        head = t[: m.start()]
        if word in _MOOD_AVAIL:
            if not _TIME.search(head) and not CAL_NOUN.search(head):
                continue
        elif not (subj == "你" or _TIME.search(head) or CAL_NOUN.search(head) or _TIME.search(t)):
            continue
        return True
    for m in _HAVE.finditer(t):
        if m.start() >= lim:
            break
        subj = _subject(t, m.start())
        if subj == "我":
            continue
        head = t[: m.start()]
        if not (subj == "你" or _TIME.search(head) or CAL_NOUN.search(head)):
            continue
        if _no_change(t, m.end()):
            continue
        tail = t[m.end() : m.end() + 14]
        if CAL_NOUN.search(tail) or _COUNT.search(tail):
            return True
    times = list(_TIME.finditer(t, 0, lim))
    for m in times:
        # "明天上午9点是站会": a time that *is* an event.
        if _TIME_IS_EVENT.search(t, m.end(), lim):
            return True
        # "周五一共两个会", "明天3场面试": a time and a count of events.
        n = _COUNT_AFTER_TIME.match(t, m.end())
        # (from the classifier on: "两个会" is a count of 个会)
        if n and n.end() <= lim and CAL_NOUN.search(t, n.end() - 1, min(lim, n.end() + 6)):
            return True
        # "那天就这一件事": a counted 事 right after a time is what the day holds
        if n and t.startswith("事", n.end()) and n.end() < lim:
            return True
    if times:
        # "你和赵律师约的是11月20号": the time of an arrangement; "评审会是在周四": an event at a time.
        for rx in (_ARRANGED_AT, _EVENT_AT):
            for m in rx.finditer(t, 0, lim):
                if (
                    _TIME.match(t, m.end())
                    and not _EVALUATIVE.search(t)
                    and _subject(t, m.start()) != "我"
                    and not offered(MOOD, sentence, asked)
                ):
                    return True
    return False


def listed(sentence: str) -> bool:
    """An enumerated list of times with titles ("9点站会、11点客户会、下午3点评审会")."""
    return clocks(CLOCK, sentence) >= 2 and bool(
        CAL_NOUN.search(sentence) or "你" in sentence or "您" in sentence
    )
