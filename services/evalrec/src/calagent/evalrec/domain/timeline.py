"""Assembling one turn's timeline from what the agent and the gateway each measured."""

from __future__ import annotations

from collections.abc import Iterable

from calagent.contracts.evalrec import Timeline
from calagent.contracts.turns import Segment

# At equal offsets the gateway's segment opened first: it received the request before anything
# downstream could start.
SOURCE_ORDER = {"gateway": 0, "agent": 1}


def assemble_timeline(
    turn_id: str,
    *,
    agent_total_ms: float | None,
    gateway_total_ms: float | None,
    segments: Iterable[tuple[str, Segment]],
) -> Timeline | None:
    """Segments of both sources on one axis, sorted by start; `None` when nothing was recorded.

    The total is the gateway's when it reported one (the user's real wait), else the agent's, else
    the end of the last segment.
    """
    ordered = sorted(
        segments, key=lambda item: (item[1].start_ms, SOURCE_ORDER.get(item[0], 9), item[1].name)
    )
    if agent_total_ms is None and gateway_total_ms is None and not ordered:
        return None
    total = next((t for t in (gateway_total_ms, agent_total_ms) if t is not None and t > 0), None)
    if total is None:
        total = max((s.start_ms + s.ms for _, s in ordered), default=0.0)
    return Timeline(turn_id=turn_id, total_ms=total, segments=tuple(s for _, s in ordered))
