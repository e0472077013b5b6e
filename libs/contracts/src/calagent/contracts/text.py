"""NUL, the one character text in this system may not carry.

PostgreSQL's `text` and `jsonb` cannot store U+0000: a NUL that reached a write would fail it on
every retry and dead-letter the turn. So it is refused where text enters (HTTP input, the model's
tool arguments) and stripped from what the model writes freely.
"""

from __future__ import annotations

from typing import Any

NUL = "\x00"
NUL_MESSAGE = "the NUL character (U+0000) is not allowed"


def has_nul(data: Any) -> bool:
    if isinstance(data, str):
        return NUL in data
    if isinstance(data, dict):
        return any(has_nul(k) or has_nul(v) for k, v in data.items())
    if isinstance(data, list | tuple):
        return any(has_nul(v) for v in data)
    return False


def without_nul(data: Any) -> Any:
    if isinstance(data, str):
        return data.replace(NUL, "")
    if isinstance(data, dict):
        return {without_nul(k): without_nul(v) for k, v in data.items()}
    if isinstance(data, list):
        return [without_nul(v) for v in data]
    return data


def refuse_nul(value: str) -> str:
    if NUL in value:
        raise ValueError(NUL_MESSAGE)
    return value
