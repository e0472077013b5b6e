"""The claim detector's word lists and marker patterns, read from `data/<lang>.toml` once.

The lexical classes are data so that the grammar that combines them (`zh.py`, `en.py`) reads on
one screen, and so that widening a class is an edit to a list, not to code. A pattern may name
another entry of its file as `{{name}}` (see the files' headers); names are resolved here, and a
name that does not exist, or a pattern that does not compile, fails at import rather than on the
first reply.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["Lexicon", "alt", "lexicon"]

_Trie = dict[str, "_Trie"]
_REFERENCE = re.compile(r"\{\{([a-z_]+(?:\+[a-z_]+)*)\}\}")


def alt(words: Iterable[str]) -> str:
    """A regex matching any of `words`, the longest one at a position (Python's `|` takes the first
    alternative, not the longest). Built as a prefix trie so the regex engine tests one character
    per branch instead of every word in turn: these tables run on every streamed prefix."""
    trie: _Trie = {}
    for word in set(words):
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: _Trie) -> str:
        ends = "" in node
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:
            body = "(?:" + body + ")?"
        return body

    return build(trie)


def _text(value: Any) -> str:
    """A pattern written whole or as a list of pieces."""
    return value if isinstance(value, str) else "".join(value)


@dataclass(frozen=True)
class Lexicon:
    lang: str
    _words: dict[str, tuple[str, ...]]
    _patterns: dict[str, str]
    _parts: dict[str, tuple[tuple[tuple[str, ...], str], ...]]

    def words(self, name: str) -> tuple[str, ...]:
        return self._words[name]

    def wordset(self, *names: str) -> frozenset[str]:
        return frozenset(word for name in names for word in self._words[name])

    def source(self, name: str) -> str:
        """The text of a pattern (or the alternation of a word list), references resolved."""
        if name in self._words:
            return alt(self._words[name])
        return self._expand(self._patterns[name])

    def regex(self, name: str) -> re.Pattern[str]:
        return re.compile(self.source(name))

    def parts(self, name: str) -> tuple[tuple[frozenset[str], re.Pattern[str]], ...]:
        """Gated patterns: (anchor words, pattern) pairs."""
        return tuple((frozenset(gate), re.compile(self._expand(text))) for gate, text in self._parts[name])

    def _expand(self, text: str) -> str:
        def resolve(m: re.Match[str]) -> str:
            names = m.group(1).split("+")
            if len(names) == 1 and names[0] in self._patterns:
                return self.source(names[0])
            return alt(word for name in names for word in self._words[name])

        return _REFERENCE.sub(resolve, text)


@cache
def lexicon(lang: str) -> Lexicon:
    raw = tomllib.loads(resources.files(__package__).joinpath("data", f"{lang}.toml").read_text("utf-8"))
    words = {name: tuple(value) for name, value in raw.pop("words", {}).items()}
    patterns = {name: _text(value) for name, value in raw.pop("patterns", {}).items()}
    parts = {
        name: tuple((tuple(part["gate"]), _text(part["pattern"])) for part in value)
        for name, value in raw.items()
    }
    if clash := words.keys() & patterns.keys():
        raise ValueError(f"claims lexicon {lang}: {sorted(clash)} name both words and a pattern")
    return Lexicon(lang, words, patterns, parts)
