"""Session segments: only the latest stretch of conversation enters the prompt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class ArchivedMessage:
    role: str  # "user" | "assistant"
    content: str
    created_at: datetime
    # The stub an assistant message offered for a bare "好"/"no" (the timed gate), if any.
    offer_command_id: str | None = None
    # The turn that wrote the message: a bare "撤销" after an assistant's receipt undoes that
    # turn's change (contract §15).
    turn_id: str | None = None
    # Whose words an assistant message quoted besides the user's (contract §19: an invitation,
    # an event someone else organizes, a card), if any: it is replayed by that, not by its text.
    third_party: str | None = None


@dataclass(frozen=True)
class SessionSegment:
    messages: tuple[ArchivedMessage, ...]
    older_count: int  # messages before the segment, reachable only through search_chat_archive
    older_last_at: datetime | None


def latest_segment(
    history: Sequence[ArchivedMessage], now: datetime, gap: timedelta, max_messages: int = 20
) -> SessionSegment:
    """`history` oldest first. A silence longer than `gap` (between two messages, or between the
    last message and now) starts a new segment; stale relative dates stay out of the prompt."""
    start = len(history)
    previous = now
    for index in range(len(history) - 1, -1, -1):
        if previous - history[index].created_at > gap:
            break
        start = index
        previous = history[index].created_at
    kept = list(history[start:])
    if len(kept) > max_messages:
        start += len(kept) - max_messages
        kept = kept[-max_messages:]
    older = history[:start]
    return SessionSegment(
        messages=tuple(kept),
        older_count=len(older),
        older_last_at=older[-1].created_at if older else None,
    )
