"""The code-side routing decision of a turn, as a pure function of facts.

It reads only the user's own words (already unwrapped by the gateway), the slot patch the
short-reply parser found in them, and the active stub's status, so a transport envelope cannot
change it: `decide(w(s)) == decide(s)` for every wrapper `w`.
"""

from __future__ import annotations

from typing import Literal

from calagent.contracts.time import SlotPatch

Route = Literal["fast_path", "model"]
MERGEABLE_STATUSES = frozenset({"needs_date", "needs_time", "conflict"})


def decide_route(
    stub_status: str | None, patch: SlotPatch, candidate_weekdays: frozenset[int] = frozenset()
) -> Route:
    """Code merges a short reply only when what it extracted can answer the stub as asked.

    A weekday outside the stub's candidates ("周三" to a weekend question) or a date in the past
    ("昨天下午…" — a remark, not an answer) is not guessed into a merge: the model, which sees the
    stub, decides instead.
    """
    if stub_status not in MERGEABLE_STATUSES or patch.is_empty():
        return "model"
    if patch.weekday is not None and candidate_weekdays and patch.weekday not in candidate_weekdays:
        return "model"
    if patch.date is not None and patch.date.startswith("D-"):
        return "model"
    return "fast_path"


def write_hold(third_party: bool) -> Literal["third_party_content"] | None:
    """Writes driven by forwarded or quoted content are held, never executed on the first turn."""
    return "third_party_content" if third_party else None
