"""Series edits follow RFC 5545 and receipts are read back (contract §14), through HTTP: every
case is a sequence a user can type, and every assertion is on `GET /v1/events` afterwards — which
occurrences exist, at what time, with what title — and on the receipt naming exactly those rows."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from calagent.cli.stack import Stack
from calagent.contracts.display import format_span
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script

pytestmark = pytest.mark.e2e

TZ = "Asia/Shanghai"
TODAY = date(2026, 9, 24)  # the stack's frozen now, a Thursday


async def events(stack: Stack, user: str) -> list[dict[str, Any]]:
    return await read_events(stack, user, "2026-09-01T00:00:00+08:00", "2027-03-01T00:00:00+08:00")


def when(event: dict[str, Any]) -> str:
    """The span as a receipt shows it, from a row of `GET /v1/events`."""
    start, end = datetime.fromisoformat(event["start"]), datetime.fromisoformat(event["end"])
    # Receipts show times in the reader's own zone and so name none (contract §18).
    return format_span(
        start.astimezone(ZoneInfo(TZ)), end.astimezone(ZoneInfo(TZ)), None, "zh", event["all_day"], TODAY
    )


def local(found: list[dict[str, Any]]) -> list[str]:
    return [e["start"][:16] for e in found]


def on(found: list[dict[str, Any]], day: str) -> list[dict[str, Any]]:
    return [e for e in found if e["start"].startswith(day)]


async def create_series(stack: Stack, scripted: ScriptedModelServer, user: str, **arguments: Any) -> str:
    arguments.setdefault("title", "组会")
    scripted.set_script(script(on_user("重复", tool_calls=[call("prepare_or_create_schedule", **arguments)])))
    assert (await stack.chat(user, "重复的日程")).json()["outcome"] == "held"
    done = (await stack.chat(user, "确认")).json()
    assert done["outcome"] == "created", done
    found = await events(stack, user)
    # The create receipt names the first occurrence as the rows have it.
    assert when(found[0]) in done["reply"], done["reply"]
    reply: str = done["reply"]
    return reply


async def change(
    stack: Stack, scripted: ScriptedModelServer, user: str, name: str, **arguments: Any
) -> dict[str, Any]:
    scripted.set_script(script(on_user("改一下", tool_calls=[call(name, **arguments)])))
    held = (await stack.chat(user, "改一下")).json()
    assert held["outcome"] in ("held", "conflict"), held
    done: dict[str, Any] = (await stack.chat(user, "确认")).json()
    assert done["model_calls"] == 0, done
    return done


def assert_receipt(done: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    """The update receipt says before → after, where after is the row the calendar now has."""
    assert done["outcome"] == "updated", done
    assert f"{when(before)} → {when(after)}" in done["reply"], (done["reply"], when(before), when(after))


# ---- 2: a change of weekday rewrites the rule --------------------------------------------------------


async def test_all_to_another_weekday_moves_every_occurrence_and_the_receipt_says_what_the_calendar_has(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await create_series(
        stack, scripted, user, date="2026-09-30", time="14:00", recurrence="FREQ=WEEKLY;BYDAY=WE"
    )
    found = await events(stack, user)
    [oct7] = on(found, "2026-10-07")
    done = await change(
        stack, scripted, user, "update_schedule", event_id=oct7["id"], date="2026-10-08", scope="all"
    )
    found = await events(stack, user)
    assert local(found)[:4] == [
        "2026-10-01T14:00",
        "2026-10-08T14:00",
        "2026-10-15T14:00",
        "2026-10-22T14:00",
    ]
    assert {datetime.fromisoformat(e["start"]).isoweekday() for e in found} == {4}
    assert found[0]["recurrence"] == "FREQ=WEEKLY;BYDAY=TH"
    [oct8] = on(found, "2026-10-08")
    assert_receipt(done, oct7, oct8)


async def test_following_to_another_weekday_keeps_the_earlier_ones_and_moves_the_rest(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await create_series(
        stack, scripted, user, date="2026-09-30", time="14:00", recurrence="FREQ=WEEKLY;BYDAY=WE"
    )
    [oct14] = on(await events(stack, user), "2026-10-14")
    done = await change(
        stack, scripted, user, "update_schedule", event_id=oct14["id"], date="2026-10-15", scope="following"
    )
    found = await events(stack, user)
    assert local(found)[:5] == [
        "2026-09-30T14:00",
        "2026-10-07T14:00",
        "2026-10-15T14:00",
        "2026-10-22T14:00",
        "2026-10-29T14:00",
    ]
    [oct15] = on(found, "2026-10-15")
    assert_receipt(done, oct14, oct15)


# ---- 3, 4: exclusions and moved occurrences survive series edits ------------------------------------


async def tuesdays(stack: Stack, scripted: ScriptedModelServer, user: str) -> None:
    await create_series(
        stack, scripted, user, date="2026-09-29", time="09:00", recurrence="FREQ=WEEKLY;BYDAY=TU"
    )


async def test_all_keeps_a_deleted_occurrence_deleted_and_a_moved_one_single_at_its_own_time(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await tuesdays(stack, scripted, user)
    found = await events(stack, user)
    await change(
        stack, scripted, user, "delete_schedule", event_id=on(found, "2026-10-13")[0]["id"], scope="this"
    )
    await change(
        stack,
        scripted,
        user,
        "update_schedule",
        event_id=on(found, "2026-10-20")[0]["id"],
        time="15:00",
        scope="this",
    )
    sep29 = on(await events(stack, user), "2026-09-29")[0]
    done = await change(
        stack, scripted, user, "update_schedule", event_id=sep29["id"], time="10:00", scope="all"
    )
    found = await events(stack, user)
    assert local(found)[:6] == [
        "2026-09-29T10:00",
        "2026-10-06T10:00",
        "2026-10-20T15:00",
        "2026-10-27T10:00",
        "2026-11-03T10:00",
        "2026-11-10T10:00",
    ]
    assert_receipt(done, sep29, found[0])


async def test_following_from_a_moved_occurrence_is_measured_from_its_original_slot(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await tuesdays(stack, scripted, user)
    found = await events(stack, user)
    await change(
        stack, scripted, user, "delete_schedule", event_id=on(found, "2026-10-27")[0]["id"], scope="this"
    )
    await change(
        stack,
        scripted,
        user,
        "update_schedule",
        event_id=on(found, "2026-10-20")[0]["id"],
        time="15:00",
        scope="this",
    )
    [moved] = on(await events(stack, user), "2026-10-20")
    done = await change(
        stack, scripted, user, "update_schedule", event_id=moved["id"], time="16:00", scope="following"
    )
    found = await events(stack, user)
    assert local(found)[:6] == [
        "2026-09-29T09:00",
        "2026-10-06T09:00",
        "2026-10-13T09:00",
        "2026-10-20T16:00",
        "2026-11-03T16:00",
        "2026-11-10T16:00",
    ]
    assert_receipt(done, moved, on(found, "2026-10-20")[0])


# ---- 10: the rest of what random sequences broke -----------------------------------------------------


async def test_a_monthly_series_moved_to_another_day_rewrites_its_month_day(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await create_series(
        stack, scripted, user, date="2026-10-15", time="09:00", recurrence="FREQ=MONTHLY;BYMONTHDAY=15"
    )
    [nov15] = on(await events(stack, user), "2026-11-15")
    done = await change(
        stack, scripted, user, "update_schedule", event_id=nov15["id"], date="2026-11-20", scope="all"
    )
    found = await events(stack, user)
    assert local(found) == [f"2026-{m}-20T09:00" for m in ("10", "11", "12")] + [
        "2027-01-20T09:00",
        "2027-02-20T09:00",
    ]
    assert_receipt(done, nov15, on(found, "2026-11-20")[0])


async def test_a_month_day_some_months_lack_is_refused_and_changes_nothing(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await create_series(
        stack, scripted, user, date="2026-10-28", time="09:00", recurrence="FREQ=MONTHLY;BYMONTHDAY=28"
    )
    before = await events(stack, user)
    scripted.set_script(
        script(
            on_user(
                "改一下",
                tool_calls=[
                    call("update_schedule", event_id=before[0]["id"], date="2026-10-31", scope="all")
                ],
            )
        )
    )
    refused = (await stack.chat(user, "改一下")).json()
    assert refused["tool_calls"][0]["result"] == "error:inexpressible_change", refused
    assert refused["command"] is None
    assert await events(stack, user) == before


async def test_a_series_cut_by_a_split_moved_earlier_keeps_its_number_of_occurrences(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await tuesdays(stack, scripted, user)
    found = await events(stack, user)
    await change(
        stack,
        scripted,
        user,
        "update_schedule",
        event_id=on(found, "2026-10-20")[0]["id"],
        time="15:00",
        scope="following",
    )
    # The head (9/29, 10/6, 10/13) moves to Mondays: still three, the tail untouched.
    await change(
        stack, scripted, user, "update_schedule", event_id=found[0]["id"], date="2026-09-28", scope="all"
    )
    assert local(await events(stack, user))[:6] == [
        "2026-09-28T09:00",
        "2026-10-05T09:00",
        "2026-10-12T09:00",
        "2026-10-20T15:00",
        "2026-10-27T15:00",
        "2026-11-03T15:00",
    ]


async def test_values_an_occurrence_has_of_its_own_stay_on_it_and_inherited_ones_follow(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await tuesdays(stack, scripted, user)
    found = await events(stack, user)
    # 10/6 gets a title and a length of its own; 10/13 a time of its own.
    await change(
        stack,
        scripted,
        user,
        "update_schedule",
        event_id=on(found, "2026-10-06")[0]["id"],
        title="评审",
        duration_minutes=120,
        scope="this",
    )
    await change(
        stack,
        scripted,
        user,
        "update_schedule",
        event_id=on(found, "2026-10-13")[0]["id"],
        time="15:00",
        scope="this",
    )
    [special] = on(await events(stack, user), "2026-10-06")
    # From the special one, the whole series to 11:00: the time reaches every occurrence at the
    # series' time and the special one itself; its title and length stay its own, and so does the
    # other's 15:00. A later rename reaches all but the one with a title of its own.
    done = await change(
        stack, scripted, user, "update_schedule", event_id=special["id"], time="11:00", scope="all"
    )
    found = await events(stack, user)
    summary = [(e["start"][:16], e["end"][11:16], e["title"]) for e in found[:5]]
    assert summary == [
        ("2026-09-29T11:00", "12:00", "组会"),
        ("2026-10-06T11:00", "13:00", "评审"),
        ("2026-10-13T15:00", "16:00", "组会"),
        ("2026-10-20T11:00", "12:00", "组会"),
        ("2026-10-27T11:00", "12:00", "组会"),
    ]
    assert_receipt(done, special, on(found, "2026-10-06")[0])
    await change(
        stack, scripted, user, "update_schedule", event_id=found[0]["id"], title="周例会", scope="all"
    )
    assert [e["title"] for e in (await events(stack, user))[:4]] == ["周例会", "评审", "周例会", "周例会"]


async def test_the_moved_occurrence_pointed_at_takes_the_change(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await tuesdays(stack, scripted, user)
    found = await events(stack, user)
    await change(
        stack,
        scripted,
        user,
        "update_schedule",
        event_id=on(found, "2026-10-20")[0]["id"],
        time="15:00",
        scope="this",
    )
    [moved] = on(await events(stack, user), "2026-10-20")
    done = await change(
        stack, scripted, user, "update_schedule", event_id=moved["id"], time="11:00", scope="all"
    )
    found = await events(stack, user)
    assert local(found)[:5] == [
        "2026-09-29T11:00",
        "2026-10-06T11:00",
        "2026-10-13T11:00",
        "2026-10-20T11:00",
        "2026-10-27T11:00",
    ]
    assert_receipt(done, moved, on(found, "2026-10-20")[0])


async def test_a_delete_counts_only_occurrences_that_really_go(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await create_series(
        stack, scripted, user, date="2026-09-29", time="09:00", recurrence="FREQ=WEEKLY;BYDAY=TU;COUNT=5"
    )
    found = await events(stack, user)
    await change(stack, scripted, user, "delete_schedule", event_id=found[1]["id"], scope="this")
    await change(stack, scripted, user, "delete_schedule", event_id=found[3]["id"], scope="this")
    scripted.set_script(
        script(
            on_user("删掉", tool_calls=[call("delete_schedule", event_id=found[2]["id"], scope="following")])
        )
    )
    held = (await stack.chat(user, "删掉以后的")).json()
    assert held["command"]["change"]["removed_count"] == 2  # 10/13 and 10/27; 10/20 is gone already
    done = (await stack.chat(user, "确认")).json()
    assert done["outcome"] == "deleted", done
    assert "共 2 次" in done["reply"], done["reply"]
    assert local(await events(stack, user)) == ["2026-09-29T09:00"]
    done = await change(stack, scripted, user, "delete_schedule", event_id=found[0]["id"], scope="all")
    assert await events(stack, user) == []
    assert "共 1 次" in done["reply"], done["reply"]


async def test_an_occurrence_moved_out_of_the_window_is_not_shown_at_its_old_slot(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    await tuesdays(stack, scripted, user)
    [oct27] = on(await events(stack, user), "2026-10-27")
    await change(
        stack, scripted, user, "update_schedule", event_id=oct27["id"], date="2026-11-02", scope="this"
    )
    october = await read_events(stack, user, "2026-10-01T00:00:00+08:00", "2026-11-01T00:00:00+08:00")
    assert local(october) == ["2026-10-06T09:00", "2026-10-13T09:00", "2026-10-20T09:00"]
    november = await read_events(stack, user, "2026-11-01T00:00:00+08:00", "2026-11-08T00:00:00+08:00")
    assert local(november) == ["2026-11-02T09:00", "2026-11-03T09:00"]
