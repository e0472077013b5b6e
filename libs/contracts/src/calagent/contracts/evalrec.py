"""Messages of the eval recorder: timelines and reports of recorded turns."""

from __future__ import annotations

from typing import Any

from calagent.contracts.base import WireModel
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
