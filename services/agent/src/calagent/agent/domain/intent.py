"""Post-hoc intent: a label read off the real tool sequence, never a control signal.

Seed 000's table: create with an active stub → clarification reply; create → create; query →
query_range; memory search → memory.search; archive search → archive.search; no tool → chat.
"""

from __future__ import annotations

from collections.abc import Sequence

_LABELS = {
    "query_schedule_range": "schedule.query_range",
    "suggest_free_time": "schedule.suggest_free_time",
    "cancel_schedule_command": "schedule.cancel",
    "confirm_command": "schedule.confirm",
    "find_events": "schedule.find",
    "update_schedule": "schedule.update",
    "delete_schedule": "schedule.delete",
    "propose_automation": "automation.propose",
    "save_memory": "memory.save",
    "search_memory": "memory.search",
    "search_chat_archive": "archive.search",
}


def infer_post_hoc_intent(
    tool_names: Sequence[str], *, had_active_stub: bool, fast_path: bool = False
) -> str:
    if fast_path:
        return "schedule.clarification_reply"
    # The last meaningful call decides: `search_memory` then `prepare_or_create_schedule` is a create
    # that needed a private fact first, so the create is the label.
    for name in reversed(tool_names):
        if name == "prepare_or_create_schedule":
            return "schedule.clarification_reply" if had_active_stub else "schedule.create"
        if name in _LABELS and name not in {"search_memory", "search_chat_archive", "find_events"}:
            return _LABELS[name]
    for name in reversed(tool_names):
        if name in _LABELS:
            return _LABELS[name]
    return "general.chat"
