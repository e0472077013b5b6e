"""Messages of the time service: canonical symbols in, absolute time out.

The service is stateless; `now` and `tz` always travel with the request so every answer is a pure
function of its input (and so every test and eval can freeze time).
"""

import datetime as dt
from typing import Literal

from pydantic import Field

from calagent.contracts.base import WireModel

ErrorCode = Literal["invalid_symbol", "invalid_time", "invalid_range", "unknown_holiday", "invalid_zone"]


class SymbolError(WireModel):
    code: ErrorCode
    message: str


class ResolveRequest(WireModel):
    date: str = Field(max_length=64)
    time: str | None = Field(default=None, max_length=16)
    end_time: str | None = Field(default=None, max_length=16)
    now: dt.datetime
    tz: str
    holiday_country: str = "CN"


class ResolveResult(WireModel):
    """Exactly one of: `start` (date and time given), `date` (date only), `candidates`
    (an ambiguous symbol such as a weekend), `error`."""

    start: dt.datetime | None = None
    end: dt.datetime | None = None
    date: dt.date | None = None
    candidates: tuple[dt.date, ...] = ()
    error: SymbolError | None = None


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
    text: str = Field(max_length=4000)


class SlotPatch(WireModel):
    """What the short-reply parser extracts; every key optional, `{}` means nothing bounded."""

    date: str | None = None
    weekday: int | None = Field(default=None, ge=1, le=7)
    time: str | None = None
    end_time: str | None = None

    def is_empty(self) -> bool:
        return not self.model_dump(exclude_none=True)
