"""Private calendar feeds on the HTTP surface (contract §10, §11): `POST /v1/feeds` with a bearer,
`GET /feeds/<secret>.ics` without one.

First against a commands double on real NATS (what the gateway asks, what it answers, odd input);
then against the real commands and time services on real NATS and PostgreSQL (rotation end to end,
and the feed against `GET /v1/events`).
"""

from __future__ import annotations

import contextlib
import logging
import random
import secrets
import string
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import httpx
import pytest
import recurring_ical_events  # type: ignore[import-untyped]
from fastapi import FastAPI
from icalendar import Calendar

from calagent.contracts import wire
from calagent.contracts.commands import (
    CommandError,
    CommandRequest,
    CommandResult,
    MergeStub,
    PrepareOrCreate,
)
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import FeedCalendar, QueryRequest, QueryResult, RotateFeed
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import PrepareOrCreateSchedule
from calagent.gateway.app import create_app
from calagent.gateway.auth import issue_token
from calagent.gateway.feeds import RedactFeedSecrets, redact_feed_secrets
from calagent.runtime.bus import Bus
from calagent.runtime.clock import FrozenClock
from calagent.runtime.service import start_service
from calagent.runtime.settings import Settings

pytestmark = pytest.mark.integration

SECRET = "feeds-test-secret-long-enough-for-hs256"
NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")
ICS = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//double//EN\r\nEND:VCALENDAR\r\n"


def auth(user_id: str, tz: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(user_id, SECRET, tz=tz)}"}


@contextlib.asynccontextmanager
async def gateway(nats_url: str, clock: FrozenClock | None = None) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(NATS_URL=nats_url, CALAGENT_AUTH_SECRET=SECRET)
    app: FastAPI = create_app(settings, clock=clock or FrozenClock(NOW))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw", timeout=30) as client,
    ):
        yield client


def assert_not_found(response: httpx.Response) -> None:
    assert response.status_code == 404, response.text
    assert response.json() == {"error": {"code": "not_found", "message": response.json()["error"]["message"]}}
    assert response.json()["error"]["message"]


# ---- against a commands double ------------------------------------------------------------------


@dataclass
class FakeFeeds:
    """Commands' feed queries, in memory: one secret per user, replaced on rotation."""

    queries: list[Any] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)  # user -> secret

    async def on_query(self, request: QueryRequest) -> QueryResult:
        query = request.query
        self.queries.append(query)
        if isinstance(query, RotateFeed):
            self.secrets[query.envelope.user_id] = secrets.token_urlsafe(32)
            return QueryResult(feed_secret=self.secrets[query.envelope.user_id])
        if isinstance(query, FeedCalendar):
            if query.secret in self.secrets.values():
                return QueryResult(ics=ICS)
            return QueryResult(error=CommandError(code="not_found", message="no feed"))
        return QueryResult(error=CommandError(code="invalid_arguments", message="not served here"))

    def feed_queries(self) -> list[FeedCalendar]:
        return [q for q in self.queries if isinstance(q, FeedCalendar)]


@pytest.fixture
async def feeds(nats_url: str) -> AsyncIterator[FakeFeeds]:
    fake = FakeFeeds()
    commands = Bus(nats_url, "commands")
    commands.serve(wire.COMMAND_QUERY, fake.on_query)
    await commands.start()
    try:
        yield fake
    finally:
        await commands.close()


async def test_creating_a_feed_needs_a_token(nats_url: str, feeds: FakeFeeds) -> None:
    async with gateway(nats_url) as client:
        missing = await client.post("/v1/feeds")
        forged = await client.post("/v1/feeds", headers={"Authorization": "Bearer not-a-token"})
    for response in (missing, forged):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
    assert feeds.queries == []


async def test_a_feed_is_served_without_a_token_and_rotation_kills_the_old_address(
    nats_url: str, feeds: FakeFeeds
) -> None:
    async with gateway(nats_url) as client:
        created = await client.post("/v1/feeds", headers=auth("owner", "America/New_York"))
        assert created.status_code == 201, created.text
        assert created.headers["cache-control"] == "no-store"
        url = created.json()["url"]
        assert created.json() == {"url": f"/feeds/{feeds.secrets['owner']}.ics"}
        served = await client.get(url)
        head = await client.head(url)
        rotated = await client.post("/v1/feeds", headers=auth("owner", "Europe/Berlin"))
        new_url = rotated.json()["url"]
        old = await client.get(url)
        new = await client.get(new_url)
    assert served.status_code == 200, served.text
    assert served.headers["content-type"] == "text/calendar; charset=utf-8"
    assert served.text == ICS
    assert head.status_code == 200
    assert rotated.status_code == 201
    assert new_url != url
    assert_not_found(old)
    assert new.status_code == 200
    # The rotation carried the caller's identity and zone from the token …
    rotations = [q for q in feeds.queries if isinstance(q, RotateFeed)]
    assert [(q.envelope.user_id, q.envelope.tz) for q in rotations] == [
        ("owner", "America/New_York"),
        ("owner", "Europe/Berlin"),
    ]
    # … the feed requests only the secret: there is no user to name.
    assert [q.secret for q in feeds.feed_queries()] == [url[7:-4]] * 2 + [url[7:-4], new_url[7:-4]]
    assert all(set(type(q).model_fields) == {"kind", "secret"} for q in feeds.feed_queries())


async def test_an_unknown_secret_is_404(nats_url: str, feeds: FakeFeeds) -> None:
    async with gateway(nats_url) as client:
        unknown = await client.get(f"/feeds/{secrets.token_urlsafe(32)}.ics")
        with_a_token = await client.get(f"/feeds/{secrets.token_urlsafe(32)}.ics", headers=auth("owner"))
    assert_not_found(unknown)
    assert_not_found(with_a_token)
    assert len(feeds.feed_queries()) == 2


ODD_PATHS = [
    "/feeds/short.ics",
    "/feeds/" + "a" * 129 + ".ics",
    "/feeds/" + "a" * 10_000 + ".ics",
    "/feeds/.ics",
    "/feeds/" + "a" * 43,
    "/feeds/" + "a" * 43 + ".ics.ics",
    "/feeds/" + "a" * 43 + ".ICS",
    "/feeds/" + "a" * 40 + "%20abc.ics",
    "/feeds/" + "a" * 40 + "%00abc.ics",
    "/feeds/" + "a" * 40 + "%2Fabc.ics",
    "/feeds/" + "a" * 40 + "%FF%FE.ics",
    "/feeds/" + "ü" * 43 + ".ics",
    "/feeds/" + "a" * 40 + "+/=.ics",
    "/feeds/..%2F..%2Fv1%2Fcalendar.ics",
    "/feeds/%252e%252e%252f" + "a" * 40 + ".ics",
    "/feeds/" + "a" * 40 + "<script>.ics",
    "/feeds/a/b/" + "a" * 43 + ".ics",
    "/feeds",
    "/feeds/",
]


async def test_odd_addresses_are_404_and_never_asked(nats_url: str, feeds: FakeFeeds) -> None:
    async with gateway(nats_url) as client:
        responses = {path: await client.get(path) for path in ODD_PATHS}
    for path, response in responses.items():
        assert response.status_code == 404, (path, response.status_code, response.text)
        assert response.json()["error"]["code"] == "not_found", path
    assert feeds.queries == []


async def test_no_address_is_a_5xx(nats_url: str, feeds: FakeFeeds) -> None:
    rng = random.Random(5545)
    alphabet = string.printable + "äü中文\u0000\u200b\ufeff%/\\"
    paths = []
    for _ in range(300):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        paths.append("/feeds/" + quote(raw, safe=rng.choice(["", "/", "%", "-_~"])) + ".ics")
    async with gateway(nats_url) as client:
        statuses = {path: (await client.get(path)).status_code for path in paths}
    assert {s for s in statuses.values() if s >= 500} == set(), [p for p, s in statuses.items() if s >= 500]
    assert set(statuses.values()) <= {404}


async def test_without_commands_the_feed_is_503(nats_url: str) -> None:
    async with gateway(nats_url) as client:
        feed = await client.get(f"/feeds/{secrets.token_urlsafe(32)}.ics")
        created = await client.post("/v1/feeds", headers=auth("owner"))
    for response in (feed, created):
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "service_unavailable"


def test_feed_secrets_stay_out_of_access_logs() -> None:
    line = '127.0.0.1:5 - "GET /feeds/Zm9vYmFyYmF6cXV4cXV1eA.ics?x=1 HTTP/1.1" 200'
    assert redact_feed_secrets(line) == '127.0.0.1:5 - "GET /feeds/<redacted> HTTP/1.1" 200'
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/feeds/Zm9vYmFyYmF6cXV4cXV1eA.ics", "1.1", 200),
        None,
    )
    assert RedactFeedSecrets().filter(record)
    assert "Zm9v" not in record.getMessage()
    assert "/v1/feeds" in redact_feed_secrets('"POST /v1/feeds HTTP/1.1" 201')


# ---- against the real commands service ------------------------------------------------------------


NY = ZoneInfo("America/New_York")


@dataclass
class Stack:
    client: httpx.AsyncClient
    bus: Bus
    clock: FrozenClock

    async def execute(self, command: Any) -> CommandResult:
        return await self.bus.request(wire.COMMAND_EXECUTE, CommandRequest(command=command), timeout=15)

    async def create(self, user: str, **args: Any) -> CommandResult:
        env = Envelope(
            turn_id=uuid.uuid4().hex[:16],
            user_id=user,
            conversation_id="c",
            occurred_at=NOW,
            tz="America/New_York",
        )
        result = await self.execute(
            PrepareOrCreate(
                envelope=env, idempotency_key=uuid.uuid4().hex, args=PrepareOrCreateSchedule(**args)
            )
        )
        if result.status == "held" and result.stub is not None:
            result = await self.execute(
                MergeStub(
                    envelope=env,
                    idempotency_key=uuid.uuid4().hex,
                    command_id=result.stub.id,
                    patch=SlotPatch(),
                    confirm=True,
                )
            )
        assert result.status == "created", result
        return result


@pytest.fixture(scope="module")
async def stack(nats_url: str, database_url: str) -> AsyncIterator[Stack]:
    from calagent.commands.app import create_app as create_commands
    from calagent.timeparse.app import create_app as create_timeparse

    clock = FrozenClock(NOW)
    settings = Settings(NATS_URL=nats_url, DATABASE_URL=database_url, CALAGENT_AUTH_SECRET=SECRET)
    apps, buses = [], []
    for factory in (create_timeparse, create_commands):
        app = factory(settings, clock)
        bus = await start_service(app, nats_url, clock)
        apps.append(app)
        buses.append(bus)
    client_bus = await Bus.connect(nats_url, "agent", clock)
    try:
        async with gateway(nats_url, clock) as client:
            yield Stack(client, client_bus, clock)
    finally:
        await client_bus.close()
        for bus in buses:
            await bus.close()
        for app in apps:
            await app.stop()


def occurrences(ics: str, start: datetime, end: datetime) -> set[tuple[str, datetime, datetime]]:
    def instant(value: datetime | date) -> datetime:
        if not isinstance(value, datetime):
            value = datetime.combine(value, time(0), tzinfo=NY)
        return value.astimezone(UTC)

    return {
        (str(i["SUMMARY"]), instant(i.decoded("DTSTART")), instant(i.decoded("DTEND")))
        for i in recurring_ical_events.of(Calendar.from_ical(ics)).between(start, end)
    }


async def test_the_feed_end_to_end(stack: Stack) -> None:
    user = f"u-{uuid.uuid4().hex[:10]}"
    await stack.create(
        user,
        title="Weekly sync",
        date="2026-10-19",
        time="09:00",
        recurrence="FREQ=WEEKLY;BYDAY=MO;COUNT=8",
        reminder_minutes=10,
    )
    await stack.create(user, title="Retreat", date="2026-10-30", end_date="2026-11-01", all_day=True)
    headers = auth(user, "America/New_York")
    client = stack.client
    created = await client.post("/v1/feeds", headers=headers)
    assert created.status_code == 201, created.text
    url = created.json()["url"]
    served = await client.get(url)
    assert served.status_code == 200, served.text
    assert served.headers["content-type"] == "text/calendar; charset=utf-8"
    assert user not in served.text
    master = next(i for i in Calendar.from_ical(served.text).walk("VEVENT") if "RRULE" in i)
    rule: Any = master["RRULE"]
    assert (rule["FREQ"], rule["BYDAY"], rule["COUNT"]) == (["WEEKLY"], ["MO"], [8])
    assert [a.decoded("TRIGGER") for a in master.walk("VALARM")] == [timedelta(minutes=-10)]
    # The same feed as the signed-in export, and the same occurrences as GET /v1/events.
    signed_in = await client.get("/v1/calendar.ics", headers=headers)
    assert signed_in.text == served.text
    start, end = datetime(2026, 10, 1, tzinfo=NY), datetime(2027, 1, 1, tzinfo=NY)
    listed = await client.get(
        "/v1/events", params={"start": start.isoformat(), "end": end.isoformat()}, headers=headers
    )
    shown = {
        (
            e["title"],
            datetime.fromisoformat(e["start"]).astimezone(UTC),
            datetime.fromisoformat(e["end"]).astimezone(UTC),
        )
        for e in listed.json()["events"]
    }
    assert len(shown) == 9
    assert occurrences(served.text, start, end) == shown
    # Rotation: the old address is gone, the new one serves the same calendar.
    rotated = await client.post("/v1/feeds", headers=headers)
    assert_not_found(await client.get(url))
    again = await client.get(rotated.json()["url"])
    assert again.text == served.text
    # Another user's address never serves this calendar.
    other = await client.post("/v1/feeds", headers=auth(f"{user}-other"))
    theirs = await client.get(other.json()["url"])
    assert theirs.status_code == 200
    assert "Weekly sync" not in theirs.text
