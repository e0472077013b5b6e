"""Choosing among several events is code's (contract §20), through the command service on real NATS
and PostgreSQL: a change chosen from several events found for the same words asks which, no
confirmation runs it until the user has picked, and a pick prepares it again for that event."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from calagent.commands.domain.payloads import ChangeAfter, HeldChange
from calagent.commands.domain.pending import Ask
from calagent.commands.pending import BackgroundTxn, Pending
from calagent.commands.views import event_out
from calagent.contracts.commands import CancelStub, ChangeOut, CommandResult, MergeStub, PrepareChange
from calagent.contracts.queries import QueryRange
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import Scope, UpdateSchedule

from .conftest import NOW, System, envelope
from .test_changes import created
from .test_commands_bus import create, key, merge

pytestmark = pytest.mark.integration


def change(
    user: str,
    event_id: str,
    candidates: tuple[str, ...] = (),
    *,
    action: Any = "update",
    scope: Scope = "this",
    **update: Any,
) -> PrepareChange:
    return PrepareChange(
        envelope=envelope(user),
        idempotency_key=key(),
        action=action,
        event_id=event_id,
        update=UpdateSchedule(event_id=event_id, **update) if action == "update" else None,
        scope=scope,
        candidates=candidates,
    )


def pick(user: str, stub_id: str, event_id: str) -> MergeStub:
    return MergeStub(
        envelope=envelope(user), idempotency_key=key(), command_id=stub_id, patch=SlotPatch(), pick=event_id
    )


async def starts(system: System, user: str) -> list[tuple[str, str]]:
    found = await system.query(
        QueryRange(envelope=envelope(user), start_at=NOW, end_at=NOW + timedelta(days=40))
    )
    return [(e.title, e.start.strftime("%m-%d %H:%M")) for e in found.events]


async def two_meetings(system: System, user: str) -> tuple[str, str]:
    """Two "和张三开会" tomorrow, at 15:00 and at 17:00."""
    first = await created(system, user, title="和张三开会", date="D+1", time="15:00")
    second = await created(system, user, title="和张三开会", date="D+1", time="17:00")
    assert first.event is not None and second.event is not None
    return first.event.id, second.event.id


def candidate_ids(result: CommandResult) -> list[str]:
    assert result.stub is not None
    return [c.event_id for c in result.stub.event_candidates]


async def test_a_change_found_among_several_asks_which_and_confirming_runs_nothing_until_one_is_picked(
    system: System, user: str
) -> None:
    three, five = await two_meetings(system, user)
    before = await starts(system, user)
    # The model picked the 15:00 one; the find listed both for the same words.
    held = await system.execute(change(user, three, (three, five), date="D+2"))
    assert (held.status, held.stub and held.stub.hold_reason) == ("held", "which_event")
    assert candidate_ids(held) == [three, five]  # the model's pick first
    assert held.stub is not None
    assert [c.start.strftime("%H:%M") for c in held.stub.event_candidates] == ["15:00", "17:00"]
    stub_id = held.stub.id
    # A confirmation of a change still asking which writes nothing and asks again.
    again = await system.execute(merge(user, stub_id, confirm=True))
    assert (again.status, again.persisted) == ("held", False)
    assert again.stub is not None and candidate_ids(again) == [three, five]
    assert await starts(system, user) == before
    # The user names the 17:00 one: the same stub now offers that change, and asks no more.
    picked = await system.execute(pick(user, stub_id, five))
    assert picked.status == "held" and picked.stub is not None
    assert (picked.stub.id, picked.stub.hold_reason, picked.stub.event_candidates) == (
        stub_id,
        "change_confirmation",
        (),
    )
    assert picked.stub.change is not None
    assert picked.stub.change.before.id == five
    assert picked.stub.change.after is not None
    assert picked.stub.change.after.start.strftime("%m-%d %H:%M") == "09-26 17:00"
    assert await starts(system, user) == before
    done = await system.execute(merge(user, stub_id, confirm=True))
    assert (done.status, done.persisted) == ("updated", True)
    assert await starts(system, user) == [("和张三开会", "09-25 15:00"), ("和张三开会", "09-26 17:00")]


async def test_a_pick_names_only_one_of_the_candidates_and_one_candidate_asks_nothing(
    system: System, user: str
) -> None:
    three, five = await two_meetings(system, user)
    other = await created(system, user, title="和李四开会", date="D+1", time="10:00")
    assert other.event is not None
    held = await system.execute(change(user, three, (three, five), action="delete"))
    assert held.stub is not None and held.stub.hold_reason == "which_event"
    refused = await system.execute(pick(user, held.stub.id, other.event.id))
    assert refused.error is not None and refused.error.code == "invalid_arguments"
    cancelled = await system.execute(CancelStub(envelope=envelope(user), idempotency_key=key()))
    assert cancelled.status == "cancelled"
    # One event found: held as every change is, for the user's word alone (contract §9).
    single = await system.execute(change(user, three, (three,), action="delete"))
    assert single.stub is not None
    assert (single.stub.hold_reason, single.stub.event_candidates) == ("change_confirmation", ())
    gone = await system.execute(merge(user, single.stub.id, confirm=True))
    assert gone.status == "deleted"
    assert await starts(system, user) == [("和李四开会", "09-25 10:00"), ("和张三开会", "09-25 17:00")]


async def test_another_users_event_is_never_a_candidate(system: System, user: str) -> None:
    three, five = await two_meetings(system, user)
    theirs = await created(system, f"{user}-b", title="和张三开会", date="D+1", time="16:00")
    assert theirs.event is not None
    held = await system.execute(change(user, three, (three, theirs.event.id, five), date="D+2"))
    assert held.stub is not None and held.stub.hold_reason == "which_event"
    assert candidate_ids(held) == [three, five]
    assert all(c.title == "和张三开会" for c in held.stub.event_candidates)


async def test_a_new_change_of_an_event_still_asked_about_keeps_asking(system: System, user: str) -> None:
    three, five = await two_meetings(system, user)
    first = await system.execute(change(user, three, (three, five), date="D+2"))
    assert first.stub is not None and first.stub.hold_reason == "which_event"
    # The model names one of them again, with no find of its own this time: the choice stays the user's.
    second = await system.execute(change(user, five, date="D+3"))
    assert second.stub is not None and second.stub.hold_reason == "which_event"
    assert candidate_ids(second) == [five, three]
    assert (await system.execute(merge(user, second.stub.id, confirm=True))).status == "held"
    assert await starts(system, user) == [("和张三开会", "09-25 15:00"), ("和张三开会", "09-25 17:00")]
    # The user's own choice of one (a client's call naming just it) asks nothing more.
    third = await system.execute(change(user, three, (three,), date="D+3"))
    assert third.stub is not None
    assert (third.stub.hold_reason, third.stub.event_candidates) == ("change_confirmation", ())


async def test_occurrences_of_one_series_are_one_candidate_for_the_whole_series_and_several_for_one(
    system: System, user: str
) -> None:
    await created(system, user, title="周会", date="D+1", time="09:00", recurrence="FREQ=DAILY;COUNT=3")
    found = await system.query(
        QueryRange(envelope=envelope(user), start_at=NOW, end_at=NOW + timedelta(days=5))
    )
    ids = tuple(e.id for e in found.events)
    assert len(ids) == 3
    whole = await system.execute(change(user, ids[1], ids, action="delete", scope="all"))
    assert whole.stub is not None
    assert (whole.stub.hold_reason, whole.stub.event_candidates) == ("change_confirmation", ())
    one = await system.execute(change(user, ids[1], ids, action="delete", scope="this"))
    assert one.stub is not None and one.stub.hold_reason == "which_event"
    assert candidate_ids(one) == [ids[1], ids[0], ids[2]]


# ---- a held write is checked again at confirmation, under the user's lock (contract §20) ----------


async def at(system: System, user: str, day_time: str) -> list[str]:
    return [title for title, start in await starts(system, user) if start == day_time]


@pytest.mark.parametrize("round_", range(6))
async def test_a_held_create_confirmed_while_another_write_takes_its_time_never_books_it_twice(
    system: System, user: str, round_: int
) -> None:
    """The confirmation and a new request for the same slot, sent at once: whichever the user's
    lock lets in second sees the first, so exactly one event holds the slot."""
    held = await system.execute(
        create(user, title="面试", date="D+1", time="15:00", hold="third_party_content")
    )
    assert held.status == "held" and held.stub is not None
    confirmed, other = await asyncio.gather(
        system.execute(merge(user, held.stub.id, confirm=True)),
        system.execute(create(user, title="体检", date="D+1", time="15:00")),
    )
    assert await at(system, user, "09-25 15:00") in (["面试"], ["体检"]), (confirmed, other)
    outcomes = (confirmed.status, other.status)
    # The confirmation first: the new request meets it. The new request first: it supersedes the
    # held one, whose confirmation then finds nothing to run.
    assert outcomes in (("created", "conflict"), ("error", "created")), outcomes


@pytest.mark.parametrize("round_", range(6))
async def test_a_held_move_confirmed_while_a_create_takes_its_new_time_never_books_it_twice(
    system: System, user: str, round_: int
) -> None:
    moved = await created(system, user, title="和张三开会", date="D+1", time="10:00")
    assert moved.event is not None
    held = await system.execute(change(user, moved.event.id, time="15:00"))
    assert held.status == "held" and held.stub is not None
    await asyncio.gather(
        system.execute(merge(user, held.stub.id, confirm=True)),
        system.execute(create(user, title="体检", date="D+1", time="15:00")),
    )
    assert len(await at(system, user, "09-25 15:00")) == 1


async def test_two_clients_confirming_one_held_create_at_once_book_it_once(system: System, user: str) -> None:
    held = await system.execute(
        create(user, title="面试", date="D+1", time="15:00", hold="third_party_content")
    )
    assert held.stub is not None
    answers = await asyncio.gather(
        *(system.execute(merge(user, held.stub.id, confirm=True)) for _ in range(4))
    )
    assert sorted(a.status for a in answers).count("created") == 1
    assert await at(system, user, "09-25 15:00") == ["面试"]


async def offer_from_sync(system: System, user: str, event_id: str, start: str, end: str) -> str:
    """A sync conflict's offer, as the CalDAV outbox makes it (`caldav.outbox._offer`): the user's
    move of the event, kept aside while the server's version stands; no version, no request."""
    service = system.app.service
    assert service is not None
    store = service.writes.store
    tz = ZoneInfo("Asia/Shanghai")
    async with store.unit_of_work() as uow:
        kept = await uow.events.get_event(user, event_id)
        assert kept is not None
        mine = kept.evolve(start=datetime.fromisoformat(start), end=datetime.fromisoformat(end))
        ask = Ask(
            title=kept.title,
            hold_reason="sync_conflict",
            proposed_start=mine.start,
            proposed_end=mine.end,
            payload=HeldChange(
                view=ChangeOut(
                    action="update", scope="this", before=event_out(kept, tz), after=event_out(mine, tz)
                ),
                action="update",
                scope="this",
                row_id=kept.id,
                master_id=None,
                occurrence_start=None,
                after=ChangeAfter.of(mine, ("time",)),
            ),
        )
        stub = await Pending(timedelta(minutes=30)).from_outside(
            BackgroundTxn(uow, system.clock.now(), user, tz), ask, "change"
        )
        await uow.commit()
    return stub.id


async def test_a_sync_conflicts_offer_confirmed_after_its_time_was_taken_writes_nothing_and_shows_it(
    system: System, user: str
) -> None:
    """Every held write is checked again at confirmation, an offer with no version to bind it (a
    sync conflict's) too: the user said yes to the time as it was shown, not to a double booking."""
    moved = await created(system, user, title="和张三开会", date="D+1", time="10:00")
    assert moved.event is not None
    held = await system.execute(
        create(user, title="面试", date="D+1", time="15:00", hold="third_party_content")
    )
    assert held.stub is not None
    waiting = await offer_from_sync(
        system, user, moved.event.id, "2026-09-25T15:00:00+08:00", "2026-09-25T16:00:00+08:00"
    )
    assert (await system.execute(merge(user, held.stub.id, confirm=True))).status == "created"
    again = await system.execute(merge(user, waiting, confirm=True))
    assert (again.status, again.persisted, again.reoffered) == ("held", False, True)
    assert again.stub is not None and [e.title for e in again.stub.conflicts_with] == ["面试"]
    assert await at(system, user, "09-25 15:00") == ["面试"]
    # Shown the clash, the user's yes now runs it (a clash is the user's to accept).
    done = await system.execute(merge(user, waiting, confirm=True))
    assert (done.status, done.persisted) == ("updated", True)
    assert sorted(await at(system, user, "09-25 15:00")) == ["和张三开会", "面试"]


@pytest.mark.parametrize("round_", range(6))
async def test_two_held_writes_for_one_time_confirmed_at_once_book_it_once(
    system: System, user: str, round_: int
) -> None:
    """The user's held create and an offer waiting beside it for the same time, confirmed at once
    (two clients): the user's lock lets one in first, and the other meets it."""
    moved = await created(system, user, title="和张三开会", date="D+1", time="10:00")
    assert moved.event is not None
    held = await system.execute(
        create(user, title="面试", date="D+1", time="15:00", hold="third_party_content")
    )
    assert held.stub is not None
    waiting = await offer_from_sync(
        system, user, moved.event.id, "2026-09-25T15:00:00+08:00", "2026-09-25T16:00:00+08:00"
    )
    answers = await asyncio.gather(
        system.execute(merge(user, held.stub.id, confirm=True)),
        system.execute(merge(user, waiting, confirm=True)),
    )
    assert len(await at(system, user, "09-25 15:00")) == 1, [a.status for a in answers]
    assert sum(a.persisted for a in answers) == 1
