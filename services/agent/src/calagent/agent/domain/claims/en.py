"""English claims: the grammar over the classes of `data/en.toml` (text lower-cased, ’ as ').

A write is a change form reported as done: a past participle after I/we, a perfect or copula
passive, an elliptical or headline receipt, or a generic completion (done, all set, it's on your
calendar); never after a negation, a modal or an offer. A read states what the calendar holds:
you have / there is / your <thing> is …, availability, an event at a time, what a day holds or
what a change leaves, the calendar cited as a source.
"""

from __future__ import annotations

import re

from calagent.agent.domain.claims.clauses import Clause, Mood, clocks, offered
from calagent.agent.domain.claims.lexicon import lexicon

__all__ = ["CAL_NOUN", "CLOCK", "MOOD", "listed", "read", "write"]

_LEX = lexicon("en")

_STRONG = _LEX.wordset("strong_forms")
_ALSO_INTRANSITIVE = _LEX.wordset("also_intransitive")
_BASE_EQUALS_PAST = _LEX.wordset("base_equals_past")
_STATE_FORMS = _LEX.wordset("state_forms")
_AGENT_DID = _LEX.regex("agent_did")
_USER_DID = _LEX.regex("user_did")
_MANAGED = _LEX.regex("managed")
_PERF_PASSIVE = _LEX.regex("perf_passive")
_PASSIVE = _LEX.regex("passive")
_ELLIPTIC = _LEX.regex("elliptic")
_HEADLINE = _LEX.regex("headline")
_DONE_PARTS = _LEX.parts("done_parts")
_NEG = _LEX.regex("neg")
_MODAL_TAIL = _LEX.regex("modal_tail")
CAL_NOUN = _LEX.regex("cal_noun")
CLOCK = _LEX.regex("clock")
_TIME = _LEX.regex("time")
_THAT_CLAUSE = _LEX.regex("that_clause")
_HEADLINE_GUARD = _LEX.regex("headline_guard")
_IT = _LEX.regex("it")
_SYMPATHY = _LEX.regex("sympathy")
_YOU_HAVE = _LEX.regex("you_have")
_YOU_DOING = _LEX.regex("you_doing")
_YOU_HAD = _LEX.regex("you_had")
_YOU_ARE = _LEX.regex("you_are")
_YOUR = _LEX.regex("your")
_YOUR_PRED = _LEX.regex("your_pred")
_READ_CTX = _LEX.regex("read_ctx")
_THERE = _LEX.regex("there")
_NOTHING = _LEX.regex("nothing")
_NOTHING_CHANGED = _LEX.regex("nothing_changed")
_NOTHING_CTX = _LEX.regex("nothing_ctx")
_EVENT_AT = _LEX.regex("event_at")
_ECHO_GAP = _LEX.regex("echo_gap")
_TIME_SUBJECT = _LEX.regex("time_subject")
_TIME_HAS = _LEX.regex("time_has")
_REMAIN = _LEX.regex("remain")
_ORDINAL = _LEX.regex("ordinal")
_OF_DAY = _LEX.regex("of_day")
_LEAVES = _LEX.regex("leaves")
_YOUR_NEXT = _LEX.regex("your_next")
_SURFACE_PARTS = _LEX.parts("surface_parts")
_YOU = re.compile(r"\byou(?:r|'ve|'re)?\b")

# Gates: a pattern runs only when one of its anchor words is among the clause's tokens.
_G_FORMS = frozenset(form.split()[0] for form in _LEX.words("strong_forms") + _LEX.words("weak_forms"))
_G_DONE = frozenset().union(*(gate for gate, _ in _DONE_PARTS))
_G_MANAGED = _LEX.wordset("managed_gate")
_G_NOTHING = _LEX.wordset("nothing_gate")
_G_SURFACE = frozenset().union(*(gate for gate, _ in _SURFACE_PARTS))
_G_TIME = _LEX.wordset("time_gate")
_G_EVENT_AT = _LEX.wordset("event_at_gate")
_G_HAS = _LEX.wordset("has_gate")
_G_REMAIN = _LEX.wordset("remain_gate")
_G_LEAVES = _LEX.wordset("leaves_gate")
_G_NEXT = _LEX.wordset("next_gate")
_G_ORDINAL = _LEX.wordset("ordinal_gate")
_YOUR_CONTENT_VERBS = _LEX.wordset("your_content_verbs")
_CHANGE_WORDS = _LEX.wordset("change_words") | _G_FORMS

MOOD = Mood(
    opener=_LEX.regex("question_open"),
    tag=_LEX.regex("tag"),
    asks=(_LEX.regex("non_assert"), _LEX.regex("imperative")),
    cond=_LEX.regex("cond"),
    modal=_LEX.regex("modal_before"),
    cond_tail=None,
    header=_LEX.regex("header"),
    cue=_G_FORMS | _G_DONE | _G_MANAGED | _G_NOTHING | _G_SURFACE | _G_TIME | _LEX.wordset("cue_words"),
    gates=(
        _LEX.wordset("cond_gate"),
        _LEX.wordset("ask_gate", "imperative_verbs"),
        _LEX.wordset("header_gate"),
    ),
)


def _blocked(t: str, start: int, c: Clause) -> bool:
    if start >= c.void_from:
        return True
    before = t[:start]
    if any(m.group("neg") for m in _NEG.finditer(before)):
        return True
    return bool(_MODAL_TAIL.search(before))


def _context(sentence: str) -> bool:
    return bool(CAL_NOUN.search(sentence) or _TIME.search(sentence) or _IT.search(sentence))


def write(c: Clause, sentence: str) -> tuple[bool, bool]:
    """(write claim, read claim) from change forms in one assertive clause."""
    m: re.Match[str] | None
    t, toks = c.text, c.toks
    if toks & _G_FORMS:
        for rx in (_AGENT_DID, _PERF_PASSIVE, _ELLIPTIC, _HEADLINE):
            if rx is _AGENT_DID and not ("i" in toks or "we" in toks):
                continue
            if rx is _PERF_PASSIVE and "been" not in toks:
                continue
            for m in rx.finditer(t):
                v = m.group("v")
                if _blocked(t, m.start(), c):
                    continue
                if v in _ALSO_INTRANSITIVE and (rx is _HEADLINE or t.startswith(" up", m.end())):
                    continue
                if rx is _ELLIPTIC and v in _BASE_EQUALS_PAST and not re.match(r"\s+for\b", t[m.end() :]):
                    continue
                if rx is _HEADLINE and (
                    not CAL_NOUN.search(m.group("np")) or _HEADLINE_GUARD.search(m.group("np"))
                ):
                    continue
                if v not in _STRONG and (not _context(sentence) or _THAT_CLAUSE.match(t, m.end())):
                    continue  # "noted that you prefer mornings": a fact noted, not an event
                return True, False
        for m in _PASSIVE.finditer(t):
            if _blocked(t, m.start(), c):
                continue
            v = m.group("v")
            if v not in _STRONG and not _context(sentence):
                continue
            state = m.group("cop") in ("is", "are", "'s", "'re") and "now" not in m.group("adv")
            # "your appointment is booked for 9": a receipt, and a statement of contents
            return True, state and v in _STATE_FORMS
    for gate, rx in (*_DONE_PARTS, (_G_MANAGED, _MANAGED)):
        if toks & gate:
            m = rx.search(t)
            if m and not _blocked(t, m.start(), c):
                return True, False
    if "you" in toks and toks & _G_FORMS:
        m = _USER_DID.search(t)
        if m and not _blocked(t, m.start(), c) and _context(sentence):
            return False, True
    return False, False


def _found(rx: re.Pattern[str], t: str, c: Clause) -> re.Match[str] | None:
    """The first match of `rx` in the clause, unless a negation, a modal or an offer blocks it."""
    m = rx.search(t)
    return m if m and not _blocked(t, m.start(), c) else None


def read(c: Clause, sentence: str, asked: bool = False) -> bool:
    m: re.Match[str] | None
    t, toks = c.text, c.toks
    ctx = None

    def context() -> bool:
        nonlocal ctx
        if ctx is None:
            ctx = bool(CAL_NOUN.search(t) or _TIME.search(t) or _READ_CTX.search(t))
        return ctx

    if "you" in toks:
        if any(not _blocked(t, m.start(), c) and context() for m in _YOU_HAVE.finditer(t)):
            return True
        if "had" in toks and _found(_YOU_HAD, t, c):
            return True
        m = _found(_YOU_DOING, t, c)
        # (a plan restated before an offer or a question is the user's own, echoed back: "So you're
        # seeing the dentist at 3 — should I add it?")
        if m and _TIME.search(t, m.end()) and not offered(MOOD, sentence, asked):
            return True
        m = _found(_YOU_ARE, t, c)
        if m and (not _SYMPATHY.search(m.group()) or _TIME.search(t)):
            return True
    if "there" in toks and any(not _blocked(t, m.start(), c) and context() for m in _THERE.finditer(t)):
        return True
    if "your" in toks:
        for m in _YOUR.finditer(t):
            if _blocked(t, m.start(), c) or m.group("pred") in _CHANGE_WORDS:
                continue
            pred = m.group("pred")
            if not pred:
                continue  # a streamed prefix ending at the verb ("your calendar has"): wait for more
            if m.group("cop") in _YOUR_CONTENT_VERBS or _YOUR_PRED.match(pred):
                return True
    if toks & _G_NOTHING:
        m = _found(_NOTHING, t, c)
        if m:
            tail = t[m.end() :]
            if not _NOTHING_CHANGED.search(tail) and (_NOTHING_CTX.search(tail) or _TIME.search(tail)):
                return True
    if toks & _G_TIME or c.digits:
        if _found(_TIME_SUBJECT, t, c):
            return True
        if toks & _G_EVENT_AT:
            m = _found(_EVENT_AT, t, c)
            if (
                m
                and not _ECHO_GAP.search(m.group("gap"))
                and _TIME.search(t, m.start("at"))
                and not offered(MOOD, sentence, asked)
            ):
                return True
    if toks & _G_HAS and (toks & _G_TIME or c.digits) and _found(_TIME_HAS, t, c):
        return True
    if toks & _G_REMAIN and _found(_REMAIN, t, c) and context():
        return True
    if toks & _G_LEAVES and _found(_LEAVES, t, c):
        return True
    if "your" in toks and toks & _G_NEXT:
        m = _found(_YOUR_NEXT, t, c)
        if m and _TIME.search(t, m.start()):
            return True
    # ... of a day or a time: "it's your first meeting with them" is about the people
    if toks & _G_ORDINAL and _found(_ORDINAL, t, c) and (_TIME.search(t) or _OF_DAY.search(t)):
        return True
    return any(toks & gate and _found(rx, t, c) for gate, rx in _SURFACE_PARTS)


def listed(sentence: str) -> bool:
    """An enumerated list of times with titles ("9am standup, 11am client call, 3pm review")."""
    return clocks(CLOCK, sentence) >= 2 and bool(CAL_NOUN.search(sentence) or _YOU.search(sentence))
