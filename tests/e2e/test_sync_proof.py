"""The sync proven as vdirsyncer proves its own (contract §22): a Hypothesis state machine drives
our sync engine against a real Radicale and a real Xandikos (a server of its own per sequence: it
serves one principal) through the fault-injecting proxy (`DavProxy`) — chat
writes (through the commands service, as a turn's tools send them), writes and deletes by the
user's calendar app (straight to the server), faults switched on and off (a PUT refused 503 or
404, ETags that change on every read, no sync tokens, a listing that comes back empty, a server
that does not answer), syncs killed half-way, held offers answered either way — and checks after
every step:

- no UID twice, here or on the server;
- no retry loop: a step sends a bounded number of requests per object, and no delivery is
  refused more than `CALAGENT_CALDAV_MAX_ATTEMPTS` times;
- nothing the calendar stops showing is removed here without an offer the user can answer;

and at the end of every sequence, once the faults end: within two sync rounds the server and the
assistant hold the same events (but those held for the user's answer or refused and told), then
the offers are answered and two rounds later both sides are equal; every property the app gave an
object that nobody changed is still there, byte for byte.

`make test` runs a short sequence (`CALAGENT_SYNC_PROOF_EXAMPLES`, `CALAGENT_SYNC_PROOF_STEPS`);
`make sync-proof` a long one, and prints the sequences and steps it ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

import caldav
import pytest
from caldav.lib import error
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)
from icalendar import Calendar
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack
from calagent.commands.caldav.inbound import InboundSync
from calagent.contracts import wire
from calagent.contracts.commands import (
    CancelStub,
    CommandRequest,
    CommandResult,
    MergeStub,
    PrepareChange,
    PrepareOrCreate,
)
from calagent.contracts.envelope import Envelope
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import PrepareOrCreateSchedule, UpdateSchedule
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.davproxy import DavProxy
from calagent.devtools.testing.servers import Servers
from calagent.devtools.testing.xandikos import EmbeddedXandikos
from calagent.runtime.bus import instance_id
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import caldav_stack, radicale_server
from .test_caldav import commands_app

pytestmark = pytest.mark.e2e

T = TypeVar("T")

MAX_ATTEMPTS = 3
EXAMPLES = int(os.environ.get("CALAGENT_SYNC_PROOF_EXAMPLES", "6"))
STEPS = int(os.environ.get("CALAGENT_SYNC_PROOF_STEPS", "20"))
# Requests one step may send about one object: a delivery's PUT, the GET of a 412, a DELETE, the
# GET of a listing's load — a few each, never a loop.
REQUESTS_PER_OBJECT = 8
APP_TAG = "X-APP-TAG"
ZONE = "Asia/Shanghai"
FAULTS = ("put_503", "put_404_once", "flaky_etags", "no_sync_tokens", "empty_listing", "down")


@pytest.fixture(scope="module")
def radicale() -> Iterator[EmbeddedRadicale]:
    with radicale_server() as server:
        yield server


@pytest.fixture(scope="module")
async def stack(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, radicale: EmbeddedRadicale
) -> AsyncIterator[Stack]:
    async with caldav_stack(
        servers,
        database_url,
        scripted,
        allow_networks=radicale.network,
        settings_overrides={"CALAGENT_CALDAV_MAX_ATTEMPTS": MAX_ATTEMPTS},
    ) as system:
        yield system


class DavSide(Protocol):
    """The CalDAV server a sequence runs against: a calendar of the sequence's own, reached by the
    app directly and by the assistant through a proxy of the sequence's own (what an account of
    an earlier sequence still sends, a delivery that was in flight, reaches no later one)."""

    def open(self) -> tuple[App, str, str]:
        """The app, the assistant's user, and the server's root for the proxy."""
        ...

    def close(self) -> None: ...


class RadicaleSide:
    """One Radicale for every sequence, a user of its own per sequence."""

    def __init__(self, radicale: EmbeddedRadicale) -> None:
        self.radicale = radicale

    def open(self) -> tuple[App, str, str]:
        user, password = f"p-{uuid.uuid4().hex[:10]}", f"pw-{uuid.uuid4().hex[:8]}"
        self.radicale.add_user(user, password)
        calendar_url = make_calendar(self.radicale.url, user, password, "Personal")
        return App(self.radicale.user_url(user), user, password, calendar_url), user, self.radicale.url

    def close(self) -> None:
        pass


class XandikosSide:
    """A Xandikos of its own per sequence (one principal, no login): the assistant's user is new
    each time, the server's principal and calendar the same path on a new port."""

    def __init__(self) -> None:
        self.folder: tempfile.TemporaryDirectory[str] | None = None
        self.server: EmbeddedXandikos | None = None

    def open(self) -> tuple[App, str, str]:
        self.folder = tempfile.TemporaryDirectory(prefix="calagent-proof-xandikos-")
        self.server = EmbeddedXandikos(Path(self.folder.name))
        self.server.start()
        user = f"p-{uuid.uuid4().hex[:10]}"
        root = self.server.url.rsplit("/user/", 1)[0]
        return App(self.server.url, user, "unused", self.server.calendar_url), user, root

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.folder is not None:
            self.folder.cleanup()
        self.server, self.folder = None, None


@dataclass
class Tally:
    sequences: int = 0
    steps: int = 0
    requests: int = 0
    offers_answered: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    rules: Counter[str] = field(default_factory=Counter)


@dataclass
class Harness:
    """What every sequence shares: the running system, the server, the proxy, and the loop they
    run in (the machine runs in a thread of its own and hands its coroutines to that loop)."""

    stack: Stack
    side: DavSide
    host: str  # where the proxies listen: the address the stack may reach
    db: AsyncEngine
    loop: asyncio.AbstractEventLoop
    tally: Tally = field(default_factory=Tally)
    proxy: DavProxy = field(init=False)

    def run(self, work: Awaitable[T], timeout: float = 120.0) -> T:
        async def wrapped() -> T:
            return await work

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout)

    async def rows(self, sql: str, **params: Any) -> list[Any]:
        async with self.db.connect() as conn:
            return list((await conn.execute(text(sql), params)).all())


@dataclass
class App:
    """The user's calendar app: straight to the server, past the proxy."""

    url: str
    username: str
    password: str
    calendar_url: str

    def client(self) -> caldav.DAVClient:
        return caldav.DAVClient(url=self.url, username=self.username, password=self.password)

    def objects(self) -> dict[str, tuple[str, Calendar, str]]:
        """UID → (href, parsed object, raw text) of every object on the server."""
        with self.client() as client:
            calendar = caldav.Calendar(client=client, url=self.calendar_url)
            found: dict[str, tuple[str, Calendar, str]] = {}
            uids: Counter[str] = Counter()
            for obj in calendar.events():
                parsed = Calendar.from_ical(obj.data)
                [uid] = {str(v["UID"]) for v in parsed.walk("VEVENT")}
                uids[uid] += 1
                found[uid] = (str(obj.url), parsed, str(obj.data))
            doubled = [uid for uid, n in uids.items() if n > 1]
            assert not doubled, f"a UID twice on the server: {doubled}"
            return found

    def put(self, uid: str, body: str) -> None:
        with self.client() as client, busy_server():
            caldav.Calendar(client=client, url=self.calendar_url).save_event(body)

    def edit(self, href: str, change: str, n: int) -> None:
        with self.client() as client:
            obj = caldav.Event(
                client=client, url=href, parent=caldav.Calendar(client=client, url=self.calendar_url)
            )
            try:
                obj.load()
            except error.NotFoundError:
                return  # deleted since the step chose it
            cal = Calendar.from_ical(obj.data)
            for vevent in cal.walk("VEVENT"):
                if change == "summary":
                    vevent["SUMMARY"] = f"{vevent['SUMMARY']}·{n}"
                elif change == "location":
                    if "LOCATION" in vevent:
                        del vevent["LOCATION"]
                    vevent.add("LOCATION", f"room {n}")
                else:  # an hour later, the same length
                    start, end = vevent.decoded("DTSTART"), vevent.decoded("DTEND")
                    for name in ("DTSTART", "DTEND"):
                        del vevent[name]
                    vevent.add("DTSTART", start + timedelta(hours=1))
                    vevent.add("DTEND", end + timedelta(hours=1))
            obj.data = cal.to_ical().decode()
            with (
                contextlib.suppress(
                    error.ETagMismatchError, error.ScheduleTagMismatchError, error.NotFoundError
                ),
                busy_server(),
            ):
                # Our delivery changed it since the app read it: the app's own conflict, which it
                # answers by reading again (not this step's business). Xandikos's 412 carries no
                # ETag header, which the client library reads as a schedule tag's.
                obj.save(increase_seqno=False)

    def delete(self, href: str) -> None:
        with self.client() as client, contextlib.suppress(error.NotFoundError), busy_server():
            caldav.Event(
                client=client, url=href, parent=caldav.Calendar(client=client, url=self.calendar_url)
            ).delete()


# Xandikos keeps a calendar in a git working tree and takes its index's lock for every write
# without waiting for it (xandikos 0.4.10, store/git.py TreeGitStore: dulwich's `locked_index`
# raises FileLocked at once): a write of the app's that meets our delivery's is answered 423
# Locked (PUT), or 500 (DELETE: web.py does not catch that LockedError there), as this proof's
# runs saw. The app's write did not happen and the app would try it again later; not this
# step's business.
BUSY = frozenset({423, 500})


@contextlib.contextmanager
def busy_server() -> Iterator[None]:
    try:
        yield
    except (error.PutError, error.DeleteError) as exc:
        if exc.status not in BUSY:
            raise


def app_object(uid: str, day: int, n: int) -> str:
    start = datetime(2026, 11, 1, 1, tzinfo=UTC) + timedelta(days=day)
    stamp = "%Y%m%dT%H%M%SZ"
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//proof//app//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:{uid}\r\nDTSTAMP:20260924T000000Z\r\nDTSTART:{start.strftime(stamp)}\r\n"
        f"DTEND:{(start + timedelta(hours=1)).strftime(stamp)}\r\nSUMMARY:app {n}\r\n"
        f"DESCRIPTION:written by the app\\, keep me\r\nCATEGORIES:proof\r\n{APP_TAG}:{uid}\r\n"
        "BEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:soon\r\nTRIGGER:-PT15M\r\nEND:VALARM\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )


def make_machine(h: Harness) -> type[RuleBasedStateMachine]:
    class SyncMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            h.tally.sequences += 1
            self.app, self.user, root = h.side.open()
            h.proxy = DavProxy(root, host=h.host)
            h.run(h.proxy.start())
            self.n = 0
            self.account = h.run(self._connect(self.app.password))
            self.inbound = commands_app(h.stack).sync.inbound  # type: ignore[union-attr]
            self.mark = len(h.proxy.requests)
            self.answers: list[tuple[str, bool, str, str | None]] = []

        # ---- the system's doors ------------------------------------------------------------------

        async def _connect(self, password: str) -> str:
            response = await h.stack.client.post(
                "/v1/accounts/caldav",
                json={
                    "url": h.proxy.rebase(self.app.url),
                    "username": self.app.username,
                    "password": password,
                },
                headers=h.stack.headers(self.user),
            )
            assert response.status_code == 201, response.text
            account_id: str = response.json()["id"]
            for _ in range(200):  # the connection's own first sync, before any step
                [row] = await h.rows(
                    "select last_synced_at from commands.caldav_accounts where id = :a", a=account_id
                )
                if row.last_synced_at is not None:
                    return account_id
                await asyncio.sleep(0.05)
            raise AssertionError("the first sync did not come")

        def envelope(self) -> Envelope:
            return Envelope(
                turn_id=uuid.uuid4().hex,
                user_id=self.user,
                conversation_id="proof",
                occurred_at=h.stack.clock.now(),
                tz=ZONE,
                channel="api",
            )

        def command(self, command: Any) -> CommandResult:
            assert h.stack.probe is not None
            result: CommandResult = h.run(
                h.stack.probe.request(wire.COMMAND_EXECUTE, CommandRequest(command=command), timeout=60)
            )
            return result

        def key(self) -> str:
            self.n += 1
            return f"proof-{self.n}-{uuid.uuid4().hex[:6]}"

        def local(self) -> list[Any]:
            return h.run(
                h.rows(
                    "select id, uid, title, start_at, end_at, location, sync_state, ical from commands.events"
                    " where user_id = :u and series_id is null order by id",
                    u=self.user,
                )
            )

        def offers(self) -> list[Any]:
            return h.run(
                h.rows(
                    "select id from commands.stubs where user_id = :u and hold_reason = 'sync_conflict'"
                    " and status = 'held' order by seq",
                    u=self.user,
                )
            )

        def withheld(self) -> set[str]:
            found = h.run(
                h.rows(
                    "select c.withheld from commands.caldav_calendars c where c.account_id = :a"
                    " and c.withheld is not null",
                    a=self.account,
                )
            )
            return {i for row in found for i in row.withheld["ids"]}

        # ---- chat writes ---------------------------------------------------------------------------

        @rule(hour=st.integers(8, 18))
        def chat_create(self, hour: int) -> None:
            h.tally.rules["chat_create"] += 1
            self.n += 1
            day = (datetime(2026, 10, 1) + timedelta(days=self.n % 28)).date().isoformat()
            result = self.command(
                PrepareOrCreate(
                    envelope=self.envelope(),
                    idempotency_key=self.key(),
                    args=PrepareOrCreateSchedule(title=f"chat {self.n}", date=day, time=f"{hour:02d}:00"),
                    source="api",
                )
            )
            if result.status == "conflict" and result.stub is not None:
                self.command(
                    CancelStub(
                        envelope=self.envelope(), idempotency_key=self.key(), command_id=result.stub.id
                    )
                )

        def _change(self, event_id: str, update: UpdateSchedule | None) -> None:
            prepared = self.command(
                PrepareChange(
                    envelope=self.envelope(),
                    idempotency_key=self.key(),
                    action="update" if update is not None else "delete",
                    event_id=event_id,
                    update=update,
                )
            )
            if prepared.stub is None or prepared.status not in ("held", "conflict"):
                return  # gone meanwhile (a sync removed it): nothing to confirm
            self.command(
                MergeStub(
                    envelope=self.envelope(),
                    idempotency_key=self.key(),
                    command_id=prepared.stub.id,
                    patch=SlotPatch(),
                    confirm=True,
                )
            )

        # No preconditions on what the server or the database holds: Hypothesis must draw the
        # same steps again when it replays a sequence; a step with nothing to act on does nothing.
        @rule(pick=st.integers(0, 999), hour=st.integers(7, 19), place=st.booleans())
        def chat_update(self, pick: int, hour: int, place: bool) -> None:
            h.tally.rules["chat_update"] += 1
            events = self.local()
            if not events:
                return
            event = events[pick % len(events)]
            update = (
                UpdateSchedule(event_id=event.id, location=f"chat room {self.n}")
                if place
                else UpdateSchedule(event_id=event.id, time=f"{hour:02d}:30")
            )
            self._change(event.id, update)

        @rule(pick=st.integers(0, 999))
        def chat_delete(self, pick: int) -> None:
            h.tally.rules["chat_delete"] += 1
            events = self.local()
            if not events:
                return
            self._change(events[pick % len(events)].id, None)

        # ---- the calendar app ----------------------------------------------------------------------

        @rule(day=st.integers(0, 27))
        def app_create(self, day: int) -> None:
            h.tally.rules["app_create"] += 1
            self.n += 1
            uid = f"app-{self.n}-{uuid.uuid4().hex[:6]}"
            self.app.put(uid, app_object(uid, day, self.n))

        @rule(pick=st.integers(0, 999), change=st.sampled_from(["summary", "location", "time"]))
        def app_edit(self, pick: int, change: str) -> None:
            h.tally.rules["app_edit"] += 1
            objects = sorted(self.app.objects().values())
            if objects:
                self.n += 1
                self.app.edit(objects[pick % len(objects)][0], change, self.n)

        @rule(pick=st.integers(0, 999))
        def app_delete(self, pick: int) -> None:
            h.tally.rules["app_delete"] += 1
            objects = sorted(self.app.objects().values())
            if objects:
                self.app.delete(objects[pick % len(objects)][0])

        # ---- faults and rounds ---------------------------------------------------------------------

        @rule(fault=st.sampled_from(FAULTS))
        def fault_on(self, fault: str) -> None:
            h.tally.rules["fault_on"] += 1
            h.tally.faults[fault] += 1
            proxy = h.proxy
            if fault == "put_503":
                proxy.fail("PUT", None, 503)
            elif fault == "put_404_once":
                proxy.fail("PUT", r"\.ics$", 404, times=1)
            elif fault == "flaky_etags":
                proxy.flaky_etags = True
            elif fault == "no_sync_tokens":
                proxy.no_sync_tokens = True
            elif fault == "empty_listing":
                proxy.empty_listings = True
            else:
                proxy.down = True

        @rule()
        def faults_off(self) -> None:
            h.tally.rules["faults_off"] += 1
            h.proxy.clear()

        async def _round(self) -> None:
            """One sync round: what waits in the outbox is due now (the backoff's time passed),
            delivered, then the account read back."""
            async with h.db.begin() as conn:
                # SKIP LOCKED: a row a worker is delivering is left to it (waiting for it while it
                # waits for the resource's other rows would deadlock the two).
                await conn.execute(
                    text(
                        "update commands.caldav_outbox set not_before = clock_timestamp() where id in"
                        " (select id from commands.caldav_outbox where user_id = :u and delivered_at is null"
                        " for update skip locked)"
                    ),
                    {"u": self.user},
                )
            worker = commands_app(h.stack).sync
            assert worker is not None
            await worker.deliverer.deliver_due()
            for _ in range(100):
                if await self.inbound.sync_account(self.account) is not None or h.proxy.down:
                    return
                if not await self._leased():
                    return  # refused by the server (a fault): the round is over
                await asyncio.sleep(0.05)

        async def _leased(self) -> bool:
            [row] = await h.rows(
                "select lease_owner from commands.caldav_accounts where id = :a", a=self.account
            )
            return row.lease_owner is not None

        @rule()
        def sync_round(self) -> None:
            h.tally.rules["sync_round"] += 1
            h.run(self._round())

        @rule(after_ms=st.integers(0, 80))
        def sync_killed_half_way(self, after_ms: int) -> None:
            """A sync stopped at any point, its lease left as a killed process leaves it; the
            restarted service releases it before its first round."""
            h.tally.rules["sync_killed_half_way"] += 1

            async def killed() -> None:
                task = asyncio.ensure_future(self.inbound.sync_account(self.account))
                await asyncio.sleep(after_ms / 1000)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                gone = f"commands-{instance_id().rpartition(':')[0]}:{_gone_pid()}"
                async with h.db.begin() as conn:
                    await conn.execute(
                        text(
                            "update commands.caldav_accounts set lease_owner = :o,"
                            " lease_until = clock_timestamp() + interval '60 seconds' where id = :a"
                        ),
                        {"o": gone, "a": self.account},
                    )
                first = self.inbound
                restarted = InboundSync(
                    first.engine, first.vault, first.owner, ZONE, first.guard, first.holds
                )
                await restarted.release_stale()

            h.run(killed())

        @rule(confirm=st.booleans())
        def answer_offers(self, confirm: bool) -> None:
            h.tally.rules["answer_offers"] += 1
            for offer in self.offers():
                h.tally.offers_answered += 1
                if confirm:
                    answer = self.command(
                        MergeStub(
                            envelope=self.envelope(),
                            idempotency_key=self.key(),
                            command_id=offer.id,
                            patch=SlotPatch(),
                            confirm=True,
                        )
                    )
                else:
                    answer = self.command(
                        CancelStub(envelope=self.envelope(), idempotency_key=self.key(), command_id=offer.id)
                    )
                self.answers.append(
                    (offer.id, confirm, answer.status, answer.error.code if answer.error else None)
                )

        # ---- after every step ----------------------------------------------------------------------

        @invariant()
        def one_uid_once_here(self) -> None:
            uids = Counter(row.uid for row in self.local())
            doubled = [uid for uid, n in uids.items() if n > 1]
            assert not doubled, f"a UID twice here: {doubled}"

        @invariant()
        def no_retry_loop(self) -> None:
            seen = h.proxy.requests[self.mark :]
            self.mark = len(h.proxy.requests)
            h.tally.requests += len(seen)
            per_object = Counter(r.path for r in seen if r.path.endswith(".ics"))
            worst = max(per_object.values(), default=0)
            assert worst <= REQUESTS_PER_OBJECT, (
                f"{worst} requests about one object in one step: {per_object}"
            )
            [row] = h.run(
                h.rows(
                    "select coalesce(max(refusals), 0) as most,"
                    " count(*) filter (where delivered_at is null and refusals >= :m) as stuck"
                    " from commands.caldav_outbox where user_id = :u",
                    u=self.user,
                    m=MAX_ATTEMPTS,
                )
            )
            assert row.most <= MAX_ATTEMPTS and row.stuck == 0, row

        @invariant()
        def withheld_only_with_an_offer(self) -> None:
            found = h.run(
                h.rows(
                    "select c.withheld from commands.caldav_calendars c where c.account_id = :a"
                    " and c.withheld is not null",
                    a=self.account,
                )
            )
            for row in found:
                assert row.withheld["stub"] is not None, row.withheld

        # ---- the end of a sequence: the faults end, and both sides agree --------------------------

        def teardown(self) -> None:
            try:
                self.settle()
            finally:
                # Nothing is sent to an account being forgotten: the next sequence's server, on
                # the same proxy (and for Xandikos the same paths), hears nothing of this one.
                h.proxy.clear()
                h.run(self._disconnect())
                h.run(h.proxy.stop())
                h.side.close()

        async def _disconnect(self) -> None:
            response = await h.stack.client.delete(
                f"/v1/accounts/{self.account}", headers=h.stack.headers(self.user)
            )
            assert response.status_code == 204, response.text

        def settle(self) -> None:
            h.proxy.clear()
            h.run(self._round())
            h.run(self._round())
            self.agree(but=self.withheld() | self.offered() | self.refused())
            # Answered, an offer settles: at most a few rounds of answers, never an endless chain
            # of offers each answer makes again.
            for _ in range(4):
                if not self.offers():
                    break
                self.answer_offers(confirm=self.n % 2 == 0)
                h.run(self._round())
            if self.offers():
                for line in self.story():
                    print("STORY", line)
            assert not self.offers(), "offers keep coming back after they were answered"
            h.run(self._round())
            h.run(self._round())
            self.agree(but=self.refused())
            self.app_properties_kept()

        def story(self) -> list[Any]:
            """What the user was offered and what the outbox did, in order: a failure's context."""
            stubs = h.run(
                h.rows(
                    "select seq, id, title, status, hold_reason, waiting_since is not null as waiting,"
                    " change->>'action' as action, change->'gone_ids' as gone,"
                    " change->>'row_id' as row_id from commands.stubs where user_id = :u order by seq",
                    u=self.user,
                )
            )
            outbox = h.run(
                h.rows(
                    "select id, event_id, outcome, attempts, refusals, last_error from commands.caldav_outbox"
                    " where user_id = :u order by id",
                    u=self.user,
                )
            )
            return [tuple(r) for r in stubs] + [tuple(r) for r in outbox] + list(self.answers)

        def offered(self) -> set[str]:
            found = h.run(
                h.rows(
                    "select change from commands.stubs where user_id = :u and hold_reason = 'sync_conflict'"
                    " and status = 'held'",
                    u=self.user,
                )
            )
            ids = set()
            for row in found:
                change = row.change or {}
                ids.add(change.get("row_id"))
                ids.update(change.get("gone_ids", ()))
            return {i for i in ids if i}

        def refused(self) -> set[str]:
            return {row.id for row in self.local() if row.sync_state == "rejected"}

        def agree(self, but: set[str]) -> None:
            """The server and the assistant hold the same events, field by field, but for `but`
            (held for the user's answer, or refused by the server and told)."""
            server = self.app.objects()
            local = {row.uid: row for row in self.local()}
            skipped = {row.uid for row in local.values() if row.id in but}
            here = {uid: row for uid, row in local.items() if uid not in skipped}
            there = {uid: obj for uid, obj in server.items() if uid not in skipped}
            assert set(here) == set(there), (sorted(set(here) - set(there)), sorted(set(there) - set(here)))
            for uid, row in here.items():
                [vevent] = [v for v in there[uid][1].walk("VEVENT") if "RECURRENCE-ID" not in v]
                theirs = (
                    str(vevent["SUMMARY"]),
                    vevent.decoded("DTSTART"),
                    vevent.decoded("DTEND"),
                    str(vevent["LOCATION"]) if "LOCATION" in vevent else None,
                )
                assert (row.title, row.start_at, row.end_at, row.location) == theirs, uid

        def app_properties_kept(self) -> None:
            """What the app wrote that nobody changed is on the server as it wrote it, and in the
            object the assistant keeps to patch its next change into."""
            local = {row.uid: row for row in self.local()}
            for uid, (_, cal, _) in self.app.objects().items():
                if not uid.startswith("app-"):
                    continue
                [vevent] = cal.walk("VEVENT")
                assert str(vevent[APP_TAG]) == uid
                assert str(vevent["DESCRIPTION"]) == "written by the app, keep me"
                assert vevent.get("CATEGORIES").to_ical() == b"proof"
                assert [a.decoded("TRIGGER") for a in vevent.walk("VALARM")] == [timedelta(minutes=-15)]
                row = local.get(uid)
                if row is not None and row.ical is not None:
                    assert f"{APP_TAG}:{uid}" in row.ical

    return SyncMachine


def _gone_pid() -> int:
    """The pid of a child that has exited and been reaped: no process runs under it now."""
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.timeout(int(os.environ.get("CALAGENT_SYNC_PROOF_TIMEOUT", "300")))
@pytest.mark.parametrize("server", ["radicale", "xandikos"])
async def test_the_sync_converges_under_faults_without_loops_duplicates_or_loss(
    server: str, stack: Stack, radicale: EmbeddedRadicale, db: AsyncEngine
) -> None:
    side: DavSide = RadicaleSide(radicale) if server == "radicale" else XandikosSide()
    harness = Harness(stack, side, radicale.host, db, asyncio.get_running_loop())
    machine = make_machine(harness)
    chosen = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=os.environ.get("CALAGENT_SYNC_PROOF_RANDOM") != "1",
        database=None,
        print_blob=True,
        phases=list(Phase) if os.environ.get("CALAGENT_SYNC_PROOF_SHRINK") != "0" else [Phase.generate],
    )
    await asyncio.to_thread(run_state_machine_as_test, machine, settings=chosen)
    tally = harness.tally
    tally.steps = sum(tally.rules.values())
    print(
        f"\nsync proof ({server}): {tally.sequences} sequences, {tally.steps} steps, {tally.requests} requests "
        f"through the proxy, {tally.offers_answered} offers answered, faults {dict(tally.faults)}, "
        f"rules {dict(tally.rules)}"
    )
    assert tally.steps > 0
