"""The pending command: the life of a stored stub, as pure rules (contract §8, §9, §15).

    (new) ──> needs_date | needs_time | needs_attendee | conflict | held | created
    an active stub ──> any status (clarified again, run, cancelled, expired, superseded)
    created, updated, deleted, planned, cancelled, expired, superseded: final

A user has at most one active pending command. A new request supersedes it (it never lends its
title or slots to the new one); a create continues it only when facts say it answers it (the same
title, or its id passed back). Each step of an active stub keeps it alive `ttl` from then; an
ended stub keeps the moment it ended.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType

from calagent.commands.domain.model import Stub
from calagent.contracts.commands import ACTIVE_STUB_STATUSES, HoldReason, StubKind, StubSlots, StubStatus


class IllegalTransitionError(ValueError):
    pass


def can_transition(current: StubStatus | None, target: StubStatus) -> bool:
    if current is None:
        return target in ACTIVE_STUB_STATUSES or target == "created"
    return current in ACTIVE_STUB_STATUSES


def check_transition(current: StubStatus | None, target: StubStatus) -> None:
    if not can_transition(current, target):
        raise IllegalTransitionError(f"a stub cannot go from {current} to {target}")


def normalise_title(title: str) -> str:
    """A title as compared for continuation: case, whitespace and punctuation do not count."""
    return "".join(
        ch for ch in title.casefold() if not ch.isspace() and not unicodedata.category(ch).startswith("P")
    )


@dataclass(frozen=True)
class Consent:
    """What the user's word lifts for the next evaluation of a stub: the hold (for good), or the
    conflict check of the time the stub proposes (a new time is a new question)."""

    confirmed: bool
    override_conflict: bool


@dataclass(frozen=True)
class PendingCommand:
    """One stored stub and the rules of its next step; every step returns the stub to store."""

    stub: Stub
    ttl: timedelta

    @classmethod
    def open(
        cls,
        *,
        stub_id: str,
        user_id: str,
        title: str,
        slots: StubSlots,
        status: StubStatus,
        now: datetime,
        ttl: timedelta,
        turn_id: str | None,
        kind: StubKind = "create",
        fields: Mapping[str, object] = MappingProxyType({}),
    ) -> PendingCommand:
        """A new request's stub (the caller supersedes the active one first)."""
        check_transition(None, status)
        stub = Stub(
            id=stub_id,
            user_id=user_id,
            status=status,
            # A stub lives `ttl` from its last change: a user still answering keeps it.
            expires_at=now + ttl,
            created_at=now,
            updated_at=now,
            created_by_turn=turn_id,
            title=title,
            slots=slots,
            kind=kind,
        ).evolve(**fields)
        return cls(stub, ttl)

    @classmethod
    def hold(
        cls,
        *,
        stub_id: str,
        user_id: str,
        title: str,
        reason: HoldReason,
        now: datetime,
        ttl: timedelta,
        turn_id: str | None,
        kind: StubKind,
        fields: Mapping[str, object] = MappingProxyType({}),
    ) -> PendingCommand:
        """A write code will not run without the user's word: a new `held` stub saying why."""
        return cls.open(
            stub_id=stub_id,
            user_id=user_id,
            title=title,
            slots=StubSlots(),
            status="held",
            now=now,
            ttl=ttl,
            turn_id=turn_id,
            kind=kind,
            fields={**fields, "hold_reason": reason},
        )

    def expired(self, now: datetime) -> bool:
        return self.stub.active and self.stub.expired_at(now)

    def continued_by(self, title: str, command_id: str | None) -> bool:
        """Whether a create answers this stub rather than being a new request (contract §8).

        Only facts count: the same title, or the stub's own id passed back. A different title means
        the user moved on; merging it would write the old title at the new time.
        """
        return command_id == self.stub.id or normalise_title(title) == normalise_title(self.stub.title)

    def consent_of_reply(self, confirm: bool) -> Consent:
        """A reply to the stub (`MergeStub`): only an explicit confirmation lifts a hold, and
        accepting a conflict offer keeps the proposed time."""
        return Consent(
            confirmed=self.stub.confirmed or (confirm and self.stub.status == "held"),
            override_conflict=confirm and self.stub.status == "conflict",
        )

    def consent_of_create(self, allow_conflict: bool | None, hold: HoldReason | None) -> Consent:
        """A create that continues the stub never confirms a hold, and a new hold asked for takes
        back an earlier confirmation. The conflict override needs both halves: code's (the stub
        really is in `conflict`) and the model's (the flag)."""
        return Consent(
            confirmed=self.stub.confirmed and hold is None,
            override_conflict=self.stub.status == "conflict" and allow_conflict is True,
        )

    def move(
        self, status: StubStatus, now: datetime, fields: Mapping[str, object] = MappingProxyType({})
    ) -> Stub:
        """The stub at `status`: still active, it lives `ttl` from now; ended, it stays ended."""
        check_transition(self.stub.status, status)
        changes: dict[str, object] = {**fields, "status": status, "updated_at": now}
        if status in ACTIVE_STUB_STATUSES:
            changes["expires_at"] = now + self.ttl
        return self.stub.evolve(**changes)

    def supersede(self, now: datetime) -> Stub:
        return self.move("superseded", now)

    def cancel(self, now: datetime) -> Stub:
        return self.move("cancelled", now)

    def expire(self, now: datetime) -> Stub:
        return self.move("expired", now)
