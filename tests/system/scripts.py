"""Shared pieces of the system tests."""

from __future__ import annotations

from calagent.scriptedmodel import Script


def create_meeting_script(date: str) -> Script:
    """A model that answers any message about a meeting with one create at 15:00 on `date`."""
    return Script.model_validate(
        {
            "rules": [
                {
                    "when": {"user_contains": "开会", "last_role": "user"},
                    "respond": {
                        "tool_calls": [
                            {
                                "name": "prepare_or_create_schedule",
                                "arguments": {"title": "开会", "date": date, "time": "15:00"},
                            }
                        ]
                    },
                }
            ],
            "default": {"text": "ok"},
        }
    )
