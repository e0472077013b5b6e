"""One account, one object, one series never stops anyone else's sync or read (issue 44, contract
§22), against real servers: Radicale for two users' accounts, Xandikos for a calendar holding
objects real clients broke (Radicale refuses most of them at PUT; Xandikos stores them as sent).
Facts are read back: `last_synced_at` rows, `GET /v1/events`, `GET /v1/accounts`."""

# ruff: noqa: F811
from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.devtools.radicale import EmbeddedRadicale
from calagent.devtools.testing.davproxy import DavProxy
from calagent.devtools.testing.xandikos import EmbeddedXandikos
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import read_events, script
from .test_caldav import Remote, commands_app, connect, create_rule, eventually, scalar

# The stack, its Radicale and the proxy in front of it are test_sync_faults' fixtures.
from .test_sync_faults import connect_through, proxy, radicale, stack, sync_now  # noqa: F401

pytestmark = pytest.mark.e2e


def new_remote(radicale: EmbeddedRadicale) -> Remote:
    from calagent.devtools.radicale import make_calendar

    name = f"i{uuid.uuid4().hex[:8]}"
    password = f"app-{uuid.uuid4().hex[:10]}"
    radicale.add_user(name, password)
    return Remote(
        radicale.user_url(name), name, password, make_calendar(radicale.url, name, password, "Personal")
    )


async def synced_at(db: AsyncEngine, account_id: str) -> Any:
    return await scalar(db, "select last_synced_at from commands.caldav_accounts where id = :a", a=account_id)


async def accounts_of(stack: Stack, user: str) -> list[dict[str, Any]]:
    response = await stack.client.get("/v1/accounts", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["accounts"]
    return found


async def test_a_failing_account_never_stops_another_users_sync(
    stack: Stack, db: AsyncEngine, radicale: EmbeddedRadicale
) -> None:
    """An account whose sync fails every round (its password no longer opens: the credentials
    key changed) beside another user's healthy one: every round of the worker's own loop syncs
    the healthy one. The round once aborted at the first failure, and accounts never synced come
    first, so the healthy account's last sync stood still for minutes."""
    poisoned_user, healthy_user = f"u-{uuid.uuid4().hex[:10]}", f"u-{uuid.uuid4().hex[:10]}"
    poisoned = await connect(stack, poisoned_user, new_remote(radicale))
    healthy_remote = new_remote(radicale)
    healthy = await connect(stack, healthy_user, healthy_remote)
    async with db.begin() as conn:
        await conn.execute(
            text("update commands.caldav_accounts set secret = :s, last_synced_at = null where id = :a"),
            {"s": b"not a fernet token", "a": poisoned["id"]},
        )
    worker = commands_app(stack).sync
    assert worker is not None
    for n in range(3):
        before = await synced_at(db, healthy["id"])
        healthy_remote.add(
            f"iso-{n}-{uuid.uuid4().hex[:6]}", f"round {n}", "20260401T010000Z", "20260401T020000Z"
        )
        worker.sync_soon()  # a round of every account due, as the period starts one

        async def advanced(before: Any = before) -> bool:
            return bool(await synced_at(db, healthy["id"]) > before)

        await eventually(advanced, f"round {n} to sync the healthy account")
    titles = sorted(e["title"] for e in await read_events(stack, healthy_user))
    assert titles == ["round 0", "round 1", "round 2"]
    [account] = await accounts_of(stack, poisoned_user)
    assert account["last_synced_at"] is None
    assert account["last_error"]["kind"] == "sync"
    response = await stack.client.delete(
        f"/v1/accounts/{poisoned['id']}", headers=stack.headers(poisoned_user)
    )
    assert response.status_code == 204, response.text


# ---- objects no reader takes, beside good ones --------------------------------------------------

HEAD = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//real clients//EN\r\n"


def vevent(uid: str, *lines: str) -> str:
    return "".join(
        f"{line}\r\n"
        for line in ["BEGIN:VEVENT", f"UID:{uid}", "DTSTAMP:20260101T000000Z", *lines, "END:VEVENT"]
    )


BROKEN = {
    "two-dtstarts": vevent(
        "two-dtstarts", "DTSTART:20260305T090000Z", "DTSTART:20260306T090000Z", "SUMMARY:x"
    ),
    "text-dtstart": vevent("text-dtstart", "DTSTART:tomorrow", "SUMMARY:x"),
    "bad-duration": vevent("bad-duration", "DTSTART:20260305T090000Z", "DURATION:1 hour", "SUMMARY:x"),
    "one-uid-twice": vevent("one-uid-twice", "DTSTART:20260305T090000Z", "SUMMARY:a")
    + vevent("one-uid-twice", "DTSTART:20260306T090000Z", "SUMMARY:b"),
}
# Read in part: shown as far as it goes, and named.
PARTLY = {
    "rscale": vevent(
        "rscale",
        "DTSTART:20260331T090000Z",
        "DTEND:20260331T100000Z",
        "RRULE:RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=FORWARD",
        "SUMMARY:month end",
    ),
    "two-rrules": vevent(
        "two-rrules",
        "DTSTART:20260302T090000Z",
        "DTEND:20260302T093000Z",
        "RRULE:FREQ=WEEKLY;COUNT=2",
        "RRULE:FREQ=DAILY;COUNT=2",
        "SUMMARY:two rules",
    ),
}
GOOD = {
    f"good-{n}": vevent(
        f"good-{n}", f"DTSTART:2026030{n + 1}T010000Z", f"DTEND:2026030{n + 1}T020000Z", f"SUMMARY:good {n}"
    )
    for n in range(3)
}


def put(remote: Remote, name: str, vevents: str) -> str:
    """The object stored as sent (the caldav library's save would parse it first)."""
    href = f"{remote.calendar_url}{name}.ics"
    with remote.client() as client:
        response = client.put(href, HEAD + vevents + "END:VCALENDAR\r\n", {"Content-Type": "text/calendar"})
    assert response.status in (201, 204), (name, response.status)
    return href


@pytest.fixture
def xandikos(tmp_path: Path) -> Iterator[Remote]:
    server = EmbeddedXandikos(tmp_path / "xandikos")
    server.start()
    try:
        yield Remote(server.url, "anyone", "any-password", server.calendar_url)
    finally:
        server.stop()


async def test_objects_no_reader_takes_are_skipped_and_named_and_the_rest_of_the_calendar_syncs(
    stack: Stack, user: str, xandikos: Remote
) -> None:
    """Each broken object once stopped its whole account every round (TypeError, AttributeError,
    a primary key violation for two events of one UID), and an RSCALE series made GET /v1/events
    answer 422 for every range it touched."""
    account = await connect(stack, user, xandikos)
    for name, body in {**GOOD, **BROKEN, **PARTLY}.items():
        put(xandikos, name, body)
    await sync_now(stack, account["id"])

    events = await read_events(stack, user, "2026-03-01T00:00:00Z", "2026-06-01T00:00:00Z")
    assert sorted((e["title"], e["start"]) for e in events) == sorted(
        [
            *((f"good {n}", f"2026-03-0{n + 1}T09:00:00+08:00") for n in range(3)),
            ("month end", "2026-03-31T17:00:00+08:00"),  # its first occurrence
            ("two rules", "2026-03-02T17:00:00+08:00"),  # its first rule
            ("two rules", "2026-03-09T17:00:00+08:00"),
        ]
    )
    [shown] = await accounts_of(stack, user)
    assert shown["last_error"] is None
    named = {(w["kind"], w["uid"], w["href"].rsplit("/", 1)[-1]) for w in shown["warnings"]}
    assert named == {
        *(("object_skipped", name, f"{name}.ics") for name in BROKEN),
        *(("object_partly_read", name, f"{name}.ics") for name in PARTLY),
    }
    assert all(w["problem"] and w["calendar"] for w in shown["warnings"])

    # Mended on the server, an object is read again and its warning goes; one removed takes its own.
    put(
        xandikos,
        "two-rrules",
        vevent("two-rrules", "DTSTART:20260302T090000Z", "DTEND:20260302T093000Z", "SUMMARY:mended"),
    )
    with xandikos.client() as client:
        assert client.delete(f"{xandikos.calendar_url}two-dtstarts.ics").status == 204
    await sync_now(stack, account["id"])
    [shown] = await accounts_of(stack, user)
    assert {w["uid"] for w in shown["warnings"]} == {
        "text-dtstart",
        "bad-duration",
        "one-uid-twice",
        "rscale",
    }
    events = await read_events(stack, user, "2026-03-01T00:00:00Z", "2026-06-01T00:00:00Z")
    assert [e["start"] for e in events if e["title"] == "mended"] == ["2026-03-02T17:00:00+08:00"]


async def test_a_series_stored_with_a_rule_the_expander_cannot_follow_never_takes_a_read_down(
    stack: Stack, db: AsyncEngine, user: str, xandikos: Remote
) -> None:
    """A row synced before the reader named such rules (kept as it was): every range it touches
    still reads, showing its first occurrence."""
    account = await connect(stack, user, xandikos)
    put(xandikos, "rscale", PARTLY["rscale"])
    await sync_now(stack, account["id"])
    events = await read_events(stack, user, "2026-01-01T00:00:00Z", "2026-12-31T00:00:00Z")
    assert [(e["title"], e["start"]) for e in events] == [("month end", "2026-03-31T17:00:00+08:00")]
    assert (
        await scalar(
            db, "select count(*) from commands.events where user_id = :u and rrule like 'RSCALE%'", u=user
        )
        == 1
    )


# ---- what an object means: floating times ---------------------------------------------------------


async def test_a_floating_time_is_read_on_the_users_own_wall_clock(
    stack: Stack, user: str, radicale: EmbeddedRadicale
) -> None:
    """A DTSTART with neither TZID nor Z (contract §14): 09:00 where the user lives, not in the
    deployment's default zone (Asia/Shanghai here) as it was read."""
    saved = await stack.client.put(
        "/v1/settings", json={"tz": "America/New_York"}, headers=stack.headers(user)
    )
    assert saved.status_code == 200, saved.text
    remote = new_remote(radicale)
    account = await connect(stack, user, remote)
    remote.add_raw(
        HEAD
        + vevent("floating", "DTSTART:20260402T090000", "DTEND:20260402T100000", "SUMMARY:floating")
        + "END:VCALENDAR\r\n"
    )
    await sync_now(stack, account["id"])
    [event] = await read_events(stack, user, "2026-04-01T00:00:00Z", "2026-04-05T00:00:00Z", tz="UTC")
    assert [datetime.fromisoformat(event[k]) for k in ("start", "end")] == [
        datetime(2026, 4, 2, 13, tzinfo=UTC),
        datetime(2026, 4, 2, 14, tzinfo=UTC),
    ]


async def test_a_timed_event_without_an_end_is_shown_at_its_instant_and_keeps_no_time(
    stack: Stack, scripted: ScriptedModelServer, user: str, radicale: EmbeddedRadicale
) -> None:
    """RFC 5545 §3.6.1: a VEVENT with a DTSTART time and neither DTEND nor DURATION ends when it
    starts. It lasted an hour here, blocking a create beside it; a range that starts with it
    shows it."""
    remote = new_remote(radicale)
    account = await connect(stack, user, remote)
    remote.add_raw(
        HEAD + vevent("reminder", "DTSTART:20260925T070000Z", "SUMMARY:take medicine") + "END:VCALENDAR\r\n"
    )
    await sync_now(stack, account["id"])
    [event] = await read_events(stack, user, "2026-09-25T15:00:00+08:00", "2026-09-25T16:00:00+08:00")
    assert (event["title"], event["start"], event["end"]) == (
        "take medicine",
        "2026-09-25T15:00:00+08:00",
        "2026-09-25T15:00:00+08:00",
    )
    scripted.set_script(script(create_rule("call the bank", "D+1", "14:30")))
    answer = (await stack.chat(user, "call the bank tomorrow 14:30")).json()
    assert answer["outcome"] == "created", answer


# ---- a first sync: the nearest weeks first -------------------------------------------------------


async def test_a_first_sync_shows_the_next_two_weeks_before_the_whole_calendar(
    stack: Stack, db: AsyncEngine, user: str, radicale: EmbeddedRadicale, proxy: DavProxy
) -> None:
    """A calendar never synced is read about now first (a calendar-query over the next two
    weeks), then whole: when the whole listing fails, this week is shown all the same. Before,
    a first sync of ten calendars showed nothing for over a minute."""
    remote = new_remote(radicale)
    account = await connect_through(stack, user, remote, proxy)
    # The stack's clock says 2026-09-24; one event next week, one next year.
    remote.add("near-one", "next week", "20260929T010000Z", "20260929T020000Z")
    remote.add("far-one", "next year", "20270610T010000Z", "20270610T020000Z")
    async with db.begin() as conn:  # as a calendar never synced
        await conn.execute(
            text("update commands.caldav_calendars set sync_token = null where account_id = :a"),
            {"a": account["id"]},
        )
    proxy.fail("GET", r"\.ics$", 503)  # the whole listing reads each object: none comes
    await sync_now(stack, account["id"])
    titles = [
        e["title"] for e in await read_events(stack, user, "2026-09-20T00:00:00Z", "2027-09-20T00:00:00Z")
    ]
    assert titles == ["next week"]
    # The objects it could not read are asked for again (the token did not pass them by).
    proxy.clear()
    await sync_now(stack, account["id"])
    titles = [
        e["title"] for e in await read_events(stack, user, "2026-09-20T00:00:00Z", "2027-09-20T00:00:00Z")
    ]
    assert titles == ["next week", "next year"]
