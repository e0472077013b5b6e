"""Time as a dependency: nothing in calagent reads the wall clock except `SystemClock`."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """An aware datetime."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock:
    """A clock that only moves when told to; `CALAGENT_NOW` builds one for every service."""

    def __init__(self, at: datetime) -> None:
        if at.tzinfo is None:
            raise ValueError("a frozen clock needs an aware datetime (ISO 8601 with offset)")
        self._at = at

    def now(self) -> datetime:
        return self._at

    def advance(self, delta: timedelta) -> None:
        self._at += delta

    def set(self, at: datetime) -> None:
        self._at = at


def parse_now(value: str) -> datetime:
    at = datetime.fromisoformat(value)
    if at.tzinfo is None:
        raise ValueError(f"CALAGENT_NOW must carry an offset, got {value!r}")
    return at


def clock_from_env(value: str | None = None) -> Clock:
    raw = value if value is not None else os.environ.get("CALAGENT_NOW")
    if raw:
        return FrozenClock(parse_now(raw))
    return SystemClock()
