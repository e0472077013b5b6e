"""Hand-written fakes of the command service's ports: an in-memory store and a tiny resolver."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from calagent.commands.bootstrap import bootstrap
from calagent.commands.config import CommandConfig
from calagent.commands.domain.calendars import NewCalendars
from calagent.commands.domain.changelog import ChangeContext, LoggedChange, Snapshot
from calagent.commands.domain.effects import Effects
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.people import Contact, SentProposal, Told
from calagent.commands.domain.settings import StoredSettings
from calagent.commands.ports import TurnReading
from calagent.commands.service import CommandService
from calagent.contracts.commands import ACTIVE_STUB_STATUSES, CommandResult, PlanOut
from calagent.contracts.settings import ShareEntry
from calagent.contracts.tasks import TaskOut
from calagent.contracts.time import (
    ChooseSlotRequest,
    ChosenSlot,
    ParsedReply,
    ParseReplyRequest,
    RangeRequest,
    RangeResult,
    ResolveRequest,
    ResolveResult,
    SlotPatch,
    SymbolError,
)
from calagent.runtime.clock import FrozenClock


@dataclass
class State:
    events: dict[str, tuple[Event, str | None]] = field(default_factory=dict)  # id -> (event, key)
    stubs: dict[str, Stub] = field(default_factory=dict)
    calendars: dict[str, list[str]] = field(default_factory=dict)
    keys: dict[tuple[str, str], CommandResult] = field(default_factory=dict)
    plans: dict[str, tuple[str, PlanOut]] = field(default_factory=dict)  # id -> (user, plan)
    feeds: dict[str, tuple[str, str]] = field(default_factory=dict)  # user -> (secret hash, zone)
    contacts: dict[str, list[Contact]] = field(default_factory=dict)  # user -> contacts
    mailboxes: dict[str, str] = field(default_factory=dict)  # user -> address
    settings: dict[str, StoredSettings] = field(default_factory=dict)
    sharing: dict[tuple[str, str], datetime] = field(default_factory=dict)  # (owner, with) -> since


class FakeEvents:
    """The user's event rows."""

    def __init__(self, state: State) -> None:
        self.state = state

    def _user_events(self, user_id: str) -> list[Event]:
        found = [e for e, _ in self.state.events.values() if e.user_id == user_id]
        return sorted(found, key=lambda e: (e.start, e.id))

    async def events_overlapping(
        self, user_id: str, start: datetime, end: datetime, *, incomplete_only: bool = False
    ) -> list[Event]:
        return [
            e
            for e in self._user_events(user_id)
            if (
                (e.start < end and (e.end > start or e.rrule is not None))
                or (e.recurrence_id is not None and e.recurrence_id < end)
            )
            and not (incomplete_only and e.completed)
        ]

    async def events_by_ids(self, user_id: str, ids: Sequence[str]) -> list[Event]:
        return [e for e in self._user_events(user_id) if e.id in ids]

    async def all_events(self, user_id: str) -> list[Event]:
        return self._user_events(user_id)

    async def insert_event(self, event: Event, *, turn_id: str, key: str | None) -> Event:
        self.state.events[event.id] = (event, key)
        return event

    async def get_event(self, user_id: str, event_id: str) -> Event | None:
        found = self.state.events.get(event_id)
        return found[0] if found is not None and found[0].user_id == user_id else None

    async def update_event(self, event: Event) -> None:
        self.state.events[event.id] = (event, self.state.events[event.id][1])

    async def delete_events(self, user_id: str, ids: Sequence[str]) -> int:
        gone = [i for i in ids if i in self.state.events and self.state.events[i][0].user_id == user_id]
        for event_id in gone:
            del self.state.events[event_id]
        return len(gone)

    async def series_overrides(self, user_id: str, series_id: str) -> list[Event]:
        return [e for e in self._user_events(user_id) if e.series_id == series_id]

    async def events_by_uid(self, user_id: str, uid: str) -> list[Event]:
        return [e for e, _ in self.state.events.values() if e.user_id == user_id and e.uid == uid]

    async def keep_object(self, user_id: str, event_id: str, ical: str) -> None:
        found = self.state.events.get(event_id)
        if found is not None and found[0].user_id == user_id:
            self.state.events[event_id] = (found[0].evolve(ical=ical), found[1])


class FakeStubs:
    """Stubs and plans."""

    def __init__(self, state: State) -> None:
        self.state = state

    async def get_stub(self, user_id: str, stub_id: str) -> Stub | None:
        stub = self.state.stubs.get(stub_id)
        return stub if stub is not None and stub.user_id == user_id else None

    async def active_stub(self, user_id: str) -> Stub | None:
        for stub in self.state.stubs.values():
            if stub.user_id == user_id and stub.status in ACTIVE_STUB_STATUSES and stub.waiting_since is None:
                return stub
        return None

    async def waiting_stubs(self, user_id: str) -> list[Stub]:
        # In the order inserted, as `seq` orders them.
        return [
            s
            for s in self.state.stubs.values()
            if s.user_id == user_id and s.status in ACTIVE_STUB_STATUSES and s.waiting_since is not None
        ]

    async def insert_stub(self, stub: Stub) -> None:
        assert stub.waiting_since is not None or await self.active_stub(stub.user_id) is None, (
            "one active stub per user"
        )
        self.state.stubs[stub.id] = stub

    async def update_stub(self, stub: Stub) -> None:
        self.state.stubs[stub.id] = stub

    async def insert_plan(self, user_id: str, plan: PlanOut, *, stub_id: str, key: str) -> None:
        self.state.plans[plan.id] = (user_id, plan)

    async def set_plan_status(self, user_id: str, plan_id: str, status: str, at: datetime) -> None:
        owner, plan = self.state.plans[plan_id]
        if owner == user_id:
            self.state.plans[plan_id] = (owner, plan.model_copy(update={"status": status}))

    async def plans(self, user_id: str) -> list[PlanOut]:
        return [p for owner, p in self.state.plans.values() if owner == user_id and p.status != "deleted"]

    async def delete_plan(self, user_id: str, plan_id: str, at: datetime) -> bool:
        found = self.state.plans.get(plan_id)
        if found is None or found[0] != user_id or found[1].status == "deleted":
            return False
        self.state.plans[plan_id] = (user_id, found[1].model_copy(update={"status": "deleted"}))
        return True


class FakeChanges:
    """The change log is the database's own (a trigger on events): the integration tests prove
    it; here it is empty, and offers carry no version."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.change: ChangeContext | None = None

    def log_changes_as(self, context: ChangeContext) -> None:
        self.change = context

    async def change_page(self, user_id: str, limit: int, before: str | None = None) -> list[LoggedChange]:
        return []

    async def get_change(self, user_id: str, change_id: str) -> LoggedChange | None:
        return None

    async def latest_change(self, user_id: str, turn_id: str | None = None) -> LoggedChange | None:
        return None

    async def mark_undone(self, user_id: str, change_id: str, by: str) -> None:
        return None

    async def current_rows(
        self, user_id: str, ids: Sequence[str], *, series: bool = False
    ) -> dict[str, Snapshot]:
        return {}

    async def restore_rows(
        self, user_id: str, plan: Sequence[tuple[str, Snapshot | None]], current: Mapping[str, Snapshot]
    ) -> None:
        return None


class FakePeople:
    """Contacts, mailboxes; mail is tested against PostgreSQL."""

    def __init__(self, state: State) -> None:
        self.state = state

    async def contacts(self, user_id: str) -> list[Contact]:
        return list(self.state.contacts.get(user_id, []))

    async def add_contact(self, user_id: str, contact: Contact) -> None:
        self.state.contacts.setdefault(user_id, []).append(contact)

    async def delete_contact(self, user_id: str, contact_id: str) -> bool:
        before = self.state.contacts.get(user_id, [])
        self.state.contacts[user_id] = [c for c in before if c.id != contact_id]
        return len(before) != len(self.state.contacts[user_id])

    async def mailbox(self, user_id: str, make: str | None = None, at: datetime | None = None) -> str | None:
        if make is not None:
            self.state.mailboxes.setdefault(user_id, make)
        return self.state.mailboxes.get(user_id)

    async def mailbox_owner(self, address: str) -> str | None:
        return next((u for u, a in self.state.mailboxes.items() if a.lower() == address.lower()), None)

    async def claim_inbound(self, user_id: str, message_id: str, sender: str, at: datetime) -> int | None:
        raise NotImplementedError("inbound mail is tested against PostgreSQL")

    async def settle_inbound(
        self, record_id: int, verdict: str, reason: str | None, method: str | None
    ) -> None:
        raise NotImplementedError("inbound mail is tested against PostgreSQL")

    async def queue_mail(
        self, user_id: str, sender: str, mails: Sequence[tuple[str, Any]], carrier: dict[str, str]
    ) -> None:
        raise NotImplementedError("mail is tested against PostgreSQL")

    async def insert_proposal(self, user_id: str, sent: SentProposal, at: datetime) -> None:
        raise NotImplementedError("proposals are tested against PostgreSQL")

    async def proposal_answered(self, user_id: str, message_ids: Sequence[str]) -> SentProposal | None:
        raise NotImplementedError("proposals are tested against PostgreSQL")

    async def get_proposal(self, user_id: str, proposal_id: str) -> SentProposal | None:
        raise NotImplementedError("proposals are tested against PostgreSQL")

    async def book_proposal(self, user_id: str, proposal_id: str, event_id: str, at: datetime) -> None:
        raise NotImplementedError("proposals are tested against PostgreSQL")

    async def note_zone(self, user_id: str, address: str, tz: str, at: datetime) -> None:
        raise NotImplementedError("mail is tested against PostgreSQL")

    async def zone_of(self, user_id: str, address: str) -> str | None:
        return None  # no mail reaches the fake

    async def last_told(self, user_id: str, uid: str) -> Told | None:
        return None  # no mail is queued by the fake

    def quiet_people(self) -> None:
        return None


class FakeSettings:
    """Calendars, settings, sharing, feeds."""

    def __init__(self, state: State) -> None:
        self.state = state

    async def calendars(self, user_id: str, defaults: Sequence[str]) -> list[str]:
        return self.state.calendars.setdefault(user_id, list(defaults))

    async def connected_calendars(self, user_id: str) -> list[str]:
        return []

    async def settings_of(self, user_ids: Sequence[str]) -> dict[str, StoredSettings]:
        return {u: self.state.settings[u] for u in user_ids if u in self.state.settings}

    async def save_settings(self, user_id: str, saved: StoredSettings, at: datetime) -> None:
        self.state.settings[user_id] = saved

    async def users_with_email(self, addresses: Sequence[str]) -> dict[str, list[str]]:
        wanted = {a.casefold() for a in addresses}
        found: dict[str, list[str]] = {}
        for user_id, saved in self.state.settings.items():
            if saved.email is not None and saved.email.casefold() in wanted:
                found.setdefault(saved.email.casefold(), []).append(user_id)
        return found

    async def share(self, owner_id: str, with_user_id: str, level: str, at: datetime) -> None:
        self.state.sharing.setdefault((owner_id, with_user_id), at)

    async def unshare(self, owner_id: str, with_user_id: str) -> bool:
        return self.state.sharing.pop((owner_id, with_user_id), None) is not None

    async def sharing_of(self, user_id: str) -> tuple[list[ShareEntry], list[ShareEntry]]:
        mine = [
            ShareEntry(user=w, created_at=at) for (o, w), at in self.state.sharing.items() if o == user_id
        ]
        theirs = [
            ShareEntry(user=o, created_at=at) for (o, w), at in self.state.sharing.items() if w == user_id
        ]
        return mine, theirs

    async def replace_feed(self, user_id: str, secret_hash: str, tz: str, at: datetime) -> None:
        self.state.feeds[user_id] = (secret_hash, tz)

    async def feed_owner(self, secret_hash: str) -> tuple[str, str] | None:
        for user_id, (stored, tz) in self.state.feeds.items():
            if stored == secret_hash:
                return user_id, tz
        return None


class FakeSync:
    """No connected calendar in the pure tests."""

    def __init__(self, state: State) -> None:
        self.state = state

    async def take_sync_notices(self, user_id: str, limit: int = 5) -> list[tuple[str, Event | TaskOut]]:
        return []  # no connected calendar in the pure tests


class FakeTasks:
    """No tasks in the pure tests of the commands' rooms (placement has its own)."""

    async def list_tasks(self, user_id: str, *, open_only: bool = False) -> list[Any]:
        return []

    async def tasks_by_ids(self, user_id: str, task_ids: Sequence[str]) -> list[Any]:
        return []

    async def uids_by_id(self, user_id: str, task_ids: Iterable[str]) -> dict[str, str]:
        return {}

    async def insert_task(self, user_id: str, task: Any, now: datetime) -> None:
        raise NotImplementedError("tasks are tested against PostgreSQL")

    async def update_task(self, user_id: str, task: Any, now: datetime) -> bool:
        return False

    async def delete_task(self, user_id: str, task_id: str) -> bool:
        return False

    async def blocks(self, user_id: str) -> list[Any]:
        return []

    async def created_at(self, user_id: str, task_ids: Sequence[str]) -> dict[str, datetime]:
        return {}


class FakeUnitOfWork:
    def __init__(self, store: FakeStore) -> None:
        self.store = store
        self.state = copy.deepcopy(store.state)
        self.committed = False
        self.events = FakeEvents(self.state)
        self.stubs = FakeStubs(self.state)
        self.changes = FakeChanges(self.state)
        self.people = FakePeople(self.state)
        self.settings = FakeSettings(self.state)
        self.sync = FakeSync(self.state)
        self.tasks = FakeTasks()
        self.has_open_tasks = False
        self.effects = Effects()

    @property
    def db_ms(self) -> float:
        return 0.5

    async def claim_key(self, user_id: str, key: str) -> CommandResult | None:
        return self.state.keys.get((user_id, key))

    async def store_result(
        self, user_id: str, key: str, result: CommandResult, *, logged_as: CommandResult | None = None
    ) -> CommandResult:
        # The change log is empty here (see below): no change is ever logged.
        self.state.keys[(user_id, key)] = result
        return result

    async def lock_user(self, user_id: str) -> None:
        return None

    async def commit(self) -> None:
        self.store.state = self.state
        self.committed = True

    async def rollback(self) -> None:
        return None


class FakeStore:
    def __init__(self) -> None:
        self.state = State()

    @asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[FakeUnitOfWork]:
        yield FakeUnitOfWork(self)

    async def turn_context(self, user_id: str, defaults: Sequence[str]) -> TurnReading:
        async with self.unit_of_work() as uow:
            stub = await uow.stubs.active_stub(user_id)
            reading = TurnReading(
                stub=stub,
                calendars=await uow.settings.calendars(user_id, defaults),
                notices=await uow.sync.take_sync_notices(user_id),
                conflicts=await uow.events.events_by_ids(user_id, stub.conflict_event_ids) if stub else [],
                db_ms=uow.db_ms,
            )
            await uow.commit()
        return reading


class FakeTime:
    """Just enough of the symbol grammar for these tests: D±N, WE, ISO dates, M±N months."""

    def _day(self, symbol: str, now: datetime) -> date | tuple[date, date] | None:
        today = now.date()
        if symbol == "D":
            return today
        if symbol.startswith(("D+", "D-")):
            return today + timedelta(days=int(symbol[1:]))
        if symbol == "WE":
            saturday = today + timedelta(days=6 - today.isoweekday())
            return saturday, saturday + timedelta(days=1)
        try:
            return date.fromisoformat(symbol)
        except ValueError:
            return None

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        tz = ZoneInfo(request.tz)
        day = self._day(request.date, request.now.astimezone(tz))
        if day is None:
            return ResolveResult(error=SymbolError(code="invalid_symbol", message=request.date))
        if isinstance(day, tuple):
            return ResolveResult(candidates=day)
        if request.time is None:
            return ResolveResult(date=day)
        hh, mm = request.time.split(":")
        return ResolveResult(start=datetime.combine(day, time(int(hh), int(mm)), tzinfo=tz))

    async def resolve_range(self, request: RangeRequest) -> RangeResult:
        tz = ZoneInfo(request.tz)
        now = request.now.astimezone(tz)

        def bound(symbol: str) -> datetime | None:
            if symbol.startswith("M"):
                month = now.month - 1 + int(symbol[1:] or 0)
                return datetime(now.year + month // 12, month % 12 + 1, 1, tzinfo=tz)
            day = self._day(symbol, now)
            if isinstance(day, date):
                return datetime.combine(day, time(0), tzinfo=tz)
            return None

        start, end = bound(request.start), bound(request.end)
        if start is None or end is None:
            return RangeResult(error=SymbolError(code="invalid_symbol", message="bad range"))
        return RangeResult(start=start, end=end)

    async def parse_reply(self, request: ParseReplyRequest) -> ParsedReply:
        return ParsedReply(patch=SlotPatch(), complete=False)

    async def choose_slot(self, request: ChooseSlotRequest) -> ChosenSlot:
        return ChosenSlot()


@dataclass
class Harness:
    service: CommandService
    store: FakeStore
    clock: FrozenClock

    @property
    def state(self) -> State:
        return self.store.state

    def events(self, user_id: str = "alice") -> list[Event]:
        return sorted(
            (e for e, _ in self.state.events.values() if e.user_id == user_id), key=lambda e: e.start
        )

    def stubs(self, user_id: str = "alice") -> dict[str, Any]:
        return {s.id: s.status for s in self.state.stubs.values() if s.user_id == user_id}


NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")  # a Thursday


@pytest.fixture
def harness() -> Harness:
    clock = FrozenClock(NOW)
    store = FakeStore()
    config = CommandConfig(
        calendars=NewCalendars(("工作", "家庭", "个人")),
        stub_ttl=timedelta(minutes=30),
        working_hours=(time(9), time(18)),
        holiday_country="CN",
    )
    return Harness(bootstrap(store, FakeTime(), config, clock).service, store, clock)
