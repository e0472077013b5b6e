"""Which language a receipt is written in: chosen from the user's own message."""

from __future__ import annotations

from calagent.contracts.display import Lang
from calagent.contracts.text import HAN

__all__ = ["Lang", "detect_language"]


def detect_language(text: str) -> Lang:
    return "zh" if HAN.search(text) else "en"
