"""Words shared by every reader of a reply that picks one of several things (contract §20).

The time service reads a pick by its day or time ("五点那个", "the 3pm one"), the agent one by its
title words ("吃饭那个"): both set aside the same words that only point.
"""

from __future__ import annotations

# The words that point at one of several things and say nothing of which. They complete only a
# choice among candidates, never a reply merged into a stub's slots.
POINTING_WORDS: tuple[str, ...] = (
    "那个", "那一个", "那场", "那一场", "那次", "那一次", "那项", "这个", "这场", "这次", "的",
    "the one", "that one", "this one", "one", "the",
)  # fmt: skip
