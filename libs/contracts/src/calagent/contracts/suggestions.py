"""What a free-time suggestion (`SuggestFree`) answers (contract §16, §20): the slots found, each
with how sure it is and why, whose time was counted, and why none was found.

Confidence is Microsoft Graph's `findMeetingTimes` rule: each person counted has a chance of
attending (`AVAILABILITY_SCORE`) and a slot's confidence is their mean. Graph documents free 100,
unknown 49 and busy 0; the other two values are ours. `tentative` is 50: the event that holds the
time may happen or not, an even chance, and a known even chance ranks just above Graph's
"unknown" (which it puts just under even on purpose). `outside_hours` is 0, as busy: Graph offers
no time outside working hours for work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from calagent.contracts.base import WireModel

# How one person's time looks over a slot: free; busy (an event marked busy, or the buffer around
# one); tentative (an event that may not happen: STATUS:TENTATIVE, or an invitation answered
# tentatively); unknown (their calendar is not shared with the caller); outside their working hours.
Availability = Literal["free", "busy", "tentative", "unknown", "outside_hours"]
AVAILABILITY_SCORE: Final[dict[Availability, int]] = {
    "free": 100,
    "tentative": 50,
    "unknown": 49,
    "busy": 0,
    "outside_hours": 0,
}

# Why a slot is as sure as it is: everyone counted is free; someone's time then is held by a
# tentative event; nobody's is, but someone's calendar is unknown.
SlotReason = Literal["all_free", "tentative", "unknown"]

# Why a suggestion found no slot, checked in this order: the part of the range still ahead cannot
# hold the length asked for (or none of it is ahead); the working hours of the people counted do
# not meet for that long; an attendee's own busy time leaves none (`attendees_unavailable`, they
# are named in `SuggestionPeople.busy`); the caller's own busy time does; the attendees' and the
# caller's busy time together do (`attendees_unavailable`: none when the caller is free).
EmptyReason = Literal["window_too_short", "outside_hours", "organizer_unavailable", "attendees_unavailable"]


class SlotAttendee(WireModel):
    """One person over one slot. `who` is the caller's user id (listed first) or an attendee as the
    model named them; nothing of their events is said, only how their time looks."""

    who: str
    availability: Availability


class SuggestedSlot(WireModel):
    """One time a suggestion offers, in the user's zone: the slot of a turn's answer (§20)."""

    start: datetime
    end: datetime
    # The mean of `AVAILABILITY_SCORE` over `attendees`, rounded to two decimals.
    confidence: float = Field(default=100.0, ge=0, le=100)
    attendees: tuple[SlotAttendee, ...] = ()
    reason: SlotReason = "all_free"


class FreeSlot(SuggestedSlot):
    """A slot as the query answers it, with its weekday (ISO: 1 = Monday) for the agent's words."""

    weekday: int


class SuggestionPeople(WireModel):
    """Whose time a suggestion counted besides the caller's, and whose it could not (they share no
    free/busy with the caller, or are not users here): by the names the model gave, nothing more."""

    counted: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    # With no slot: those of `counted` whose own busy time leaves none in the range (§20).
    busy: tuple[str, ...] = ()
