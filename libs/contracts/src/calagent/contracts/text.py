"""Text this system can store and send (no NUL, no lone surrogate), and what counts as Chinese.

PostgreSQL's `text` and `jsonb` cannot store U+0000, and a lone UTF-16 surrogate (U+D800–U+DFFF,
which JSON lets a client spell as `"\\ud800"`) has no UTF-8 encoding at all: either one that
reached a write or a message on the bus would fail it on every retry and dead-letter the turn. So
both are refused where text enters (HTTP input, the model's tool arguments) and stripped from what
the model writes freely.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

NUL = "\x00"
NUL_MESSAGE = "the NUL character (U+0000) is not allowed"
SURROGATE_MESSAGE = "text must be valid Unicode: a lone surrogate (U+D800–U+DFFF) is not allowed"
_SURROGATE = re.compile("[\ud800-\udfff]")

# A Han ideograph: the CJK Unified Ideographs (U+4E00–U+9FFF) with Extension A (U+3400–U+4DBF),
# the Compatibility Ideographs (U+F900–U+FAFF), and planes 2 and 3, which hold nothing but
# ideographs (Extensions B–H and the Compatibility Supplement). CJK punctuation (。，、「」) is not in
# it: a reply of punctuation alone is not Chinese, and every use here counts or finds ideographs.
HAN_CLASS = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"
HAN = re.compile(HAN_CLASS)
HAN_RUN = re.compile(HAN_CLASS + "+")


def unstorable_reason(value: str) -> str | None:
    """Why `value` cannot be stored or sent, or None when it can."""
    if NUL in value:
        return NUL_MESSAGE
    if _SURROGATE.search(value):
        return SURROGATE_MESSAGE
    return None


def unstorable_in(data: Any) -> str | None:
    """The first reason any string inside `data` (keys included) cannot be stored, or None."""
    if isinstance(data, str):
        return unstorable_reason(data)
    if isinstance(data, dict):
        items: list[Any] = [x for pair in data.items() for x in pair]
        return next((r for r in map(unstorable_in, items) if r), None)
    if isinstance(data, list | tuple):
        return next((r for r in map(unstorable_in, data) if r), None)
    return None


def storable(data: Any) -> Any:
    """`data` with NULs and lone surrogates removed from every string."""
    if isinstance(data, str):
        return _SURROGATE.sub("", data.replace(NUL, ""))
    if isinstance(data, dict):
        return {storable(k): storable(v) for k, v in data.items()}
    if isinstance(data, list):
        return [storable(v) for v in data]
    return data


def refuse_unstorable(value: str) -> str:
    reason = unstorable_reason(value)
    if reason:
        raise ValueError(reason)
    return value


def normalise_title(title: str) -> str:
    """A title as two titles are compared (a create continuing a stub, two events found for the same
    words): case, whitespace and punctuation do not count."""
    return "".join(
        ch for ch in title.casefold() if not ch.isspace() and not unicodedata.category(ch).startswith("P")
    )
