"""Assembling one turn's timeline from its recorded segments."""

from __future__ import annotations

from collections.abc import Iterable

from calagent.contracts.evalrec import Timeline
from calagent.contracts.turns import Segment
from calagent.evalrec.domain.report import measured_total

# Turns recorded before the agent's record carried the gateway's receive segment have the gateway's
# own segments under source "gateway"; at equal offsets those opened first.
SOURCE_ORDER = {"gateway": 0, "agent": 1}


def assemble_timeline(
    turn_id: str, *, total_ms: float | None, segments: Iterable[tuple[str, Segment]]
) -> Timeline | None:
    """Segments on one axis, sorted by start; `None` when nothing was recorded.

    The total is the record's (from the gateway's receipt of the request), else the end of the last
    segment.
    """
    ordered = sorted(
        segments, key=lambda item: (item[1].start_ms, SOURCE_ORDER.get(item[0], 9), item[1].name)
    )
    if total_ms is None and not ordered:
        return None
    total = measured_total(total_ms)
    if total is None:
        total = max((s.start_ms + s.ms for _, s in ordered), default=0.0)
    return Timeline(turn_id=turn_id, total_ms=total, segments=tuple(s for _, s in ordered))
