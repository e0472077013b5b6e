"""Several connected accounts (contract §14): two CalDAV servers on two loopback addresses, one
account of the user on each. A create goes to the calendar it names, of whichever account, or to
the one default calendar `PATCH /v1/accounts/{id}` sets; an event stays in the account it came
from; conflict checks see both. Facts are read from both servers and from `GET /v1/accounts`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import caldav_stack, radicale_server
from .conftest import call, on_user, read_events, script
from .test_caldav import Remote, commands_app, connect, eventually, outbox_drained

pytestmark = pytest.mark.e2e

FIRST_HOST = "127.0.0.2"
SECOND_HOST = "127.0.0.3"


@pytest.fixture(scope="module")
def servers_pair() -> Iterator[tuple[EmbeddedRadicale, EmbeddedRadicale]]:
    with (
        radicale_server(host=FIRST_HOST, prefix="calagent-radicale-a-") as first,
        radicale_server(host=SECOND_HOST, prefix="calagent-radicale-b-") as second,
    ):
        yield first, second


@pytest.fixture(scope="module")
async def stack(
    servers: Servers,
    database_url: str,
    scripted: ScriptedModelServer,
    servers_pair: tuple[EmbeddedRadicale, EmbeddedRadicale],
) -> AsyncIterator[Stack]:
    networks = ",".join(s.network for s in servers_pair)
    async with caldav_stack(servers, database_url, scripted, allow_networks=networks) as system:
        yield system


@dataclass
class Accounts:
    """The user's account on each server: the first with "Personal", the second with "Team" and a
    "Personal" of its own (a name the first account has already)."""

    first: Remote
    team: Remote
    second_personal: Remote


def _login(server: EmbeddedRadicale) -> tuple[str, str]:
    name = f"r{uuid.uuid4().hex[:8]}"
    password = f"app-{uuid.uuid4().hex[:10]}"
    server.add_user(name, password)
    return name, password


@pytest.fixture
def accounts(servers_pair: tuple[EmbeddedRadicale, EmbeddedRadicale]) -> Accounts:
    one, two = servers_pair
    name, password = _login(one)
    first = Remote(one.user_url(name), name, password, make_calendar(one.url, name, password, "Personal"))
    name2, password2 = _login(two)
    team_url = make_calendar(two.url, name2, password2, "Team", cal_id="team")
    personal_url = make_calendar(two.url, name2, password2, "Personal", cal_id="personal")
    return Accounts(
        first,
        Remote(two.user_url(name2), name2, password2, team_url),
        Remote(two.user_url(name2), name2, password2, personal_url),
    )


async def connect_both(stack: Stack, user: str, accounts: Accounts) -> tuple[dict[str, Any], dict[str, Any]]:
    return await connect(stack, user, accounts.first), await connect(stack, user, accounts.team)


async def listing(stack: Stack, user: str) -> list[dict[str, Any]]:
    response = await stack.client.get("/v1/accounts", headers=stack.headers(user))
    assert response.status_code == 200
    found: list[dict[str, Any]] = response.json()["accounts"]
    return found


def defaults(accounts: list[dict[str, Any]]) -> list[str]:
    return [c["url"] for a in accounts for c in a["calendars"] if c["default"]]


async def create(
    stack: Stack, scripted: ScriptedModelServer, user: str, title: str, time: str, calendar: str | None = None
) -> dict[str, Any]:
    arguments: dict[str, Any] = {"title": title, "date": "D+1", "time": time}
    if calendar is not None:
        arguments["calendar"] = calendar
    scripted.set_script(script(on_user(title, tool_calls=[call("prepare_or_create_schedule", **arguments)])))
    answer: dict[str, Any] = (await stack.chat(user, f"{title}，明天 {time}")).json()
    return answer


def uids(remote: Remote) -> list[str]:
    return sorted(str(v["UID"]) for _, cal in remote.objects() for v in cal.walk("VEVENT"))


async def test_each_account_brings_its_calendars_under_names_unique_to_the_user_and_one_default(
    stack: Stack, user: str, accounts: Accounts
) -> None:
    first, second = await connect_both(stack, user, accounts)
    found = {a["id"]: [(c["name"], c["default"]) for c in a["calendars"]] for a in await listing(stack, user)}
    assert found == {
        first["id"]: [("Personal", True)],
        second["id"]: [("Team", False), (f"Personal ({SECOND_HOST})", False)],
    }


async def test_a_create_naming_a_calendar_of_the_second_account_lands_on_the_second_server_only(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, accounts: Accounts
) -> None:
    await connect_both(stack, user, accounts)
    team = await create(stack, scripted, user, "项目评审", "10:00", calendar="Team")
    assert team["outcome"] == "created", team
    other = await create(stack, scripted, user, "体检", "14:00", calendar=f"Personal ({SECOND_HOST})")
    assert other["outcome"] == "created", other
    await outbox_drained(db, user)
    assert uids(accounts.team) == [f"{team['events'][0]['id']}@calagent"]
    assert uids(accounts.second_personal) == [f"{other['events'][0]['id']}@calagent"]
    assert uids(accounts.first) == []
    calendars = {e["title"]: e["calendar"] for e in await read_events(stack, user)}
    assert calendars == {"项目评审": "Team", "体检": f"Personal ({SECOND_HOST})"}


async def test_the_default_calendar_set_by_patch_receives_the_next_create_that_names_none(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, accounts: Accounts
) -> None:
    _first, second = await connect_both(stack, user, accounts)
    before = await create(stack, scripted, user, "早会", "09:00")
    await outbox_drained(db, user)
    assert uids(accounts.first) == [f"{before['events'][0]['id']}@calagent"]

    response = await stack.client.patch(
        f"/v1/accounts/{second['id']}",
        json={"default_calendar": accounts.team.calendar_url},
        headers=stack.headers(user),
    )
    assert response.status_code == 200, response.text
    assert defaults(await listing(stack, user)) == [accounts.team.calendar_url]

    after = await create(stack, scripted, user, "午会", "13:00")
    await outbox_drained(db, user)
    assert uids(accounts.team) == [f"{after['events'][0]['id']}@calagent"]
    assert uids(accounts.first) == [f"{before['events'][0]['id']}@calagent"]


async def test_patch_refuses_another_users_account_and_an_address_that_is_not_its_calendar(
    stack: Stack, user: str, accounts: Accounts
) -> None:
    first, second = await connect_both(stack, user, accounts)
    stranger = await stack.client.patch(
        f"/v1/accounts/{second['id']}",
        json={"default_calendar": accounts.team.calendar_url},
        headers=stack.headers(f"{user}-other"),
    )
    assert stranger.status_code == 404
    wrong = await stack.client.patch(
        f"/v1/accounts/{second['id']}",
        json={"default_calendar": accounts.first.calendar_url},  # the first account's calendar
        headers=stack.headers(user),
    )
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (422, "not_a_calendar")
    assert defaults(await listing(stack, user)) == [accounts.first.calendar_url]
    assert first["calendars"][0]["default"] is True


async def test_an_event_from_the_second_account_moved_by_chat_is_written_back_there(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, accounts: Accounts
) -> None:
    await connect_both(stack, user, accounts)
    href = accounts.team.add("team-offsite", "团建", "20260925T020000Z", "20260925T030000Z")  # 10:00 +08
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def visible() -> bool:
        return any(e["title"] == "团建" for e in await read_events(stack, user))

    await eventually(visible, "the second account's event in GET /v1/events")
    [offsite] = [e for e in await read_events(stack, user) if e["title"] == "团建"]
    assert offsite["calendar"] == "Team"
    scripted.set_script(
        script(
            on_user("团建改到", tool_calls=[call("update_schedule", event_id=offsite["id"], time="16:00")]),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    assert (await stack.chat(user, "团建改到下午四点")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    await outbox_drained(db, user)
    [(moved_href, body)] = accounts.team.objects()
    [vevent] = body.walk("VEVENT")
    assert (moved_href, str(vevent["UID"])) == (href, "team-offsite")
    assert vevent.decoded("DTSTART") == datetime.fromisoformat("2026-09-25T16:00:00+08:00")
    assert accounts.first.objects() == []


async def test_conflict_checks_see_the_events_of_both_accounts(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, accounts: Accounts
) -> None:
    await connect_both(stack, user, accounts)
    accounts.first.add("first-dentist", "看牙医", "20260925T020000Z", "20260925T030000Z")  # 10:00–11:00 +08
    accounts.team.add("team-review", "评审", "20260925T070000Z", "20260925T080000Z")  # 15:00–16:00 +08
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def both_visible() -> bool:
        return {e["title"] for e in await read_events(stack, user)} == {"看牙医", "评审"}

    await eventually(both_visible, "both accounts' events in GET /v1/events")
    for title, time in (("和张三开会", "10:30"), ("和李四开会", "15:30")):
        answer = await create(stack, scripted, user, title, time)
        assert answer["outcome"] == "conflict", answer
    await outbox_drained(db, user)
    assert (uids(accounts.first), uids(accounts.team)) == (["first-dentist"], ["team-review"])


async def test_an_event_put_in_a_calendar_of_the_other_account_moves_there(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, accounts: Accounts
) -> None:
    await connect_both(stack, user, accounts)
    made = await create(stack, scripted, user, "读书会", "19:00")
    await outbox_drained(db, user)
    uid = f"{made['events'][0]['id']}@calagent"
    assert uids(accounts.first) == [uid]
    scripted.set_script(
        script(
            on_user(
                "放到Team",
                tool_calls=[call("update_schedule", event_id=made["events"][0]["id"], calendar="Team")],
            ),
            on_user("确认", tool_calls=[call("confirm_command")]),
        )
    )
    assert (await stack.chat(user, "读书会放到Team日历")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "updated"
    await outbox_drained(db, user)
    assert uids(accounts.first) == []
    assert uids(accounts.team) == [uid]
    [event] = [e for e in await read_events(stack, user) if e["title"] == "读书会"]
    assert event["calendar"] == "Team"


async def test_disconnecting_the_account_of_the_default_calendar_hands_the_default_on(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str, accounts: Accounts
) -> None:
    first, second = await connect_both(stack, user, accounts)
    response = await stack.client.delete(f"/v1/accounts/{first['id']}", headers=stack.headers(user))
    assert response.status_code == 204
    assert defaults(await listing(stack, user)) == [accounts.team.calendar_url]
    made = await create(stack, scripted, user, "周报", "17:00")
    await outbox_drained(db, user)
    assert uids(accounts.team) == [f"{made['events'][0]['id']}@calagent"]
    assert second["id"] in {a["id"] for a in await listing(stack, user)}
