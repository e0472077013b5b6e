"""Sentences, clauses and moods: where a claim may stand at all.

A claim lives in one clause; a question mark or an "if" in a neighbouring clause must not hide it
("已经帮你取消了，还需要别的吗？"). Each language's `Mood` holds its tables of markers (questions,
conditions, offers, headers) and gives the clauses of a sentence that are assertions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from calagent.agent.domain.claims.lexicon import lexicon

__all__ = ["Clause", "Mood", "clocks", "offered", "sentences", "split_clauses"]

# Sentence ends: CJK and ASCII terminal punctuation, newlines, ellipses, and an English full stop
# followed by space/end unless it closes a one-letter abbreviation (a.m., p.m., e.g.).
_SENTENCE_END = re.compile(r"[。！？!?；;\n….]+")
_ABBREVIATION = re.compile(r"(?:^|[\s.])[a-z]$")  # the "m" of "p.m." or the "g" of "e.g."

# Punctuation to spaces, so that str.split() yields words ("you're" -> "you", "re").
_WORD_BREAKS = str.maketrans(dict.fromkeys("'\".,!?:;()[]{}<>-—–/\\*&@#…“”‘’", " "))
_STRIP = " \t'\"“”‘’「」*-•·"
_EDGE = re.compile(r"^[\W_]+|[\W_]+$")
_DIGIT = re.compile(r"\d")
_CLAUSE_CHARS = str.maketrans(dict.fromkeys("，,（）()：—–", "\x00"))
# Emoji and pictographs end a clause like a comma does: "Done ✅ Booked the vet for 9" holds two
# clauses, and a receipt that opens with its verb must be seen at its clause's start.
_EMOJI = re.compile("[\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff]+[\ufe0f\u200d]*")
_COLON = re.compile(r":(?!\d)|(?<!\d):")
# Contrast words open a new assertion ("，但", "but", "不过"); so do a spaced dash and a double one.
_CONTRAST = (*lexicon("zh").words("contrast_words"), *lexicon("en").words("contrast_words"), " - ", "--")
# A range of clock times ("9点到11点", "14:00-16:00", "3-4pm") is one slot, not two entries.
_RANGE = re.compile(r"(?<=\d|点|半|分)\s*(?:到|至|-|–|—|~|～|to)\s*(?=\d|[一二三四五六七八九十两]+点)")


@dataclass
class Clause:
    text: str
    void_from: int = 1 << 30  # changes after this offset are proposed, not done (offers, ifs)
    toks: frozenset[str] = frozenset()  # English words of the clause (gates for the patterns)
    digits: bool = False


def sentences(text: str) -> Iterator[tuple[str, bool]]:
    """(sentence, ends_with_question_mark) pairs."""
    start = 0
    for m in _SENTENCE_END.finditer(text):
        mark = m.group()
        if mark[0] == "." and (
            (m.end() < len(text) and not text[m.end()].isspace())  # 3.5, e.g, a file name
            or _ABBREVIATION.search(text, max(0, m.start() - 2), m.start())
        ):
            continue
        chunk = text[start : m.start()].strip()
        if chunk:
            yield chunk, "?" in mark or "？" in mark
        start = m.end()
    tail = text[start:].strip()
    if tail:
        yield tail, False


def split_clauses(sentence: str) -> list[str]:
    """Clauses: split at commas, brackets, dashes, a colon outside a clock time, and the contrast
    words that open a new assertion."""
    s = sentence.translate(_CLAUSE_CHARS)
    if not s.isascii():
        s = _EMOJI.sub("\x00", s)
    if ":" in s:
        s = _COLON.sub("\x00", s)
    for word in _CONTRAST:
        if word in s:
            s = s.replace(word, "\x00")
    parts = (p.strip(_STRIP) for p in s.split("\x00"))
    # Leading check marks, emoji and markdown ("✅ 已创建", "**Done**") are not words.
    return [_EDGE.sub("", p) if not (p[0].isalnum() and p[-1].isalnum()) else p for p in parts if p]


def clocks(rx: re.Pattern[str], sentence: str) -> int:
    """How many clock times `rx` finds, a range of two counted as one."""
    n = len(rx.findall(sentence))
    return n - len(_RANGE.findall(sentence)) if n >= 2 else n


class Mood:
    """One language's mood tables, each merged into as few searches as possible."""

    def __init__(
        self,
        opener: re.Pattern[str],
        tag: re.Pattern[str],
        asks: Iterable[re.Pattern[str]],
        cond: re.Pattern[str],
        modal: re.Pattern[str],
        cond_tail: re.Pattern[str] | None,
        cue: re.Pattern[str] | frozenset[str],
        header: re.Pattern[str],
        gates: tuple[frozenset[str], frozenset[str], frozenset[str]] | None = None,
    ) -> None:
        self.opener = opener
        self.tag = tag
        # Searched one by one: an alternation of patterns loses the engine's first-character skip.
        self.asks = tuple(asks)
        self.cond = cond
        self.modal = modal
        self.cond_tail = cond_tail
        self.cue = cue
        self.header = header
        # English only: words without which the conditional / non-assertion / header tables cannot match.
        self.gates = gates

    def _cued(self, text: str) -> bool:
        if isinstance(self.cue, frozenset):
            return bool(self.cue.intersection(text.translate(_WORD_BREAKS).split())) or bool(
                _DIGIT.search(text)
            )
        return bool(self.cue.search(text))

    def clauses(self, sentence: str, asked: bool) -> tuple[list[Clause], bool]:
        """The clauses of a sentence that might hold a claim, each with its mood; and whether the
        sentence is free of questions and conditions (the enumerated-list check needs that)."""
        if not self._cued(sentence):
            return [], False  # no change verb, no read cue: nothing to split
        parts = split_clauses(sentence)
        if not parts:
            return [], False
        whole_question = bool(self.opener.search(parts[0])) or (
            asked and len(parts) > 1 and bool(self.tag.search(parts[-1]))
        )
        if whole_question:
            return [], False
        plain = not asked
        out: list[Clause] = []
        carry = False  # the previous clause was a protasis ("如果你确认，" / "if you confirm,")
        last = len(parts) - 1
        gates = self.gates
        for i, t in enumerate(parts):
            toks = frozenset(t.translate(_WORD_BREAKS).split()) if gates is not None else frozenset()
            if (gates is None or toks & gates[2]) and self.header.search(t):
                # "我的功能包括：创建日程、…" / "for example: …": the rest of the sentence describes.
                return out, False
            conditional = carry
            m = None if gates is not None and not (toks & gates[0]) else self.cond.search(t)
            carry = bool(m and (m.start() <= 2 or (self.cond_tail is not None and self.cond_tail.search(t))))
            if m or conditional:
                plain = False
            if conditional or (asked and i == last):
                continue
            digits = False
            if isinstance(self.cue, frozenset):
                digits = _DIGIT.search(t) is not None
                if not (toks & self.cue or digits):
                    continue
            elif not self.cue.search(t):
                continue
            if (gates is None or toks & gates[1]) and any(rx.search(t) for rx in self.asks):
                plain = False
                continue
            void = m.start() if m else 1 << 30
            mm = self.modal.search(t, 0, void)
            out.append(Clause(t, void_from=mm.start() if mm else void, toks=toks, digits=digits))
        return out, plain


def offered(mood: Mood, sentence: str, asked: bool) -> bool:
    """The sentence asks or offers: an event it names at a time is the user's request echoed back
    ("The class is at 6pm, want me to add it?"), not the calendar's contents."""
    return asked or bool(mood.modal.search(sentence))
