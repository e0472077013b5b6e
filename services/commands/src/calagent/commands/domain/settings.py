"""A user's settings as stored, and what they mean where a default applies. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import time, timedelta

from calagent.contracts.settings import (
    DEFAULT_INVITATIONS_FROM,
    WEEKDAY_KEYS,
    InvitationsFrom,
    Language,
    SettingsOut,
    SettingsPatch,
    WorkHours,
    default_work_hours,
    parse_clock,
)

# ISO weekday (1 = Monday … 7 = Sunday) → the working span of that day; a day not in it is off.
Week = dict[int, tuple[time, time]]


@dataclass(frozen=True)
class StoredSettings:
    """What the user chose; None: the default (the token's zone, the deployment's hours,
    everyone's invitations offered)."""

    tz: str | None = None
    email: str | None = None
    language: Language | None = None
    work_hours: WorkHours | None = None
    invitations_from: InvitationsFrom | None = None
    buffer_minutes: int | None = None

    def patched(self, patch: SettingsPatch, fields: Sequence[str]) -> StoredSettings:
        return replace(self, **{name: getattr(patch, name) for name in fields})

    def zone(self, fallback: str) -> str:
        return self.tz or fallback

    def hours(self, deployment: tuple[time, time]) -> WorkHours:
        return self.work_hours if self.work_hours is not None else default_work_hours(deployment)

    def invitations(self) -> InvitationsFrom:
        return self.invitations_from or DEFAULT_INVITATIONS_FROM

    def week(self, deployment: tuple[time, time]) -> Week:
        return week_of(self.hours(deployment))

    def buffer(self) -> timedelta:
        """The free time kept around each busy span when suggesting (contract §20): none unless set."""
        return timedelta(minutes=self.buffer_minutes or 0)

    def view(self, fallback_tz: str, deployment: tuple[time, time]) -> SettingsOut:
        return SettingsOut(
            tz=self.zone(fallback_tz),
            email=self.email,
            language=self.language,
            work_hours=self.hours(deployment),
            invitations_from=self.invitations(),
            buffer_minutes=self.buffer_minutes or 0,
            tz_saved=self.tz is not None,
        )


def week_of(hours: WorkHours) -> Week:
    return {
        WEEKDAY_KEYS.index(day) + 1: (parse_clock(span[0]), parse_clock(span[1]))
        for day, span in hours.items()
    }
