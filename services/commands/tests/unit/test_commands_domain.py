"""The pure rules: overlap, planning and decisions, the stub state machine, slot merging, free time."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import get_args
from zoneinfo import ZoneInfo

import pytest

from calagent.commands.domain.calendars import pick_calendar
from calagent.commands.domain.freetime import (
    EVERY_DAY,
    Person,
    Suggestions,
    parse_working_hours,
    person_of,
    shows_as,
    suggest,
)
from calagent.commands.domain.model import Event
from calagent.commands.domain.overlap import blocked_span, find_conflicts, overlaps
from calagent.commands.domain.pending import IllegalTransitionError, can_transition, check_transition
from calagent.commands.domain.proposals import Incomplete, Proposal, UnresolvableError, plan
from calagent.commands.domain.slots import UnplacedWeekdayError, merge_slots
from calagent.commands.domain.timeutil import end_from_clock, local_day_span
from calagent.contracts.commands import StubSlots, StubStatus
from calagent.contracts.people import Attendee
from calagent.contracts.time import ResolveResult, SlotPatch

pytestmark = pytest.mark.unit

SH = ZoneInfo("Asia/Shanghai")
NY = ZoneInfo("America/New_York")


def at(day: int, hour: int, minute: int = 0, month: int = 9, tz: ZoneInfo = SH) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=tz)


def ev(
    ident: str, start: datetime, end: datetime, *, all_day: bool = False, completed: bool = False
) -> Event:
    return Event(ident, "u", ident, start, end, "工作", all_day=all_day, completed=completed)


# ---- overlap -------------------------------------------------------------------------------------


def test_overlap_is_half_open_and_touching_ranges_do_not_meet() -> None:
    assert overlaps(at(25, 9), at(25, 10), at(25, 9, 30), at(25, 11))
    assert not overlaps(at(25, 9), at(25, 10), at(25, 10), at(25, 11))
    assert not overlaps(at(25, 10), at(25, 11), at(25, 9), at(25, 10))
    assert overlaps(at(25, 9), at(25, 12), at(25, 10), at(25, 11))  # containment


def test_all_day_event_blocks_the_whole_local_day() -> None:
    holiday = ev("vac", *local_day_span(date(2026, 9, 29), SH), all_day=True)
    assert [e.id for e in find_conflicts(at(29, 23, 30), at(30, 0), False, [holiday], SH)] == ["vac"]
    assert find_conflicts(at(30, 0), at(30, 1), False, [holiday], SH) == []
    assert find_conflicts(at(28, 23), at(29, 0), False, [holiday], SH) == []


def test_all_day_event_stored_in_another_zone_blocks_every_local_day_it_touches() -> None:
    # Made as a New York all-day event: noon to noon in Shanghai, so both Shanghai days are busy.
    ny_day = ev("ny", *local_day_span(date(2026, 9, 29), NY), all_day=True)
    start, end = blocked_span(ny_day.start, ny_day.end, True, SH)
    assert (start, end) == (at(29, 0), at(1, 0, month=10))


def test_new_all_day_entry_meets_timed_events_that_day() -> None:
    meeting = ev("m", at(29, 15), at(29, 16))
    start, end = local_day_span(date(2026, 9, 29), SH)
    assert [e.id for e in find_conflicts(start, end, True, [meeting], SH)] == ["m"]


def test_event_crossing_midnight_conflicts_on_both_days() -> None:
    night = ev("night", at(25, 23), at(26, 1))
    assert find_conflicts(at(26, 0, 30), at(26, 2), False, [night], SH)
    assert find_conflicts(at(25, 22), at(25, 23, 30), False, [night], SH)
    assert not find_conflicts(at(26, 1), at(26, 2), False, [night], SH)


def test_an_event_marked_free_is_no_conflict_as_it_is_no_busy_time() -> None:
    # A task's block while the task could go elsewhere (contract §21), or any event marked free:
    # what suggestions count as free, a conflict check does too (`keeps_time`, one rule).
    block = ev("block", at(25, 9), at(25, 11)).evolve(transparent=True, task_id="t1")
    busy_block = block.evolve(id="busy", transparent=False)
    assert find_conflicts(at(25, 10), at(25, 10, 30), False, [block], SH) == []
    assert [e.id for e in find_conflicts(at(25, 10), at(25, 10, 30), False, [busy_block], SH)] == ["busy"]


def test_completed_events_do_not_conflict_and_results_are_in_start_order() -> None:
    done = ev("done", at(25, 9), at(25, 10), completed=True)
    b = ev("b", at(25, 9, 30), at(25, 11))
    a = ev("a", at(25, 9), at(25, 9, 45))
    assert [e.id for e in find_conflicts(at(25, 9), at(25, 12), False, [done, b, a], SH)] == ["a", "b"]


def test_end_from_clock_crosses_midnight_and_survives_dst() -> None:
    assert end_from_clock(at(25, 23), "01:00", SH) == at(26, 1)
    assert end_from_clock(at(25, 9), "10:30", SH) == at(25, 10, 30)
    # 2026-03-08: New York springs forward at 02:00; a day there is 23 hours long.
    start, end = local_day_span(date(2026, 3, 8), NY)
    assert end - start == timedelta(hours=23)
    assert end_from_clock(at(7, 23, month=3, tz=NY), "01:00", NY) - at(7, 23, month=3, tz=NY) == timedelta(
        hours=2
    )


# ---- plan and decide -----------------------------------------------------------------------------


def test_plan_weekend_needs_a_date() -> None:
    result = plan(ResolveResult(candidates=(date(2026, 9, 27), date(2026, 9, 26))), StubSlots(), SH)
    assert result == Incomplete("needs_date", candidates=(date(2026, 9, 26), date(2026, 9, 27)))


def test_plan_date_without_time_needs_time_and_pins_the_day() -> None:
    result = plan(ResolveResult(date=date(2026, 9, 25)), StubSlots(date="D+1"), SH)
    assert result == Incomplete("needs_time", pinned_date=date(2026, 9, 25))


def test_plan_all_day_is_the_local_day() -> None:
    result = plan(ResolveResult(date=date(2026, 9, 25)), StubSlots(all_day=True), SH)
    assert result == Proposal(at(25, 0), at(26, 0), all_day=True)


@pytest.mark.parametrize(
    ("slots", "end"),
    [
        (StubSlots(end_time="16:30"), at(25, 16, 30)),
        (StubSlots(duration_minutes=90), at(25, 16, 30)),
        (StubSlots(), at(25, 16)),
        (StubSlots(end_time="16:30", duration_minutes=10), at(25, 16, 30)),
    ],
)
def test_plan_end_is_end_time_then_duration_then_an_hour(slots: StubSlots, end: datetime) -> None:
    result = plan(ResolveResult(start=at(25, 15)), slots, SH)
    assert result == Proposal(at(25, 15), end, all_day=False)


def test_plan_with_nothing_resolved_is_refused() -> None:
    with pytest.raises(UnresolvableError):
        plan(ResolveResult(), StubSlots(), SH)


# ---- the state machine ---------------------------------------------------------------------------


def test_transitions() -> None:
    for status in ("needs_date", "needs_time", "conflict", "held", "created"):
        assert can_transition(None, status)
    for target in ("cancelled", "expired"):
        assert not can_transition(None, target)
    every: tuple[StubStatus, ...] = get_args(StubStatus)
    for active in ("needs_date", "needs_time", "conflict", "held"):
        for target in every:
            assert can_transition(active, target)
    for final in ("created", "cancelled", "expired"):
        with pytest.raises(IllegalTransitionError):
            check_transition(final, "created")


# ---- slot merging --------------------------------------------------------------------------------


def test_merge_priority_patch_over_model_over_stub() -> None:
    stub = StubSlots(date="WE", time="09:00", calendar="家庭")
    model = StubSlots(date="WE", time="15:00")
    patch = SlotPatch(time="14:00")
    merged = merge_slots(stub, model, patch)
    assert (merged.date, merged.time, merged.calendar) == ("WE", "14:00", "家庭")


def test_patch_weekday_picks_a_candidate_and_patch_date_beats_it() -> None:
    candidates = (date(2026, 9, 26), date(2026, 9, 27))
    assert merge_slots(StubSlots(date="WE"), None, SlotPatch(weekday=7), candidates).date == "2026-09-27"
    both = SlotPatch(weekday=7, date="D+1")
    assert merge_slots(StubSlots(date="WE"), None, both, candidates).date == "D+1"


@pytest.mark.parametrize("candidates", [(date(2026, 9, 26), date(2026, 9, 27)), ()])
def test_a_weekday_no_candidate_falls_on_is_refused_never_dropped(candidates: tuple[date, ...]) -> None:
    with pytest.raises(UnplacedWeekdayError):
        merge_slots(StubSlots(date="2026-09-25"), None, SlotPatch(weekday=1, time="15:00"), candidates)


def test_moving_the_start_keeps_the_length() -> None:
    merged = merge_slots(StubSlots(date="D+1", time="14:00", end_time="15:30"), None, SlotPatch(time="16:00"))
    assert (merged.time, merged.end_time, merged.duration_minutes) == ("16:00", None, 90)
    explicit = merge_slots(
        StubSlots(date="D+1", time="14:00", end_time="15:30"), None, SlotPatch(time="16:00", end_time="17:00")
    )
    assert (explicit.time, explicit.end_time) == ("16:00", "17:00")


def test_empty_patch_and_model_keep_the_stub() -> None:
    stub = StubSlots(date="2026-09-27", time="14:00")
    assert merge_slots(stub, None, SlotPatch()) == stub
    assert merge_slots(stub, StubSlots(), None) == stub


# ---- calendars -----------------------------------------------------------------------------------


def test_calendar_fallback() -> None:
    names = ("工作", "家庭", "Personal")
    assert pick_calendar(None, names) == ("工作", None)
    assert pick_calendar("家庭", names) == ("家庭", None)
    assert pick_calendar("personal", names) == ("Personal", None)
    assert pick_calendar("运动", names) == ("工作", "运动")


# ---- free time -----------------------------------------------------------------------------------


def alone(
    range_start: datetime,
    range_end: datetime,
    events: list[Event],
    *,
    duration: int,
    now: datetime,
    limit: int,
    hours: tuple[time, time] = (time(9), time(18)),
    buffer: int = 0,
) -> Suggestions:
    """One person in Shanghai who works `hours` every day."""
    me = person_of(events, tz=SH, week=dict.fromkeys(EVERY_DAY, hours), buffer=timedelta(minutes=buffer))
    return suggest(
        [me], range_start, range_end, duration=timedelta(minutes=duration), now=now, tz=SH, limit=limit
    )


def spans(found: Suggestions) -> list[tuple[datetime, datetime]]:
    return [(s.start, s.end) for s in found.slots]


def test_free_slots_respect_working_hours_events_and_now() -> None:
    events = [ev("a", at(25, 9), at(25, 11)), ev("b", at(25, 11, 30), at(25, 17, 30))]
    found = alone(at(25, 0), at(27, 0), events, duration=60, now=at(24, 10), limit=3)
    # 25th: 11:00-11:30 and 17:30-18:00 are too short; the 26th is free from 09:00.
    assert spans(found) == [(at(26, 9), at(26, 10))]
    assert [(s.confidence, s.availability, s.reason) for s in found.slots] == [(100.0, ("free",), "all_free")]


def test_free_slots_never_in_the_past_and_rounded() -> None:
    found = alone(
        at(24, 0), at(25, 0), [ev("a", at(24, 11), at(24, 12))], duration=30, now=at(24, 10, 7), limit=5
    )
    assert spans(found) == [(at(24, 10, 30), at(24, 11)), (at(24, 12), at(24, 12, 30))]


def test_all_day_event_makes_the_day_busy_and_limit_is_honoured() -> None:
    off = ev("off", *local_day_span(date(2026, 9, 25), SH), all_day=True)
    found = alone(at(25, 0), at(30, 0), [off], duration=60, now=at(24, 10), limit=2)
    assert spans(found) == [(at(26, 9), at(26, 10)), (at(27, 9), at(27, 10))]


def test_an_event_marked_free_keeps_no_time_busy_all_day_or_not() -> None:
    holiday = ev("h", *local_day_span(date(2026, 9, 25), SH), all_day=True).evolve(transparent=True)
    focus = ev("f", at(26, 9), at(26, 12)).evolve(transparent=True)
    found = alone(at(25, 0), at(27, 0), [holiday, focus], duration=60, now=at(24, 10), limit=3)
    assert spans(found) == [(at(25, 9), at(25, 10)), (at(26, 9), at(26, 10))]
    # Marked busy (the default), the same two keep both mornings.
    busy = alone(
        at(25, 0),
        at(27, 0),
        [holiday.evolve(transparent=False), focus.evolve(transparent=False)],
        duration=60,
        now=at(24, 10),
        limit=3,
    )
    assert spans(busy) == [(at(26, 12), at(26, 13))]


def test_a_buffer_keeps_free_time_around_each_busy_span() -> None:
    events = [ev("a", at(25, 9), at(25, 10)), ev("b", at(25, 11, 30), at(25, 12))]
    assert spans(alone(at(25, 0), at(26, 0), events, duration=60, now=at(24, 10), limit=1)) == [
        (at(25, 10), at(25, 11))
    ]
    # 15 minutes either side: 10:15-11:15 is free, but no half hour starts a free hour until 12:30.
    buffered = alone(at(25, 0), at(26, 0), events, duration=60, now=at(24, 10), limit=1, buffer=15)
    assert spans(buffered) == [(at(25, 12, 30), at(25, 13, 30))]
    assert spans(alone(at(25, 0), at(26, 0), events, duration=30, now=at(24, 10), limit=1, buffer=15)) == [
        (at(25, 10, 30), at(25, 11))
    ]


def test_tentative_time_may_be_offered_but_ranks_below_free_time() -> None:
    maybe = ev("m", at(25, 9), at(25, 10)).evolve(tentative=True)
    found = alone(
        at(25, 9), at(25, 18), [maybe, ev("b", at(25, 10), at(25, 17))], duration=60, now=at(24, 10), limit=3
    )
    # 17:00 is surer than the earlier 09:00, held by a tentative event.
    assert [(s.start, s.confidence, s.reason) for s in found.slots] == [
        (at(25, 17), 100.0, "all_free"),
        (at(25, 9), 50.0, "tentative"),
    ]
    # Inside one stretch the surest start wins: 09:30 meets the tentative event, 10:00 does not.
    stretch = alone(
        at(25, 9),
        at(25, 12),
        [ev("m", at(25, 9), at(25, 10)).evolve(tentative=True)],
        duration=60,
        now=at(24, 10),
        limit=3,
    )
    assert [(s.start, s.confidence) for s in stretch.slots] == [(at(25, 10), 100.0)]


def test_an_invitation_the_owner_answered_tentatively_is_tentative() -> None:
    answered = ev("i", at(25, 9), at(25, 10)).evolve(
        attendees=(Attendee(email="Me@Example.org", status="TENTATIVE"), Attendee(email="x@example.org"))
    )
    assert shows_as(answered, frozenset({"me@example.org"})) == "tentative"
    assert shows_as(answered, frozenset({"other@example.org"})) == "busy"
    assert shows_as(answered.evolve(transparent=True), frozenset({"me@example.org"})) == "free"
    assert shows_as(answered.evolve(completed=True)) == "free"


def test_confidence_is_the_mean_over_everyone_counted_unknown_at_49() -> None:
    week = dict.fromkeys(EVERY_DAY, (time(9), time(18)))
    me = Person(tz=SH, week=week)
    colleague = Person(tz=SH, week=week, tentative=((at(25, 9), at(25, 18)),))
    found = suggest(
        [me, colleague],
        at(25, 9),
        at(25, 18),
        duration=timedelta(hours=1),
        now=at(24, 10),
        tz=SH,
        limit=3,
        unknown=1,
    )
    [slot] = found.slots
    assert slot.availability == ("free", "tentative", "unknown")
    assert slot.confidence == 66.33  # (100 + 50 + 49) / 3
    assert slot.reason == "tentative"
    # The same calendars and clock give the same answer.
    assert found == suggest(
        [me, colleague],
        at(25, 9),
        at(25, 18),
        duration=timedelta(hours=1),
        now=at(24, 10),
        tz=SH,
        limit=3,
        unknown=1,
    )


def test_with_no_slot_the_first_constraint_that_leaves_none_is_named() -> None:
    week = dict.fromkeys(EVERY_DAY, (time(9), time(18)))
    me = Person(tz=SH, week=week, busy=((at(25, 9), at(25, 12)),))
    them = Person(tz=SH, week=week, busy=((at(25, 12), at(25, 18)),))
    night = Person(tz=SH, week=dict.fromkeys(EVERY_DAY, (time(20), time(22))))

    def why(people: list[Person], start: datetime, end: datetime, duration: int = 60) -> object:
        found = suggest(
            people, start, end, duration=timedelta(minutes=duration), now=at(24, 10), tz=SH, limit=3
        )
        assert found.slots == []
        return found.empty_reason

    assert why([me], at(24, 0), at(24, 9)) == "window_too_short"  # over before now
    assert why([me], at(25, 9), at(25, 9, 45)) == "window_too_short"
    assert why([me, night], at(25, 0), at(26, 0)) == "outside_hours"
    assert why([me], at(25, 17, 30), at(25, 19, 30)) == "outside_hours"  # half an hour of work
    assert why([me, them], at(25, 9), at(25, 12)) == "organizer_unavailable"
    assert why([me, them], at(25, 9), at(25, 18)) == "attendees_unavailable"


def test_an_attendee_busy_on_their_own_is_named_before_the_callers_busy_time() -> None:
    week = dict.fromkeys(EVERY_DAY, (time(9), time(18)))
    me = Person(tz=SH, week=week, busy=((at(25, 9), at(25, 18)),))
    free = Person(tz=SH, week=week)
    away = Person(tz=SH, week=week, busy=((at(25, 0), at(26, 0)),))
    found = suggest(
        [me, free, away],
        at(25, 9),
        at(25, 18),
        duration=timedelta(minutes=60),
        now=at(24, 10),
        tz=SH,
        limit=3,
    )
    # Freeing the caller's day would not help: the reason is the attendee away, by place.
    assert (found.slots, found.empty_reason, found.busy) == ([], "attendees_unavailable", (2,))


def test_working_hours_must_be_well_formed() -> None:
    with pytest.raises(ValueError):
        parse_working_hours("18:00-09:00")
    with pytest.raises(ValueError):
        parse_working_hours("nine to five")
