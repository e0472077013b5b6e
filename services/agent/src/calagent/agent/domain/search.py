"""Term extraction for memory and archive search.

PostgreSQL's built-in text search has no Chinese tokenizer and pg_trgm ignores CJK characters
under the C locale, so search is term matching done by the database (ILIKE per term) and ranked
here: CJK text is split into character bigrams, other text into lowercase words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from calagent.contracts.text import HAN_RUN

_WORD = re.compile(r"[a-z0-9][a-z0-9'\-]+", re.IGNORECASE)
_STOP = frozenset({"the", "and", "for", "with", "what", "was", "my", "me", "is", "of", "to", "a", "an"})
_CJK_STOP = frozenset({"什么", "一下", "我的", "是什", "记得", "吗", "的"})


def search_terms(query: str, limit: int = 12) -> list[str]:
    terms: list[str] = []
    for run in HAN_RUN.findall(query):
        if len(run) == 1:
            terms.append(run)
            continue
        terms.extend(run[i : i + 2] for i in range(len(run) - 1))
    terms.extend(word.lower() for word in _WORD.findall(query) if word.lower() not in _STOP)
    unique: list[str] = []
    for term in terms:
        if term not in unique and term not in _CJK_STOP:
            unique.append(term)
    return unique[:limit]


def rank(texts: Iterable[str], terms: list[str], top: int = 5) -> list[str]:
    scored = []
    for text in texts:
        lowered = text.lower()
        score = sum(1 for term in terms if term in lowered)
        if score:
            scored.append((score, text))
    scored.sort(key=lambda pair: -pair[0])
    return [text for _, text in scored[:top]]
