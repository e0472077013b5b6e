"""Messages of the eval recorder: timelines and reports of recorded turns."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from calagent.contracts.base import WireModel
from calagent.contracts.limits import MAX_RANGE_DAYS
from calagent.contracts.turns import Segment


class TimelineRequest(WireModel):
    turn_id: str
    user_id: str | None = None  # the gateway scopes the lookup to the caller


class Timeline(WireModel):
    turn_id: str
    total_ms: float
    segments: tuple[Segment, ...]


class TimelineResult(WireModel):
    timeline: Timeline | None = None


class ReportRequest(WireModel):
    candidates: bool = False
    limit: int = 200


class ReportResult(WireModel):
    report: dict[str, Any]


class UsageRequest(WireModel):
    """Tokens used over the last `days` days (today included, in `tz`), for one user or all."""

    user_id: str | None = None
    days: int = Field(default=7, ge=1, le=MAX_RANGE_DAYS)
    by: Literal["day", "user", "model"] = "day"
    tz: str = "UTC"


class UsageRow(WireModel):
    key: str  # the day (ISO date), the user or the model
    turns: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # Calls whose endpoint sent no usage: their tokens are unknown, not zero.
    unreported_calls: int = 0


class UsageResult(WireModel):
    since: str  # the first day counted (ISO date)
    rows: tuple[UsageRow, ...] = ()
    total: UsageRow
