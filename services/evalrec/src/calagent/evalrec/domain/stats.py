"""Order statistics for latency numbers."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0–100) by linear interpolation between closest ranks.

    The same definition as PostgreSQL's `percentile_cont` and numpy's default, so a number in a
    report can be checked against either. `None` for no values: an empty bucket has no p95, and
    printing 0 there would read as "instant".
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(values)
    if not ordered:
        return None
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(values: Iterable[float]) -> dict[str, float | int | None]:
    """Count, p50 and p95 of one bucket, rounded to 0.1 ms (finer is noise in a report)."""
    data = list(values)
    p50 = percentile(data, 50)
    p95 = percentile(data, 95)
    return {
        "count": len(data),
        "p50": None if p50 is None else round(p50, 1),
        "p95": None if p95 is None else round(p95, 1),
    }


def mean(values: Iterable[float]) -> float | None:
    data = list(values)
    if not data:
        return None
    return sum(data) / len(data)
