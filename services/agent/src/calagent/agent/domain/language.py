"""Which language a receipt is written in: chosen from the user's own message."""

from __future__ import annotations

import re

from calagent.contracts.display import Lang

__all__ = ["Lang", "detect_language"]

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def detect_language(text: str) -> Lang:
    return "zh" if _CJK.search(text) else "en"
