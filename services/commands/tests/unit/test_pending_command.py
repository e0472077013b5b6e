"""The pending command's rules as pure code: no store, no clock but the one passed in."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import permutations
from typing import get_args
from zoneinfo import ZoneInfo

import pytest

from calagent.commands.domain.model import Event
from calagent.commands.domain.pending import (
    HOLD_PRECEDENCE,
    Ask,
    Consent,
    IllegalTransitionError,
    PendingCommand,
    decide,
    is_past,
    lapsed,
    strongest,
)
from calagent.commands.domain.proposals import Proposal
from calagent.commands.domain.timeutil import local_day_span
from calagent.contracts.commands import HoldReason, StubSlots

pytestmark = pytest.mark.unit

NOW = datetime(2026, 9, 24, 8, 0, tzinfo=UTC)
TTL = timedelta(minutes=30)
SH = ZoneInfo("Asia/Shanghai")


def opened(title: str = "Dentist", status: str = "needs_time", **ask: object) -> PendingCommand:
    return PendingCommand.open(
        stub_id="s1",
        user_id="u1",
        status=status,  # type: ignore[arg-type]
        ask=Ask(title=title, slots=StubSlots(date="D+1"), **ask),  # type: ignore[arg-type]
        now=NOW,
        ttl=TTL,
        turn_id="t1",
    )


def at(day: int, hour: int) -> datetime:
    return datetime(2026, 9, day, hour, tzinfo=SH)


def ev(ident: str, start: datetime, end: datetime, series_id: str | None = None) -> Event:
    return Event(ident, "u", ident, start, end, "Work", series_id=series_id)


def test_a_new_stub_lives_ttl_from_its_making() -> None:
    stub = opened().stub
    assert (stub.status, stub.expires_at, stub.created_by_turn) == ("needs_time", NOW + TTL, "t1")


def test_an_offer_mailed_is_answerable_until_its_events_start_offered_at_once_or_after_waiting() -> None:
    # One rule for every caller: a week at most for what mail brings, never past its event's start.
    soon, far = NOW + timedelta(hours=3), NOW + timedelta(days=30)
    assert outside("invitation", "invitation_received", soon).stub.expires_at == soon
    assert outside("booking", "sends_invitations", soon).stub.expires_at == soon
    assert outside("change", "counter_received", soon).stub.expires_at == soon
    assert outside("invitation", "invitation_received", far).stub.expires_at == NOW + timedelta(days=7)
    waited = PendingCommand(outside("invitation", "invitation_received", soon).set_aside(NOW), TTL)
    assert waited.come_back(NOW + timedelta(hours=1)).expires_at == soon
    # An event starting within `ttl` still leaves the user `ttl` to answer; a chat request has `ttl`.
    sooner = NOW + timedelta(minutes=10)
    assert outside("invitation", "invitation_received", sooner).stub.expires_at == NOW + TTL
    assert outside("change", "sync_conflict", soon).stub.expires_at == NOW + TTL
    assert opened(status="held").stub.expires_at == NOW + TTL


def test_a_new_stub_cannot_start_ended() -> None:
    with pytest.raises(IllegalTransitionError):
        opened(status="cancelled")


def test_continued_only_by_the_same_title_or_its_own_id() -> None:
    pending = opened("Dentist")
    assert pending.continued_by("  dentist! ", None)
    assert pending.continued_by("Lunch", "s1")
    assert not pending.continued_by("Lunch", None)
    assert not pending.continued_by("Lunch", "other")


def test_a_step_of_an_active_stub_keeps_it_alive_and_says_only_what_it_asks_now() -> None:
    later = NOW + timedelta(minutes=20)
    first = opened(candidates=(date(2026, 9, 25),))
    moved = first.ask("held", Ask(title="Dentist", hold_reason="past_start"), later)
    assert (moved.status, moved.updated_at, moved.expires_at, moved.hold_reason) == (
        "held",
        later,
        later + TTL,
        "past_start",
    )
    assert moved.candidates == ()  # an answer earlier asked for is not carried into a new question


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


def test_a_run_stub_records_the_time_it_ran_at_and_drops_its_question() -> None:
    held = PendingCommand(
        opened(status="held", hold_reason="past_start", conflict_event_ids=("x",)).stub, TTL
    )
    ran = held.finish("created", NOW, Proposal(at(25, 9), at(25, 10), False))
    assert (ran.status, ran.proposed_start, ran.hold_reason, ran.conflict_event_ids) == (
        "created",
        at(25, 9),
        None,
        (),
    )


def test_an_ended_stub_takes_no_further_step() -> None:
    done = PendingCommand(opened().cancel(NOW), TTL)
    for step in (done.supersede, done.cancel, done.expire):
        with pytest.raises(IllegalTransitionError):
            step(NOW)
    with pytest.raises(IllegalTransitionError):
        done.finish("created", NOW)
    with pytest.raises(IllegalTransitionError):
        done.ask("held", Ask(title="x"), NOW)


def test_expired_only_once_its_time_has_passed_and_while_active() -> None:
    pending = opened()
    assert not pending.expired(NOW + TTL)
    assert pending.expired(NOW + TTL + timedelta(seconds=1))
    assert not PendingCommand(pending.cancel(NOW), TTL).expired(NOW + 2 * TTL)
    assert lapsed(pending.stub, NOW + TTL + timedelta(seconds=1)) == pending.expired(
        NOW + TTL + timedelta(seconds=1)
    )


def test_someone_elses_words_never_end_the_users_own_request() -> None:
    assert not opened().gives_way_to("third_party_content")
    for own in (None, "past_start", "recurrence_plan"):
        assert opened().gives_way_to(own)


def test_a_request_someone_elses_words_asked_for_gives_way_and_waits_within_its_own_turn() -> None:
    theirs = opened("Pay Mallory", "held", requested_hold="third_party_content")
    # Not the user's own request: any new request takes its place, one held for someone else's
    # words too (the user's own move, asked for after the same text reached the model) ...
    for hold in (None, "third_party_content"):
        assert theirs.gives_way_to(hold)
    # ... and in the turn that asked for both, neither ends the other: it waits for the user's
    # answer, for no longer than any request does. A later turn ends it.
    assert theirs.steps_aside_for("t1")
    assert not theirs.steps_aside_for("t2")
    assert not opened().steps_aside_for("t1")
    aside = theirs.set_aside(NOW)
    assert aside.waiting_since == NOW
    assert aside.expires_at == theirs.stub.expires_at


def outside(kind: str, hold: str, start: datetime) -> PendingCommand:
    return PendingCommand.open(
        stub_id="s2",
        user_id="u1",
        status="held",
        ask=Ask(title="Review", hold_reason=hold, proposed_start=start, proposed_end=start + TTL),  # type: ignore[arg-type]
        now=NOW,
        ttl=TTL,
        turn_id=None,
        kind=kind,  # type: ignore[arg-type]
    )


def test_only_offers_from_outside_wait_beside_the_conversation() -> None:
    later = NOW + timedelta(days=2)
    assert outside("invitation", "invitation_received", later).waits_beside()
    assert outside("change", "sync_conflict", later).waits_beside()
    assert not outside("change", "change_confirmation", later).waits_beside()
    assert not opened().waits_beside()


def test_a_waiting_offer_waits_until_its_event_starts_and_comes_back_asked_anew() -> None:
    starts = NOW + timedelta(days=2)
    aside = PendingCommand(outside("change", "sync_conflict", starts).set_aside(NOW), TTL)
    assert (aside.stub.waiting_since, aside.stub.expires_at, aside.stub.status) == (NOW, starts, "held")
    assert not aside.expired(starts - timedelta(seconds=1)) and aside.expired(starts + timedelta(seconds=1))
    back = aside.come_back(NOW + timedelta(hours=1))
    assert back.waiting_since is None and back.expires_at == NOW + timedelta(hours=1) + TTL
    # An invitation keeps the week mail gets, but never past its event's start.
    soon = NOW + timedelta(hours=3)
    invitation = PendingCommand(outside("invitation", "invitation_received", soon).set_aside(NOW), TTL)
    assert invitation.come_back(NOW + timedelta(hours=1)).expires_at == soon


def test_only_a_confirmation_of_a_held_stub_lifts_its_hold() -> None:
    held = PendingCommand(opened(status="held").stub, TTL)
    assert held.consent_of_reply(confirm=True) == Consent(confirmed=True, override_conflict=False)
    assert not held.consent_of_reply(confirm=False).confirmed
    assert not opened().consent_of_reply(confirm=True).confirmed


def test_accepting_a_conflict_offer_overrides_only_that_conflict() -> None:
    conflict = PendingCommand(opened(status="conflict").stub, TTL)
    assert conflict.consent_of_reply(confirm=True) == Consent(confirmed=False, override_conflict=True)
    assert not conflict.consent_of_reply(confirm=False).override_conflict
    assert not opened().consent_of_reply(confirm=True).override_conflict


def test_a_continuing_create_never_confirms_and_overrides_only_with_both_halves() -> None:
    confirmed = PendingCommand(opened(confirmed=True).stub, TTL)
    assert confirmed.consent_of_create(None, None).confirmed
    assert not confirmed.consent_of_create(None, "third_party_content").confirmed
    assert not opened().consent_of_create(None, None).confirmed
    conflict = PendingCommand(opened(status="conflict").stub, TTL)
    assert conflict.consent_of_create(True, None).override_conflict
    assert not conflict.consent_of_create(None, None).override_conflict
    assert not opened().consent_of_create(True, None).override_conflict


# ---- holding: one precedence, "in the past" one rule -----------------------------------------------


def test_every_hold_reason_has_a_place_in_the_precedence() -> None:
    assert sorted(HOLD_PRECEDENCE) == sorted(get_args(HoldReason))


@pytest.mark.parametrize(
    "pair",
    list(permutations(["third_party_content", "sends_invitations", "past_start", "change_confirmation"], 2)),
)
def test_the_strongest_reason_is_told_whatever_order_it_was_found_in(
    pair: tuple[HoldReason, HoldReason],
) -> None:
    expected = min(pair, key=HOLD_PRECEDENCE.index)
    assert strongest(pair) == strongest(reversed(pair)) == expected
    assert strongest((None, *pair, None)) == expected


def test_decide_order_held_then_conflict_then_run() -> None:
    now = at(24, 10)
    future = Proposal(at(25, 15), at(25, 16), False)
    past = Proposal(at(23, 15), at(23, 16), False)
    other = (ev("x", at(25, 15), at(25, 16)),)
    assert decide(future, (), now).outcome == "run"
    assert decide(future, other, now).outcome == "conflict"
    assert decide(future, other, now, override_conflict=True).outcome == "run"
    held = decide(past, other, now)
    assert (held.outcome, held.hold_reason, held.conflicts) == ("held", "past_start", other)
    third = decide(past, (), now, reasons=("third_party_content",))
    assert (third.outcome, third.hold_reason) == ("held", "third_party_content")
    # Confirmation lifts the hold only: conflicts are still checked.
    assert decide(past, other, now, confirmed=True).outcome == "conflict"
    assert decide(past, (), now, confirmed=True).outcome == "run"


def test_a_held_change_keeps_its_reason_and_shows_what_it_meets() -> None:
    """A change onto a busy slot is held (contract §9), its reason kept, the conflicts shown — the
    same precedence as a create's, where a conflict once won and the reason was dropped."""
    other = (ev("x", at(25, 15), at(25, 16)),)
    moved = decide(
        Proposal(at(25, 15), at(25, 16), False),
        other,
        at(24, 10),
        reasons=("third_party_content", None, "change_confirmation"),
    )
    assert (moved.outcome, moved.hold_reason, moved.conflicts) == ("held", "third_party_content", other)


def test_a_delete_is_never_in_the_past() -> None:
    assert decide(None, (), at(24, 10), reasons=("change_confirmation",)).hold_reason == "change_confirmation"


def test_all_day_today_is_not_in_the_past_and_yesterday_is() -> None:
    now = at(24, 10)
    today = Proposal(*local_day_span(date(2026, 9, 24), SH), all_day=True)
    yesterday = Proposal(*local_day_span(date(2026, 9, 23), SH), all_day=True)
    assert decide(today, (), now).outcome == "run"
    assert decide(yesterday, (), now).hold_reason == "past_start"
    # The same rule for a change: moving an event to all of yesterday is moving it into the past.
    moved = decide(yesterday, (), now, reasons=("change_confirmation",))
    assert moved.hold_reason == "past_start"
    assert not is_past(today.start, today.end, True, now)


def test_an_offer_stands_only_on_its_version_and_the_conflicts_it_showed() -> None:
    shown = ev("x", at(25, 15), at(25, 16))
    pending = PendingCommand(opened(status="held", conflict_event_ids=("x",)).stub, TTL)
    assert pending.offer_stands("v1", "v1", (shown,))
    assert not pending.offer_stands("v2", "v1", (shown,))
    assert not pending.offer_stands("v1", "v1", (shown, ev("new", at(25, 15), at(25, 16))))
    # A series' occurrence is shown by its series, never as a single event the offer left out.
    assert pending.offer_stands("v1", "v1", (ev("occ", at(25, 15), at(25, 16), series_id="m"),))
