"""What a free-time suggestion (`SuggestFree`) answers: the slots found, whose time was counted,
and why none was found."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from calagent.contracts.base import WireModel


class FreeSlot(WireModel):
    start: datetime
    end: datetime
    weekday: int


# Why a suggestion found no slot: nothing of the range is ahead; the working hours of the people
# counted do not meet in it; they meet, but busy time (or the length asked for) leaves no slot.
NoSlotReason = Literal["past", "no_common_hours", "busy"]


class SuggestionPeople(WireModel):
    """Whose time a suggestion counted besides the caller's, and whose it could not (they share no
    free/busy with the caller, or are not users here): by the names the model gave, nothing more."""

    counted: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
