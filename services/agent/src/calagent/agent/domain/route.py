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


def decide_route(stub_status: str | None, patch: SlotPatch) -> Route:
    if stub_status in MERGEABLE_STATUSES and not patch.is_empty():
        return "fast_path"
    return "model"


def write_hold(third_party: bool) -> Literal["third_party_content"] | None:
    """Writes driven by forwarded or quoted content are held, never executed on the first turn."""
    return "third_party_content" if third_party else None
