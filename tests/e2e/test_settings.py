"""Settings, free/busy sharing and a time that suits several people (contract §16), through HTTP
with the facts read back: rows in the database, the events a turn wrote, the slots a suggestion
offered, what the model and the traces and the logs received.

"Now" is Thursday 2026-09-24 10:00 in Shanghai (02:00 UTC): still Wednesday evening in Los Angeles,
so "明天" is the 24th there and the 25th in Shanghai.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.gateway.app import create_app
from calagent.runtime.bus import Bus
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script

pytestmark = pytest.mark.e2e

SHANGHAI = "Asia/Shanghai"


async def scalar(db: AsyncEngine, sql: str, **params: Any) -> Any:
    async with db.connect() as conn:
        return await conn.scalar(text(sql), params)


async def put_settings(stack: Stack, user: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await stack.client.put("/v1/settings", json=body, headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def share(stack: Stack, owner: str, with_user: str) -> None:
    response = await stack.client.post(
        "/v1/sharing", json={"with": with_user, "level": "freebusy"}, headers=stack.headers(owner)
    )
    assert response.status_code == 201, response.text


# ---- settings ------------------------------------------------------------------------------------


async def test_settings_start_from_the_defaults_and_a_put_changes_only_what_it_names(
    stack: Stack, db: AsyncEngine, user: str
) -> None:
    fresh = (await stack.client.get("/v1/settings", headers=stack.headers(user, "Europe/Paris"))).json()
    week = {day: ["09:00", "18:00"] for day in ("mon", "tue", "wed", "thu", "fri")}
    assert fresh == {
        "tz": "Europe/Paris",
        "email": None,
        "language": None,
        "work_hours": week,
        "invitations_from": "everyone",
        "buffer_minutes": 0,
    }
    default_zone = (await stack.client.get("/v1/settings", headers=stack.headers(user))).json()["tz"]
    assert default_zone == stack.settings.default_tz

    saved = await put_settings(
        stack,
        user,
        {
            "tz": "America/New_York",
            "email": "Me@Example.com",
            "work_hours": {"mon": ["10:00", "16:30"], "sat": None},
            "buffer_minutes": 15,
        },
    )
    assert saved == {
        "tz": "America/New_York",
        "email": "Me@Example.com",
        "language": None,
        "work_hours": {"mon": ["10:00", "16:30"]},
        "invitations_from": "everyone",
        "buffer_minutes": 15,
    }
    await put_settings(stack, user, {"language": "en"})
    again = (await stack.client.get("/v1/settings", headers=stack.headers(user, "Europe/Paris"))).json()
    assert again == {**saved, "language": "en"}
    row = await scalar(
        db, "select row_to_json(s)::text from commands.user_settings s where user_id = :u", u=user
    )
    assert json.loads(row)["tz"] == "America/New_York"

    assert json.loads(row)["buffer_minutes"] == 15
    cleared = await put_settings(stack, user, {"tz": None, "work_hours": None, "buffer_minutes": None})
    assert cleared["tz"] == stack.settings.default_tz  # the token's zone again (this one names none)
    assert cleared["work_hours"] == week and cleared["language"] == "en"
    assert cleared["buffer_minutes"] == 0
    assert await scalar(db, "select tz from commands.user_settings where user_id = :u", u=user) is None

    # Whose invitations are offered (contract §19): everyone's by default, or only known senders'.
    assert (await put_settings(stack, user, {"invitations_from": "known"}))["invitations_from"] == "known"
    column = "select invitations_from from commands.user_settings where user_id = :u"
    assert await scalar(db, column, u=user) == "known"
    assert (await put_settings(stack, user, {"tz": "Europe/Paris"}))["invitations_from"] == "known"
    assert (await put_settings(stack, user, {"invitations_from": None}))["invitations_from"] == "everyone"
    assert await scalar(db, column, u=user) is None


@pytest.mark.parametrize(
    "body",
    [
        {"tz": "Mars/Olympus_Mons"},
        {"tz": 8},
        {"email": "not an address"},
        {"language": "fr"},
        {"invitations_from": "strangers"},
        {"invitations_from": "Known"},
        {"invitations_from": True},
        {"work_hours": {"someday": ["09:00", "10:00"]}},
        {"work_hours": {"mon": ["18:00", "09:00"]}},
        {"work_hours": {"mon": ["09:00", "09:00"]}},
        {"work_hours": {"mon": ["9:00", "18:00"]}},
        {"work_hours": {"mon": ["09:00", "24:00"]}},
        {"work_hours": {"mon": ["09:00"]}},
        {"work_hours": ["09:00", "18:00"]},
        {"buffer_minutes": -1},
        {"buffer_minutes": 241},
        {"buffer_minutes": "15"},
        {"buffer_minutes": 7.5},
        {"buffer_minutes": True},
        {"colour": "blue"},
        {},
        [],
    ],
)
async def test_a_bad_setting_is_refused_with_a_4xx_and_nothing_is_stored(
    stack: Stack, db: AsyncEngine, user: str, body: Any
) -> None:
    response = await stack.client.put("/v1/settings", json=body, headers=stack.headers(user))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["message"]
    assert await scalar(db, "select count(*) from commands.user_settings where user_id = :u", u=user) == 0


async def test_a_saved_zone_is_the_zone_of_the_next_turn_on_every_gateway(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    scripted.set_script(
        script(
            on_user(
                "三点",
                tool_calls=[call("prepare_or_create_schedule", title="对账", date="D+1", time="15:00")],
            ),
            on_user(
                "四点",
                tool_calls=[call("prepare_or_create_schedule", title="复盘", date="D+1", time="16:00")],
            ),
        )
    )
    await put_settings(stack, user, {"tz": "America/Los_Angeles"})
    created = (await stack.chat(user, "明天下午三点对账")).json()
    assert created["outcome"] == "created", created
    [event] = await read_events(stack, user)
    # Wednesday evening in Los Angeles: tomorrow is the 24th, at 15:00 there.
    assert event["start"] == "2026-09-24T15:00:00-07:00"
    # The page asks its session for the zone it shows times in: the saved one, not the token's.
    session = (await stack.client.get("/web/session", headers=stack.headers(user))).json()
    assert session["tz"] == "America/Los_Angeles"
    assert session["now"].endswith("-07:00")

    # Another gateway replica learns the zone from the bucket, not from the PUT it never saw.
    other_bus = Bus(stack.settings.require_nats(), "gateway", stack.clock)
    other = create_app(stack.settings, stack.clock, bus=other_bus)
    await other_bus.start()
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=other), base_url="http://gateway", timeout=60
    )
    try:
        await client.get("/v1/settings", headers=stack.headers(user))  # the watch starts with a request
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while other.state.gateway.zones.zone_of(user) is None:
            assert loop.time() < deadline, "the other gateway never saw the zone"
            await asyncio.sleep(0.05)
        answer = await client.post(
            "/v1/chat", json={"message": "明天下午四点复盘"}, headers=stack.headers(user)
        )
        assert answer.json()["outcome"] == "created", answer.text
    finally:
        await other.state.gateway.zones.stop()
        await client.aclose()
        await other_bus.close()
    starts = sorted(e["start"] for e in await read_events(stack, user))
    assert starts == ["2026-09-24T15:00:00-07:00", "2026-09-24T16:00:00-07:00"]


# ---- sharing and suggestions ---------------------------------------------------------------------

# Distinctive strings of the other user's event: none may reach the caller, the model, a trace or a log.
SECRET_TITLE = "Zephyr-Quokka-Summit"
SECRET_PLACE = "Obsidian-Lighthouse-7"
SECRET_NOTE = "Secret-Marmalade-Protocol"
SECRETS = (SECRET_TITLE, SECRET_PLACE, SECRET_NOTE)


async def a_busy_colleague(stack: Stack, scripted: ScriptedModelServer, colleague: str) -> None:
    """Works 08:00-17:00 in London (15:00-24:00 in Shanghai) and is busy 08:00-09:30 there on
    Friday the 25th (15:00-16:30 in Shanghai), at an event whose every word is private."""
    await put_settings(
        stack,
        colleague,
        {
            "tz": "Europe/London",
            "email": f"{colleague}@example.org",
            "work_hours": {d: ["08:00", "17:00"] for d in ("mon", "tue", "wed", "thu", "fri")},
        },
    )
    scripted.set_script(
        script(
            on_user(
                "早会",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title=SECRET_TITLE,
                        date="D+1",
                        time="08:00",
                        end_time="09:30",
                        location=SECRET_PLACE,
                        notes=SECRET_NOTE,
                    )
                ],
            )
        )
    )
    created = (await stack.chat(colleague, "明天早上八点早会")).json()
    assert created["outcome"] == "created", created


def suggesting(*attendees: str) -> Any:
    return script(
        on_user(
            "找时间",
            tool_calls=[
                call(
                    "suggest_free_time",
                    start="D+1",
                    end="D+2",
                    duration_minutes=60,
                    attendees=list(attendees),
                )
            ],
        )
    )


async def suggest(stack: Stack, scripted: ScriptedModelServer, user: str, *attendees: str) -> dict[str, Any]:
    scripted.set_script(suggesting(*attendees))
    response = await stack.chat(user, "明天找时间开个会")
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert answer["outcome"] == "suggested", answer
    return answer


def starts(answer: dict[str, Any]) -> list[str]:
    return [slot["start"] for slot in answer["slots"]]


async def test_another_users_time_counts_only_while_they_share_it(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    colleague = f"{user}-colleague"
    await a_busy_colleague(stack, scripted, colleague)

    # Without consent the colleague counts as free and is named unknown: the caller's own day.
    alone = await suggest(stack, scripted, user, colleague)
    assert starts(alone) == ["2026-09-25T09:00:00+08:00"]
    assert colleague in alone["reply"]

    await share(stack, colleague, user)
    listed = (await stack.client.get("/v1/sharing", headers=stack.headers(user))).json()
    assert [e["user"] for e in listed["shared_with_me"]] == [colleague] and listed["shared_with"] == []
    mine = (await stack.client.get("/v1/sharing", headers=stack.headers(colleague))).json()
    assert [(e["user"], e["level"]) for e in mine["shared_with"]] == [(user, "freebusy")]

    # With it: inside both working days (15:00-18:00 here) and after the colleague's 16:30.
    together = await suggest(stack, scripted, user, colleague)
    [slot] = together["slots"]
    assert (slot["start"], slot["end"]) == ("2026-09-25T16:30:00+08:00", "2026-09-25T17:30:00+08:00")
    # A contact whose address is the colleague's settings address is the colleague.
    await stack.client.post(
        "/v1/contacts",
        json={"name": "Robin", "email": f"{colleague}@Example.org"},
        headers=stack.headers(user),
    )
    by_contact = await suggest(stack, scripted, user, "Robin")
    assert starts(by_contact) == ["2026-09-25T16:30:00+08:00"]
    by_address = await suggest(stack, scripted, user, f"{colleague}@example.org", "stranger@example.net")
    assert starts(by_address) == ["2026-09-25T16:30:00+08:00"]
    assert "stranger@example.net" in by_address["reply"]

    # Working hours that never meet: no slot, and the answer says why rather than offering one.
    await put_settings(stack, colleague, {"work_hours": {"fri": ["19:00", "21:00"]}})  # 02:00-04:00 here
    apart = await suggest(stack, scripted, user, colleague)
    assert (apart["slots"], apart["empty_reason"]) == ([], "outside_hours")

    gone = await stack.client.delete(f"/v1/sharing/{user}", headers=stack.headers(colleague))
    assert gone.status_code == 204
    again = await stack.client.delete(f"/v1/sharing/{user}", headers=stack.headers(colleague))
    assert again.status_code == 404
    after = await suggest(stack, scripted, user, colleague)
    assert starts(after) == ["2026-09-25T09:00:00+08:00"]
    assert (await stack.client.get("/v1/sharing", headers=stack.headers(user))).json()["shared_with_me"] == []


async def created_by_chat(stack: Stack, scripted: ScriptedModelServer, user: str, **args: Any) -> None:
    scripted.set_script(script(on_user("记一下", tool_calls=[call("prepare_or_create_schedule", **args)])))
    answer = (await stack.chat(user, "记一下")).json()
    assert answer["outcome"] == "created", answer


async def test_an_attendee_busy_all_week_is_named_as_the_reason_not_the_users_own_time(
    stack: Stack, scripted: ScriptedModelServer, user: str
) -> None:
    """Contract §20: with no slot, the answer names who is busy. The colleague is away all week and
    the user is busy in the hours they share (15:00-18:00 here): freeing the user's time would not
    help, so the answer is the colleague's time, by name — not that the user has no free hour."""
    colleague = f"{user}-colleague"
    london_week = {d: ["08:00", "17:00"] for d in ("mon", "tue", "wed", "thu", "fri")}
    await put_settings(stack, colleague, {"tz": "Europe/London", "work_hours": london_week})
    await share(stack, colleague, user)
    await created_by_chat(stack, scripted, colleague, title="休假", date="D+1", end_date="D+7", all_day=True)
    await created_by_chat(stack, scripted, user, title="评审", date="D+1", time="15:00", end_time="18:00")

    answer = await suggest(stack, scripted, user, colleague)
    assert (answer["slots"], answer["empty_reason"]) == ([], "attendees_unavailable")
    assert colleague in answer["reply"]
    assert "你没有" not in answer["reply"]


async def test_each_slot_says_how_sure_it_is_and_each_persons_buffer_and_free_marked_time_count(
    stack: Stack, scripted: ScriptedModelServer, db: AsyncEngine, user: str
) -> None:
    """Contract §20 over HTTP: confidence and availability per slot (a stranger is unknown, 49),
    the buffer a person saves kept around their busy time, an event marked free not busy."""
    colleague = f"{user}-colleague"
    await a_busy_colleague(stack, scripted, colleague)
    await share(stack, colleague, user)
    stranger = "stranger@example.net"

    def shown(answer: dict[str, Any]) -> list[tuple[str, float, str, list[tuple[str, str]]]]:
        return [
            (
                s["start"],
                s["confidence"],
                s["reason"],
                [(a["who"], a["availability"]) for a in s["attendees"]],
            )
            for s in answer["slots"]
        ]

    everyone = [(user, "free"), (colleague, "free"), (stranger, "unknown")]
    first = await suggest(stack, scripted, user, colleague, stranger)
    assert shown(first) == [("2026-09-25T16:30:00+08:00", 83.0, "unknown", everyone)]  # (2 × 100 + 49) / 3
    assert "empty_reason" not in first

    # The colleague keeps half an hour after their 15:00-16:30 (Shanghai) event.
    await put_settings(stack, colleague, {"buffer_minutes": 30})
    buffered = await suggest(stack, scripted, user, colleague, stranger)
    assert shown(buffered) == [("2026-09-25T17:00:00+08:00", 83.0, "unknown", everyone)]

    # Their event marked free (as a connected calendar's TRANSP:TRANSPARENT says): their day is open
    # from 15:00, the start of the working hours the two share.
    async with db.begin() as conn:
        await conn.execute(
            text("UPDATE commands.events SET transparent = true WHERE user_id = :u"), {"u": colleague}
        )
    opened = await suggest(stack, scripted, user, colleague, stranger)
    assert shown(opened) == [("2026-09-25T15:00:00+08:00", 83.0, "unknown", everyone)]


async def test_sharing_is_refused_with_oneself_and_for_another_level(stack: Stack, user: str) -> None:
    for body in ({"with": user}, {"with": "x", "level": "details"}, {"with": ""}, {"level": "freebusy"}):
        response = await stack.client.post("/v1/sharing", json=body, headers=stack.headers(user))
        assert response.status_code == 422, body
    assert (await stack.client.get("/v1/sharing", headers=stack.headers(user))).json() == {
        "shared_with": [],
        "shared_with_me": [],
    }


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


async def test_no_word_of_another_users_event_reaches_the_caller_the_model_a_trace_or_a_log(
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    spans: InMemorySpanExporter,
    logs: pytest.LogCaptureFixture,
) -> None:
    colleague = f"{user}-colleague"
    await a_busy_colleague(stack, scripted, colleague)
    await share(stack, colleague, user)
    [event] = await read_events(stack, colleague, tz="Europe/London")
    assert (event["title"], event["location"], event["notes"]) == SECRETS  # the words exist

    scripted.clear_requests()
    spans.clear()
    logs.clear()
    answers = [
        await suggest(stack, scripted, user, colleague),
        await suggest(stack, scripted, user, f"{colleague}@example.org"),
    ]
    scripted.set_script(
        script(
            on_user(
                "排一下",
                tool_calls=[
                    call(
                        "suggest_free_time",
                        start="D+1",
                        end="D+2",
                        duration_minutes=30,
                        attendees=[colleague],
                    )
                ],
            )
        )
    )
    streamed = await stack.client.post(
        "/v1/chat",
        json={"message": "排一下明天的会"},
        headers={**stack.headers(user), "Accept": "text/event-stream"},
    )
    texts = [json.dumps(a, ensure_ascii=False) for a in answers] + [streamed.text]
    texts.append(
        (
            await stack.client.get(
                "/v1/events", params={"start": "2026-09-01", "end": "2026-10-01"}, headers=stack.headers(user)
            )
        ).text
    )
    texts.append((await stack.client.get("/v1/calendar.ics", headers=stack.headers(user))).text)
    assert all(starts(a) == ["2026-09-25T16:30:00+08:00"] for a in answers)

    model_saw = [json.dumps(r.body, ensure_ascii=False) for r in scripted.requests]
    assert model_saw, "the model was asked"
    traced = [
        json.dumps({k: str(v) for k, v in (s.attributes or {}).items()}, ensure_ascii=False)
        + " ".join(json.dumps({k: str(v) for k, v in (e.attributes or {}).items()}) for e in s.events)
        + s.name
        for s in spans.get_finished_spans()
    ]
    # The spans of every service of the turn were recorded, the read of the colleague's time too.
    assert {"gateway.receive", "tool.suggest_free_time", "query.suggest_free"} <= {
        s.name for s in spans.get_finished_spans()
    }
    logged = [r.getMessage() for r in logs.records] + [logs.text]
    for secret in SECRETS:
        for where, found in (("answer", texts), ("model", model_saw), ("span", traced), ("log", logged)):
            assert not any(secret in t for t in found), f"{secret} leaked into a {where}"
