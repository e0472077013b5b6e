"""The application layer over in-memory fakes: every status, transition and override rule."""

from __future__ import annotations

import itertools
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import pytest

from calagent.commands.domain.model import Event
from calagent.commands.domain.payloads import KINDS
from calagent.commands.domain.people import Contact
from calagent.commands.domain.settings import StoredSettings
from calagent.contracts.commands import (
    AnyCommand,
    CancelStub,
    MergeStub,
    PrepareChange,
    PrepareOrCreate,
    ProposePlan,
    StubKind,
)
from calagent.contracts.envelope import Envelope
from calagent.contracts.people import Attendee
from calagent.contracts.queries import (
    AnyQuery,
    ExportIcs,
    FeedCalendar,
    GetActiveStub,
    ListCalendars,
    QueryRange,
    SuggestFree,
    TurnContext,
)
from calagent.contracts.suggestions import SlotAttendee
from calagent.contracts.time import ParsedReply, ParseReplyRequest, SlotPatch
from calagent.contracts.tools import PrepareOrCreateSchedule, UpdateSchedule

pytestmark = pytest.mark.unit

NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")
_keys = itertools.count()


def env(user: str = "alice", at: datetime = NOW, tz: str = "Asia/Shanghai") -> Envelope:
    return Envelope(turn_id="t", user_id=user, conversation_id="c", occurred_at=at, tz=tz)


def key() -> str:
    return f"k{next(_keys)}"


def create(
    user: str = "alice",
    *,
    active: str | None = None,
    patch: SlotPatch | None = None,
    hold: Any = None,
    idem: str | None = None,
    at: datetime = NOW,
    **args: Any,
) -> PrepareOrCreate:
    args.setdefault("title", "会议")
    return PrepareOrCreate(
        envelope=env(user, at),
        idempotency_key=idem or key(),
        args=PrepareOrCreateSchedule(**args),
        active_command_id=active,
        patch=patch,
        hold=hold,
    )


def merge(stub_id: str, user: str = "alice", confirm: bool = False, **patch: Any) -> MergeStub:
    return MergeStub(
        envelope=env(user),
        idempotency_key=key(),
        command_id=stub_id,
        patch=SlotPatch(**patch),
        confirm=confirm,
    )


def test_every_command_and_query_of_the_contract_has_its_handler(harness: Any) -> None:
    # A contract type left out of a table would fail only once it is first sent.
    assert set(harness.service.writes.handlers) == set(get_args(AnyCommand))
    # The feed names its user by a secret and has no envelope: the service serves it apart. A
    # query that writes is served by its own room, never also by the read-only `Queries`.
    reads, writing = set(harness.service.queries.handlers), set(harness.service.writing_queries)
    assert reads | writing == set(get_args(AnyQuery)) - {FeedCalendar}
    assert not reads & writing


async def test_create_writes_and_returns_the_event_in_the_users_zone(harness: Any) -> None:
    result = await harness.service.execute(create(date="D+1", time="15:00"))
    assert (result.status, result.persisted) == ("created", True)
    assert result.event.start.isoformat() == "2026-09-25T15:00:00+08:00"
    assert result.event.end.isoformat() == "2026-09-25T16:00:00+08:00"
    assert (result.event.weekday, result.event.tz, result.event.calendar) == (5, "Asia/Shanghai", "工作")
    assert result.calendar_fallback is None
    assert len(harness.events()) == 1


async def test_weekend_needs_a_date_then_a_short_reply_creates(harness: Any) -> None:
    first = await harness.service.execute(create(title="修汽车轮毂", date="WE"))
    assert first.status == "needs_date"
    assert [d.isoformat() for d in first.stub.candidates] == ["2026-09-26", "2026-09-27"]
    done = await harness.service.execute(merge(first.stub.id, weekday=7, time="14:00"))
    assert done.status == "created"
    assert done.event.title == "修汽车轮毂"
    assert done.event.start.isoformat() == "2026-09-27T14:00:00+08:00"
    assert done.stub.status == "created"
    assert harness.stubs() == {first.stub.id: "created"}


async def test_needs_time_then_model_clarification_with_patch_over_model(harness: Any) -> None:
    first = await harness.service.execute(create(date="D+1"))
    assert first.status == "needs_time"
    assert first.stub.slots.date == "2026-09-25"  # pinned
    done = await harness.service.execute(
        create(active=first.stub.id, date="D+1", time="09:00", patch=SlotPatch(time="14:00"))
    )
    assert done.status == "created"
    assert done.event.start.isoformat() == "2026-09-25T14:00:00+08:00"


async def test_resolver_error_writes_nothing(harness: Any) -> None:
    result = await harness.service.execute(create(date="2026-02-30", time="10:00"))
    assert result.status == "error"
    assert result.error.code == "invalid_symbol"
    assert harness.events() == []
    assert harness.stubs() == {}
    assert harness.state.keys == {}


async def test_allow_conflict_needs_the_conflict_stub_and_the_flag(harness: Any) -> None:
    await harness.service.execute(create(title="休假", date="2026-09-29", all_day=True))
    first = await harness.service.execute(
        create(title="体育公园", date="2026-09-29", time="10:00", allow_conflict=True)
    )
    assert first.status == "conflict"  # the first round ignores allow_conflict
    assert [e.title for e in first.stub.conflicts_with] == ["休假"]
    again = await harness.service.execute(
        create(active=first.stub.id, title="体育公园", date="2026-09-29", time="10:00")
    )
    assert again.status == "conflict"  # no flag from the model
    done = await harness.service.execute(
        create(active=first.stub.id, title="体育公园", date="2026-09-29", time="10:00", allow_conflict=True)
    )
    assert (done.status, done.persisted) == ("created", True)
    assert len(harness.events()) == 2


async def test_a_new_time_in_the_override_reply_is_checked_again(harness: Any) -> None:
    await harness.service.execute(create(title="A", date="D+1", time="10:00", duration_minutes=120))
    first = await harness.service.execute(create(title="B", date="D+1", time="10:00"))
    moved = await harness.service.execute(
        create(active=first.stub.id, title="B", date="D+1", time="11:00", allow_conflict=True)
    )
    assert moved.status == "conflict"
    free = await harness.service.execute(merge(first.stub.id, time="12:00"))
    assert free.status == "created"  # touching 10:00–12:00 does not conflict


async def test_past_start_is_held_until_confirmed(harness: Any) -> None:
    held = await harness.service.execute(create(title="开会", date="D-1", time="15:00"))
    assert (held.status, held.stub.hold_reason) == ("held", "past_start")
    assert harness.events() == []
    unconfirmed = await harness.service.execute(merge(held.stub.id))
    assert unconfirmed.status == "held"
    done = await harness.service.execute(merge(held.stub.id, confirm=True))
    assert done.status == "created"
    assert done.event.start.isoformat() == "2026-09-23T15:00:00+08:00"


async def test_third_party_hold_survives_clarification_until_confirmed(harness: Any) -> None:
    first = await harness.service.execute(create(date="WE", hold="third_party_content"))
    assert first.status == "needs_date"
    picked = await harness.service.execute(merge(first.stub.id, weekday=6, time="10:00"))
    assert (picked.status, picked.stub.hold_reason) == ("held", "third_party_content")
    done = await harness.service.execute(merge(first.stub.id, confirm=True))
    assert done.status == "created"


async def test_a_third_party_request_keeps_the_users_pending_stub_instead_of_superseding_it(
    harness: Any,
) -> None:
    own = await harness.service.execute(create(title="修车", date="WE"))
    assert own.status == "needs_date"
    forwarded = await harness.service.execute(
        create(active=own.stub.id, title="开会", date="D+1", time="15:00", hold="third_party_content")
    )
    assert forwarded.status == "held"
    assert forwarded.stub is None and forwarded.superseded is None
    assert forwarded.kept is not None and forwarded.kept.id == own.stub.id
    assert harness.stubs() == {own.stub.id: "needs_date"}
    assert harness.events() == []
    # The user's own new request still supersedes it, as always.
    mine = await harness.service.execute(create(active=own.stub.id, title="开会", date="D+1", time="15:00"))
    assert mine.status == "created"
    assert harness.stubs() == {own.stub.id: "superseded"}


async def test_confirmed_hold_still_meets_conflicts(harness: Any) -> None:
    await harness.service.execute(create(title="A", date="D+1", time="10:00"))
    held = await harness.service.execute(
        create(title="B", date="D+1", time="10:00", hold="third_party_content")
    )
    assert held.status == "held"
    confirmed = await harness.service.execute(merge(held.stub.id, confirm=True))
    assert confirmed.status == "conflict"
    done = await harness.service.execute(
        create(active=held.stub.id, title="B", date="D+1", time="10:00", allow_conflict=True)
    )
    assert done.status == "created"


async def test_expired_stub_is_never_merged(harness: Any) -> None:
    first = await harness.service.execute(create(date="WE"))
    harness.clock.advance(timedelta(minutes=31))
    late = await harness.service.execute(merge(first.stub.id, weekday=7, time="14:00"))
    assert late.status == "expired"
    assert harness.stubs() == {first.stub.id: "expired"}
    assert harness.events() == []
    assert (await harness.service.query(GetActiveStub(envelope=env()))).stub is None


async def test_cancel_and_supersede(harness: Any) -> None:
    nothing = await harness.service.execute(CancelStub(envelope=env(), idempotency_key=key()))
    assert nothing.error.code == "no_active_command"
    first = await harness.service.execute(create(date="WE"))
    second = await harness.service.execute(create(date="D+2"))
    # Not an answer to the first (no active_command_id): the first ends superseded, and says so.
    assert harness.stubs() == {first.stub.id: "superseded", second.stub.id: "needs_time"}
    assert second.superseded is not None and second.superseded.id == first.stub.id
    active = await harness.service.query(GetActiveStub(envelope=env()))
    assert active.stub.id == second.stub.id
    cancelled = await harness.service.execute(CancelStub(envelope=env(), idempotency_key=key()))
    assert cancelled.status == "cancelled"
    assert harness.stubs()[second.stub.id] == "cancelled"


async def test_idempotent_replay(harness: Any) -> None:
    one = await harness.service.execute(create(date="D+1", time="15:00", idem="same"))
    two = await harness.service.execute(create(date="D+1", time="15:00", idem="same"))
    assert (one.replayed, two.replayed) == (False, True)
    assert two.event == one.event
    assert len(harness.events()) == 1


async def test_calendar_fallback_and_choice(harness: Any) -> None:
    picked = await harness.service.execute(create(date="D+1", time="15:00", calendar="家庭"))
    assert (picked.event.calendar, picked.calendar_fallback) == ("家庭", None)
    fallback = await harness.service.execute(create(date="D+1", time="17:00", calendar="运动"))
    assert fallback.event.calendar == "工作"
    assert fallback.calendar_fallback.model_dump() == {"requested": "运动", "used": "工作"}


async def test_other_users_cannot_touch_a_stub(harness: Any) -> None:
    first = await harness.service.execute(create(date="WE"))
    assert (
        await harness.service.execute(merge(first.stub.id, user="bob", weekday=7, time="14:00"))
    ).status == "error"
    cancel = CancelStub(envelope=env("bob"), idempotency_key=key(), command_id=first.stub.id)
    assert (await harness.service.execute(cancel)).error.code == "no_active_command"
    # Bob naming Alice's stub as his active command is just a first-round request of his own.
    bob = await harness.service.execute(create("bob", active=first.stub.id, date="D+1", time="10:00"))
    assert bob.status == "created"
    assert harness.stubs() == {first.stub.id: "needs_date"}


async def test_queries(harness: Any) -> None:
    await harness.service.execute(create(title="A", date="2026-09-30", time="23:00", duration_minutes=120))
    await harness.service.execute(create(title="B", date="2026-10-02", time="09:00"))
    month = await harness.service.query(QueryRange(envelope=env(), start_symbol="M+0", end_symbol="M+1"))
    assert [e.title for e in month.events] == ["A"]  # crosses into October, starts in September
    assert month.range_start.isoformat() == "2026-09-01T00:00:00+08:00"
    absolute = await harness.service.query(
        QueryRange(
            envelope=env(),
            start_at=datetime.fromisoformat("2026-10-01T00:00:00+08:00"),
            end_at=datetime.fromisoformat("2026-10-03T00:00:00+08:00"),
        )
    )
    assert [e.title for e in absolute.events] == ["A", "B"]
    backwards = await harness.service.query(QueryRange(envelope=env(), start_symbol="M+1", end_symbol="M+0"))
    assert backwards.error.code == "invalid_range"
    too_long = await harness.service.query(QueryRange(envelope=env(), start_symbol="M+0", end_symbol="M+13"))
    assert too_long.error.code == "invalid_range"
    cals = await harness.service.query(ListCalendars(envelope=env()))
    assert cals.calendars == ("工作", "家庭", "个人")
    ics = await harness.service.query(ExportIcs(envelope=env()))
    assert ics.ics is not None
    assert ics.ics.count("BEGIN:VEVENT") == 2


async def test_a_range_is_counted_in_days_of_the_users_clock(harness: Any) -> None:
    # In New York 2026-03-09 is summer time and 2027-03-10 winter time: D..D+366 is 366 days on
    # the clock (what the time service resolves and accepts), 366 days and an hour elapsed.
    ny = env(at=datetime(2026, 3, 9, 16, 0, tzinfo=UTC), tz="America/New_York")
    year = await harness.service.query(QueryRange(envelope=ny, start_symbol="D", end_symbol="D+366"))
    assert year.error is None
    absolute = await harness.service.query(
        QueryRange(
            envelope=ny,
            start_at=datetime.fromisoformat("2026-03-09T00:00:00-04:00"),
            end_at=datetime.fromisoformat("2027-03-10T00:00:00-05:00"),
        )
    )
    assert absolute.error is None
    longer = await harness.service.query(QueryRange(envelope=ny, start_symbol="D", end_symbol="D+367"))
    assert longer.error is not None and longer.error.code == "invalid_range"


async def test_suggest_free(harness: Any) -> None:
    await harness.service.execute(create(title="A", date="D+1", time="09:00", end_time="17:30"))
    result = await harness.service.query(
        SuggestFree(envelope=env(), start_symbol="D", end_symbol="D+3", duration_minutes=60)
    )
    # The 25th is busy beyond 17:30; the 26th is a Saturday, outside the default working week.
    assert [s.start.isoformat() for s in result.free_slots] == ["2026-09-24T10:00:00+08:00"]
    assert [(s.confidence, s.attendees, s.reason) for s in result.free_slots] == [
        (100.0, (SlotAttendee(who="alice", availability="free"),), "all_free")
    ]
    assert result.empty_reason is None


async def test_suggest_free_follows_the_working_week_the_user_saved(harness: Any) -> None:
    await harness.service.execute(create(title="A", date="D+1", time="09:00", end_time="17:30"))
    harness.state.settings["alice"] = StoredSettings(
        work_hours={"thu": ("14:00", "16:00"), "sat": ("10:00", "12:00")}
    )
    result = await harness.service.query(
        SuggestFree(envelope=env(), start_symbol="D", end_symbol="D+3", duration_minutes=60)
    )
    assert [s.start.isoformat() for s in result.free_slots] == [
        "2026-09-24T14:00:00+08:00",
        "2026-09-26T10:00:00+08:00",
    ]


async def suggest_with(harness: Any, *attendees: str) -> Any:
    return await harness.service.query(
        SuggestFree(
            envelope=env(), start_symbol="D+1", end_symbol="D+2", duration_minutes=60, attendees=attendees
        )
    )


async def test_a_suggestion_counts_only_the_people_who_share_and_names_the_rest(harness: Any) -> None:
    # Bob is busy 09:00-12:00 on the 25th; Carol claims Bob's address too; Dan shares but has no address.
    await harness.service.execute(create("bob", title="x", date="D+1", time="09:00", end_time="12:00"))
    harness.state.settings["bob"] = StoredSettings(email="bob@example.org")
    harness.state.settings["carol"] = StoredSettings(email="bob@example.org")
    harness.state.settings["erin"] = StoredSettings(email="erin@example.org")
    harness.state.sharing[("bob", "alice")] = NOW
    harness.state.sharing[("dan", "alice")] = NOW
    harness.state.contacts["alice"] = [Contact(id="c1", name="Erin", email="ERIN@example.org")]

    by_id = await suggest_with(harness, "bob", "dan", "alice", "nobody")
    assert [s.start.isoformat() for s in by_id.free_slots] == ["2026-09-25T12:00:00+08:00"]
    assert (by_id.people.counted, by_id.people.unknown) == (("bob", "dan"), ("nobody",))
    # Each slot says how everyone's time looks then, and how sure it is: (3 × 100 + 49) / 4.
    [slot] = by_id.free_slots
    assert [(a.who, a.availability) for a in slot.attendees] == [
        ("alice", "free"),
        ("bob", "free"),
        ("dan", "free"),
        ("nobody", "unknown"),
    ]
    assert (slot.confidence, slot.reason) == (87.25, "unknown")

    # An address two users claim names neither for certain: counted as free, named unknown.
    by_address = await suggest_with(harness, "bob@example.org")
    assert [s.start.isoformat() for s in by_address.free_slots] == ["2026-09-25T09:00:00+08:00"]
    assert by_address.people.unknown == ("bob@example.org",)

    # A contact whose address is a user's is that user, counted only once they share.
    by_contact = await suggest_with(harness, "Erin")
    assert by_contact.people.unknown == ("Erin",)
    harness.state.sharing[("erin", "alice")] = NOW
    harness.state.settings["erin"] = StoredSettings(
        email="erin@example.org", tz="America/New_York", work_hours={"thu": ("20:00", "22:00")}
    )
    # Thursday 20:00-22:00 in New York is Friday 08:00-10:00 here; alice starts at 09:00.
    shared = await suggest_with(harness, "Erin")
    assert shared.people.counted == ("Erin",)
    assert [s.start.isoformat() for s in shared.free_slots] == ["2026-09-25T09:00:00+08:00"]

    # Working hours that do not meet: no slot, and why.
    harness.state.settings["erin"] = StoredSettings(
        email="erin@example.org", work_hours={"fri": ("19:00", "20:00")}
    )
    apart = await suggest_with(harness, "Erin")
    assert (apart.free_slots, apart.empty_reason) == ((), "outside_hours")
    busy = await suggest_with(harness, "bob")
    assert busy.empty_reason is None
    harness.state.settings["alice"] = StoredSettings(work_hours={"fri": ("09:00", "12:00")})
    assert (await suggest_with(harness, "bob")).empty_reason == "attendees_unavailable"


async def test_invalid_zone_is_an_error(harness: Any) -> None:
    bad = PrepareOrCreate(
        envelope=env(tz="Mars/Olympus"),
        idempotency_key=key(),
        args=PrepareOrCreateSchedule(title="x", date="D+1", time="10:00"),
    )
    result = await harness.service.execute(bad)
    assert result.error.code == "invalid_zone"


# ---- contract §8: continuing or superseding the pending stub ---------------------------------------


async def test_a_create_with_another_title_supersedes_the_stub_and_never_borrows_its_title(
    harness: Any,
) -> None:
    weekend = await harness.service.execute(create(title="修汽车轮毂", date="WE"))
    other = await harness.service.execute(
        create(active=weekend.stub.id, title="和张三开会", date="D+1", time="15:00")
    )
    assert other.status == "created"
    assert other.event.title == "和张三开会"
    assert other.event.start.isoformat() == "2026-09-25T15:00:00+08:00"
    assert other.superseded is not None and other.superseded.id == weekend.stub.id
    assert harness.stubs() == {weekend.stub.id: "superseded"}
    assert [e.title for e in harness.events()] == ["和张三开会"]


async def test_the_same_title_after_normalising_continues_the_stub(harness: Any) -> None:
    weekend = await harness.service.execute(create(title="修汽车轮毂", date="WE"))
    done = await harness.service.execute(
        create(active=weekend.stub.id, title=" 修汽车轮毂。", date="2026-09-27", time="10:00")
    )
    assert done.status == "created"
    assert done.stub is not None and done.stub.id == weekend.stub.id
    assert done.superseded is None


async def test_a_create_naming_the_stub_id_continues_it_under_the_stub_title(harness: Any) -> None:
    weekend = await harness.service.execute(create(title="修汽车轮毂", date="WE"))
    done = await harness.service.execute(
        create(
            active=weekend.stub.id,
            title="轮毂",
            command_id=weekend.stub.id,
            date="2026-09-26",
            time="10:00",
        )
    )
    assert done.status == "created"
    assert done.event.title == "修汽车轮毂"


async def test_a_held_stub_is_never_executed_by_a_create_of_something_else(harness: Any) -> None:
    past = await harness.service.execute(create(title="开会", date="D-1", time="15:00"))
    assert past.status == "held"
    swim = await harness.service.execute(
        create(active=past.stub.id, title="游泳", date="2026-09-26", time="10:00")
    )
    assert swim.status == "created"
    assert [e.title for e in harness.events()] == ["游泳"]
    assert harness.stubs()[past.stub.id] == "superseded"


async def test_a_renewed_create_of_the_held_title_does_not_confirm_it(harness: Any) -> None:
    past = await harness.service.execute(create(title="开会", date="D-1", time="15:00"))
    again = await harness.service.execute(create(active=past.stub.id, title="开会", date="D-1", time="15:00"))
    assert again.status == "held"
    assert harness.events() == []


async def test_confirming_a_conflict_keeps_the_proposed_time(harness: Any) -> None:
    await harness.service.execute(create(title="评审", date="D+1", time="15:00"))
    clash = await harness.service.execute(create(title="和张三开会", date="D+1", time="15:30"))
    assert clash.status == "conflict"
    done = await harness.service.execute(merge(clash.stub.id, confirm=True))
    assert done.status == "created"
    assert done.event.start.isoformat() == "2026-09-25T15:30:00+08:00"
    assert sorted(e.title for e in harness.events()) == ["和张三开会", "评审"]


async def test_a_turn_context_reads_the_reply_only_to_an_active_stub(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time service reads a message only when an active stub waits for it (the fast path's
    merge); a turn with no stub costs it nothing."""
    stub = (await harness.service.execute(create(title="修汽车轮毂", date="WE"))).stub
    asked: list[str] = []
    parse_reply = harness.service.calendars.time.parse_reply

    def reading(request: ParseReplyRequest) -> Coroutine[Any, Any, ParsedReply]:
        asked.append(request.text)
        coroutine: Coroutine[Any, Any, ParsedReply] = parse_reply(request)
        return coroutine

    monkeypatch.setattr(harness.service.calendars.time, "parse_reply", reading)
    context = await harness.service.query(TurnContext(envelope=env(), text="周日下午2点"))
    assert context.stub is not None and context.stub.id == stub.id
    assert context.parsed is not None
    assert asked == ["周日下午2点"]
    # No stub, no reading at all.
    alone = await harness.service.query(TurnContext(envelope=env("bob"), text="明天三点开会"))
    assert (alone.stub, alone.parsed) == (None, None)
    assert asked == ["周日下午2点"]


# ---- one rule for creates and changes (the pending command decides its steps) --------------------


def change(event_id: str, hold: Any = None, **update: Any) -> PrepareChange:
    return PrepareChange(
        envelope=env(),
        idempotency_key=key(),
        action="update",
        event_id=event_id,
        update=UpdateSchedule(event_id=event_id, **update),
        hold=hold,
    )


async def test_an_expired_stub_ends_expired_when_an_offer_takes_its_place(harness: Any) -> None:
    """Every path that finds the user's stub ends a lapsed one `expired`: a plan offered after the
    question lapsed once ended it `superseded` (a request it never met)."""
    first = await harness.service.execute(create(date="WE"))
    harness.clock.advance(timedelta(minutes=31))
    plan = await harness.service.execute(
        ProposePlan(envelope=env(), idempotency_key=key(), trigger="每天早上总结日程", steps=("总结",))
    )
    assert plan.status == "planned" and plan.superseded is None
    assert harness.stubs()[first.stub.id] == "expired"


async def test_a_change_to_all_of_yesterday_is_held_as_in_the_past_like_a_create(harness: Any) -> None:
    made = await harness.service.execute(create(title="复盘", date="D+1", time="15:00"))
    moved = await harness.service.execute(change(made.event.id, date="D-1", all_day=True))
    assert (moved.status, moved.stub.hold_reason) == ("held", "past_start")
    created = await harness.service.execute(create(title="复盘2", date="D-1", all_day=True))
    assert (created.status, created.stub.hold_reason) == ("held", "past_start")


async def test_a_change_from_someone_elses_words_onto_a_busy_slot_says_whose_words(harness: Any) -> None:
    """Held beats conflict and the strongest reason is told, for a change as for a create: the
    conflict once won and the third-party reason was dropped."""
    busy = await harness.service.execute(create(title="面试", date="D+1", time="10:00"))
    other = await harness.service.execute(create(title="复盘", date="D+1", time="15:00"))
    moved = await harness.service.execute(change(other.event.id, hold="third_party_content", time="10:00"))
    assert (moved.status, moved.stub.hold_reason) == ("held", "third_party_content")
    assert [e.id for e in moved.stub.conflicts_with] == [busy.event.id]


async def test_a_change_from_someone_elses_words_keeps_the_users_pending_request(harness: Any) -> None:
    made = await harness.service.execute(create(title="复盘", date="D+1", time="15:00"))
    mine = await harness.service.execute(create(title="面试", date="WE"))
    moved = await harness.service.execute(change(made.event.id, hold="third_party_content", time="10:00"))
    assert moved.status == "held" and moved.kept is not None and moved.kept.id == mine.stub.id
    assert harness.stubs()[mine.stub.id] == "needs_date"
    assert len(harness.stubs()) == 1


def test_every_kind_of_stub_has_one_row_of_rules_and_one_of_answers(harness: Any) -> None:
    # Adding a kind is a row in each table (plus its payload and tests): a kind missing from either
    # would be stored or answered by no rule.
    kinds = set(get_args(StubKind))
    assert set(KINDS) == kinds
    assert set(harness.service.writes.kinds) == kinds


# ---- whose words an event is: the organizer said to be the user or not (contract §19) -------------


def organized_event(event_id: str, organizer: str | None, hour: int) -> Event:
    start = NOW.replace(hour=hour) + timedelta(days=1)
    return Event(
        id=event_id,
        user_id="alice",
        title=f"meeting {event_id}",
        start=start,
        end=start + timedelta(hours=1),
        calendar="工作",
        organizer=organizer,
        attendees=(Attendee(email="bob@example.org"),),
    )


async def test_every_event_a_result_shows_says_whether_the_user_organizes_it(harness: Any) -> None:
    harness.state.settings["alice"] = StoredSettings(email="Alice@Example.org")
    harness.state.mailboxes["alice"] = "s3cret@mail.test"
    for event in (
        organized_event("e1", "mailto:alice@example.org", 9),
        organized_event("e2", "s3cret@mail.test", 11),
        organized_event("e3", "mallory@example.net", 13),
        organized_event("e4", None, 15),
    ):
        harness.state.events[event.id] = (event, None)

    found = await harness.service.query(QueryRange(envelope=env(), start_symbol="D+1", end_symbol="D+2"))
    assert [(e.id, e.organized_by_user) for e in found.events] == [
        ("e1", True),
        ("e2", True),
        ("e3", False),
        ("e4", False),
    ]
    # A command's answer too, however deep the event sits in it: a held change shows its event.
    held = await harness.service.execute(
        PrepareChange(
            envelope=env(), idempotency_key=key(), action="delete", event_id="e1", scope="this", update=None
        )
    )
    assert held.stub is not None and held.stub.change is not None
    assert held.stub.change.before.organized_by_user
