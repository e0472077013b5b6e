"""The pending command's rules as pure code: no store, no clock but the one passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from calagent.commands.domain.pending import Consent, IllegalTransitionError, PendingCommand
from calagent.contracts.commands import StubSlots

pytestmark = pytest.mark.unit

NOW = datetime(2026, 9, 24, 8, 0, tzinfo=UTC)
TTL = timedelta(minutes=30)


def opened(title: str = "Dentist", status: str = "needs_time") -> PendingCommand:
    return PendingCommand.open(
        stub_id="s1",
        user_id="u1",
        title=title,
        slots=StubSlots(date="D+1"),
        status=status,  # type: ignore[arg-type]
        now=NOW,
        ttl=TTL,
        turn_id="t1",
    )


def test_a_new_stub_lives_ttl_from_its_making() -> None:
    stub = opened().stub
    assert (stub.status, stub.expires_at, stub.created_by_turn) == ("needs_time", NOW + TTL, "t1")


def test_a_new_stub_cannot_start_ended() -> None:
    with pytest.raises(IllegalTransitionError):
        opened(status="cancelled")


def test_a_hold_says_why_and_asks_for_the_users_word() -> None:
    held = PendingCommand.hold(
        stub_id="s2",
        user_id="u1",
        title="Moved by sync",
        reason="sync_conflict",
        now=NOW,
        ttl=TTL,
        turn_id=None,
        kind="change",
        fields={"proposed_start": NOW},
    ).stub
    assert (held.status, held.hold_reason, held.kind, held.proposed_start) == (
        "held",
        "sync_conflict",
        "change",
        NOW,
    )


def test_continued_only_by_the_same_title_or_its_own_id() -> None:
    pending = opened("Dentist")
    assert pending.continued_by("  dentist! ", None)
    assert pending.continued_by("Lunch", "s1")
    assert not pending.continued_by("Lunch", None)
    assert not pending.continued_by("Lunch", "other")


def test_a_step_of_an_active_stub_keeps_it_alive() -> None:
    later = NOW + timedelta(minutes=20)
    moved = opened().move("held", later, {"hold_reason": "past_start"})
    assert (moved.status, moved.updated_at, moved.expires_at, moved.hold_reason) == (
        "held",
        later,
        later + TTL,
        "past_start",
    )


def test_an_ended_stub_keeps_the_moment_it_ended() -> None:
    later = NOW + timedelta(minutes=20)
    for ended in (opened().supersede(later), opened().cancel(later), opened().expire(later)):
        assert ended.expires_at == NOW + TTL
        assert ended.updated_at == later
    assert [s.status for s in (opened().supersede(NOW), opened().cancel(NOW), opened().expire(NOW))] == [
        "superseded",
        "cancelled",
        "expired",
    ]


def test_an_ended_stub_takes_no_further_step() -> None:
    done = PendingCommand(opened().cancel(NOW), TTL)
    for step in (done.supersede, done.cancel, done.expire):
        with pytest.raises(IllegalTransitionError):
            step(NOW)


def test_expired_only_once_its_time_has_passed_and_while_active() -> None:
    pending = opened()
    assert not pending.expired(NOW + TTL)
    assert pending.expired(NOW + TTL + timedelta(seconds=1))
    assert not PendingCommand(pending.cancel(NOW), TTL).expired(NOW + 2 * TTL)


def test_only_a_confirmation_of_a_held_stub_lifts_its_hold() -> None:
    held = PendingCommand(opened().move("held", NOW), TTL)
    assert held.consent_of_reply(confirm=True) == Consent(confirmed=True, override_conflict=False)
    assert not held.consent_of_reply(confirm=False).confirmed
    assert not opened().consent_of_reply(confirm=True).confirmed


def test_accepting_a_conflict_offer_overrides_only_that_conflict() -> None:
    conflict = PendingCommand(opened().move("conflict", NOW), TTL)
    assert conflict.consent_of_reply(confirm=True) == Consent(confirmed=False, override_conflict=True)
    assert not conflict.consent_of_reply(confirm=False).override_conflict
    assert not opened().consent_of_reply(confirm=True).override_conflict


def test_a_continuing_create_never_confirms_and_overrides_only_with_both_halves() -> None:
    confirmed = PendingCommand(opened().move("needs_time", NOW, {"confirmed": True}), TTL)
    assert confirmed.consent_of_create(None, None).confirmed
    assert not confirmed.consent_of_create(None, "third_party_content").confirmed
    assert not opened().consent_of_create(None, None).confirmed
    conflict = PendingCommand(opened().move("conflict", NOW), TTL)
    assert conflict.consent_of_create(True, None).override_conflict
    assert not conflict.consent_of_create(None, None).override_conflict
    assert not opened().consent_of_create(True, None).override_conflict
