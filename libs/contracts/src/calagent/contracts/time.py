"""Messages of the time service: canonical symbols in, absolute time out.

The service is stateless; `now` and `tz` always travel with the request so every answer is a pure
function of its input (and so every test and eval can freeze time).
"""

from __future__ import annotations

import datetime as dt
from typing import Literal, Protocol, Self

from pydantic import Field, model_validator

from calagent.contracts.base import WireModel

ErrorCode = Literal["invalid_symbol", "invalid_time", "invalid_range", "unknown_holiday", "invalid_zone"]


class SymbolError(WireModel):
    code: ErrorCode
    message: str


class ResolveRequest(WireModel):
    """Symbols to resolve; `words`, when given, are the user's own words of the turn that asks for
    the write: the answer then carries their recurrence marker (contract section 9's backstop)."""

    date: str = Field(max_length=64)
    time: str | None = Field(default=None, max_length=16)
    end_time: str | None = Field(default=None, max_length=16)
    now: dt.datetime
    tz: str
    holiday_country: str = "CN"
    words: str | None = Field(default=None, max_length=4000)


class ResolveResult(WireModel):
    """Exactly one of: `start` (date and time given), `date` (date only), `candidates`
    (an ambiguous symbol such as a weekend), `error`."""

    start: dt.datetime | None = None
    end: dt.datetime | None = None
    date: dt.date | None = None
    candidates: tuple[dt.date, ...] = ()
    error: SymbolError | None = None
    # The first recurrence / trigger marker of the request's `words` (as `ParsedReply`'s), None
    # when there is none or no words were sent.
    recurrence_marker: str | None = Field(default=None, max_length=32)


class RangeRequest(WireModel):
    start: str = Field(max_length=64)
    end: str = Field(max_length=64)
    now: dt.datetime
    tz: str
    holiday_country: str = "CN"


class RangeResult(WireModel):
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    error: SymbolError | None = None


class ParseReplyRequest(WireModel):
    """A message to read as a short reply.

    `now` and `tz` are optional: most forms are emitted as symbols and need neither, but a day of
    the month said alone or against a month ("12号", "下个月5号", "月底", "the 12th") is only a
    date once today is known, and is answered as `YYYY-MM-DD`. Without both of them those forms
    give `{}` (the model decides). A naive `now` is wall time in `tz`, as for the resolver.
    """

    text: str = Field(max_length=4000)
    now: dt.datetime | None = None
    tz: str | None = Field(default=None, max_length=64)


# The a.m. reading of an hour written without its half of the day: 01..11, so that adding 12 hours
# (the p.m. reading) is still a time of the same day.
_AM_READING = r"^(?:0[1-9]|1[01]):[0-5][0-9]$"


class SlotPatch(WireModel):
    """What the short-reply parser extracts; every key optional, `{}` means nothing bounded.

    `ambiguous_time` / `ambiguous_end_time` hold an hour written without any period word or am/pm
    ("3点一刻", "at 3", "3点到4点"): people usually mean the afternoon, so it is not written as
    `time`. They hold the a.m. reading ("03:15"); whoever knows which half of the day is meant
    (the user, asked) calls `resolve_period`. A patch carries at most one of `time` and
    `ambiguous_time`, and at most one of `end_time` and `ambiguous_end_time`.
    """

    date: str | None = None
    weekday: int | None = Field(default=None, ge=1, le=7)
    time: str | None = None
    end_time: str | None = None
    ambiguous_time: str | None = Field(default=None, pattern=_AM_READING)
    ambiguous_end_time: str | None = Field(default=None, pattern=_AM_READING)

    @model_validator(mode="after")
    def _one_reading_per_slot(self) -> Self:
        if self.time is not None and self.ambiguous_time is not None:
            raise ValueError("time and ambiguous_time are exclusive")
        if self.end_time is not None and self.ambiguous_end_time is not None:
            raise ValueError("end_time and ambiguous_end_time are exclusive")
        return self

    def is_empty(self) -> bool:
        """True only when nothing at all was extracted (an ambiguous hour is something)."""
        return not self.model_dump(exclude_none=True)

    def has_ambiguous_hour(self) -> bool:
        return self.ambiguous_time is not None or self.ambiguous_end_time is not None

    def resolve_period(self, pm: bool) -> SlotPatch:
        """This patch with its ambiguous hours read as a.m. (`pm=False`) or p.m. (12 hours later):
        they move into `time` / `end_time` and the ambiguous fields are cleared. Pure; a patch
        without ambiguous hours is returned as it is."""
        if not self.has_ambiguous_hour():
            return self
        values = self.model_dump(exclude_none=True)
        for ambiguous, slot in (("ambiguous_time", "time"), ("ambiguous_end_time", "end_time")):
            reading = values.pop(ambiguous, None)
            if reading is not None:
                hour, minute = reading.split(":")
                values[slot] = f"{int(hour) + (12 if pm else 0):02d}:{minute}"
        # Built from the bound keys only, so `exclude_unset` and `exclude_none` still agree.
        return SlotPatch(**values)


class ParsedReply(WireModel):
    """The answer on `calagent.time.parse_reply`.

    `complete` is True only when the reply grammar plus a small filler lexicon consumed the whole
    message (contract section 8): only then may code merge `patch` with zero model calls.
    "删除明天下午四点的会" has a patch but is not complete. It lives here and not in `SlotPatch`
    because a patch also travels inside merge commands, where completeness means nothing.
    `recurrence_marker` lives here for the same reason.
    """

    patch: SlotPatch
    complete: bool
    # `complete` once the words that point at one of several things are set aside too ("五点那个",
    # "the 3pm one"): a reply that picks one of a change's candidate events by its day or time
    # (contract §20). It never completes a reply merged into a stub's slots.
    points_at_one: bool = False
    # The days the patch's `date` names, read by the resolver against the request's `now` and `tz`
    # (empty without them, or without a date): what a pick compares with its candidates' days.
    days: tuple[dt.date, ...] = ()
    # The first word of the time service's bounded recurrence / trigger lexicon (contract section
    # 9) found anywhere in the user's own words (transport wrappers removed), as written: "每周",
    # "every", "自动". None when there is none. It does not depend on the message being a short
    # reply; the create's hold reads the same marker from `ResolveResult`.
    recurrence_marker: str | None = Field(default=None, max_length=32)


# Times proposed to someone outside number at most three (contract §20); a few more are room to spare.
MAX_PROPOSED_SLOTS = 10


class ChooseSlotRequest(WireModel):
    """Someone's reply to times proposed to them (contract §20), read for the one slot it names:
    the slots' starts in the order they were offered, and the zones a weekday, day or time in it
    may be meant in (the attendee's, when known, then the user's). The reply is someone else's
    words: read by code for that one thing, never by the model as instructions."""

    text: str = Field(max_length=20_000)
    starts: tuple[dt.datetime, ...] = Field(max_length=MAX_PROPOSED_SLOTS)
    zones: tuple[str, ...] = Field(min_length=1, max_length=3)


class ChosenSlot(WireModel):
    """The answer on `calagent.time.choose_slot`: the index of the one slot the reply's own words
    name; None when they name none or several, contradict each other, or refuse them all."""

    index: int | None = None


class TimeService(Protocol):
    """The time service's answers as a caller sees them (served over `wire.TIME_*`)."""

    async def resolve(self, request: ResolveRequest) -> ResolveResult: ...

    async def resolve_range(self, request: RangeRequest) -> RangeResult: ...

    async def parse_reply(self, request: ParseReplyRequest) -> ParsedReply: ...

    async def choose_slot(self, request: ChooseSlotRequest) -> ChosenSlot: ...
