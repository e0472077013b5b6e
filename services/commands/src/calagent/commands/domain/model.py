"""What the command service keeps: events and command stubs, as plain values."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime

from calagent.contracts.commands import ACTIVE_STUB_STATUSES, HoldReason, StubSlots, StubStatus


@dataclass(frozen=True)
class Event:
    id: str
    user_id: str
    title: str
    start: datetime
    end: datetime
    calendar: str
    all_day: bool = False
    completed: bool = False


@dataclass(frozen=True)
class Stub:
    id: str
    user_id: str
    title: str
    slots: StubSlots
    status: StubStatus
    expires_at: datetime
    created_at: datetime
    updated_at: datetime
    candidates: tuple[date, ...] = ()
    conflict_event_ids: tuple[str, ...] = ()
    hold_reason: HoldReason | None = None
    # A hold asked for by the caller (third-party content) sticks to the stub across clarifications
    # until the user confirms; `hold_reason` only says why the stub is `held` right now.
    requested_hold: HoldReason | None = None
    # The user confirmed a held write: the hold is lifted for good, later checks skip it.
    confirmed: bool = False
    proposed_start: datetime | None = None
    proposed_end: datetime | None = None
    created_by_turn: str | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STUB_STATUSES

    def expired_at(self, now: datetime) -> bool:
        return self.expires_at < now

    def evolve(self, **changes: object) -> Stub:
        return replace(self, **changes)  # type: ignore[arg-type]
