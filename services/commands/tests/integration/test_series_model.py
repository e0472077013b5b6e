"""Random sequences of series creates, updates and deletes, applied both to the command service
(in-process, against real PostgreSQL) and to the reference model in `series_model.py` (RFC 5545
on a VCALENDAR, expanded by `recurring-ical-events`). After every step the occurrences over the
window (start, end, title) are equal, and so are the receipts: a create's first occurrence, an
update's before and after, a delete's count. A change the model refuses, the service refuses too
(`inexpressible_change`) and nothing changes.

`make test` runs a short, derandomized profile; `CALAGENT_SERIES_EXAMPLES=2000` runs a long one."""

from __future__ import annotations

import asyncio
import itertools
import os
import time as clock_time
import uuid
from collections.abc import Coroutine
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, ClassVar, TypeVar
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from calagent.commands.adapters.store import SqlStore
from calagent.commands.app import MIGRATIONS_DIR
from calagent.commands.bootstrap import bootstrap
from calagent.commands.config import CommandConfig
from calagent.commands.domain.calendars import NewCalendars
from calagent.contracts.commands import CommandResult, EventOut, MergeStub, PrepareChange, PrepareOrCreate
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import QueryRange
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
from calagent.contracts.tools import PrepareOrCreateSchedule, UpdateSchedule
from calagent.runtime.clock import FrozenClock
from calagent.runtime.db import make_engine, upgrade_async

from .series_model import DAY_NAMES, Ask, Model, Occurrence, Refused

pytestmark = pytest.mark.integration

TZ = ZoneInfo("America/New_York")  # a DST change (Nov 1) inside the window
NOW = datetime(2026, 9, 24, 10, tzinfo=TZ)
WINDOW = (datetime(2026, 9, 20, tzinfo=TZ), datetime(2027, 2, 1, tzinfo=TZ))
TITLES = ("组会", "standup", "review")
EXAMPLES = int(os.environ.get("CALAGENT_SERIES_EXAMPLES", "40"))
T = TypeVar("T")


class IsoDates:
    """The time service, for ISO dates only: what this test sends."""

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        tz = ZoneInfo(request.tz)
        try:
            day = date.fromisoformat(request.date)
        except ValueError:
            return ResolveResult(error=SymbolError(code="invalid_symbol", message=request.date))
        if request.time is None:
            return ResolveResult(date=day)
        return ResolveResult(start=datetime.combine(day, time.fromisoformat(request.time), tzinfo=tz))

    async def resolve_range(self, request: RangeRequest) -> RangeResult:
        return RangeResult(error=SymbolError(code="invalid_symbol", message="not used"))

    async def parse_reply(self, request: ParseReplyRequest) -> ParsedReply:
        return ParsedReply(patch=SlotPatch(), complete=False)

    async def choose_slot(self, request: ChooseSlotRequest) -> ChosenSlot:
        return ChosenSlot()


class Driver:
    """The command service in-process on its own event loop, so the state machine stays sync."""

    def __init__(self, database_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.run(upgrade_async(database_url, MIGRATIONS_DIR, "commands"))
        self.engine = make_engine(database_url)
        config = CommandConfig(
            calendars=NewCalendars(("工作",)),
            stub_ttl=timedelta(days=365),
            working_hours=(time(9), time(18)),
            holiday_country="CN",
        )
        self.service = bootstrap(SqlStore(self.engine), IsoDates(), config, FrozenClock(NOW)).service
        self.keys = itertools.count()
        self.steps = 0
        self.sequences = 0

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)

    def close(self) -> None:
        self.run(self.engine.dispose())
        self.loop.close()

    def envelope(self, user: str) -> Envelope:
        return Envelope(
            turn_id=uuid.uuid4().hex[:16], user_id=user, conversation_id="c", occurred_at=NOW, tz=TZ.key
        )

    def key(self) -> str:
        return f"k{next(self.keys)}"

    def execute(self, command: Any) -> CommandResult:
        return self.run(self.service.execute(command))

    def confirm(self, user: str, result: CommandResult) -> CommandResult:
        """Say yes until it is done (a plan, then perhaps a conflict offer)."""
        for _ in range(3):
            if result.status not in ("held", "conflict"):
                return result
            assert result.stub is not None
            result = self.execute(
                MergeStub(
                    envelope=self.envelope(user),
                    idempotency_key=self.key(),
                    command_id=result.stub.id,
                    patch=SlotPatch(),
                    confirm=True,
                )
            )
        return result

    def occurrences(self, user: str) -> list[EventOut]:
        found = self.run(
            self.service.query(QueryRange(envelope=self.envelope(user), start_at=WINDOW[0], end_at=WINDOW[1]))
        )
        return sorted(found.events, key=key_of)


def key_of(event: EventOut | Occurrence) -> tuple[datetime, datetime, str]:
    return (event.start.astimezone(UTC), event.end.astimezone(UTC), event.title)


def rule_text(rule: dict[str, list[Any]]) -> str:
    parts = []
    for name in ("FREQ", "INTERVAL", "BYDAY", "BYMONTHDAY", "COUNT", "UNTIL"):
        if name in rule:
            value = rule[name][0] if name == "UNTIL" else ",".join(str(v) for v in rule[name])
            if isinstance(value, date):
                value = value.strftime("%Y%m%d")
            parts.append(f"{name}={value}")
    return ";".join(parts)


series_kinds = st.sampled_from(("daily", "weekly", "weekly2", "monthly", "monthly_day"))
clocks = st.builds(time, st.integers(7, 19), st.sampled_from((0, 30)))


class SeriesEdits(RuleBasedStateMachine):
    driver: ClassVar[Driver]

    def __init__(self) -> None:
        super().__init__()
        self.user = f"u-{uuid.uuid4().hex[:10]}"
        self.model = Model(TZ)
        self.driver.sequences += 1

    def step(self) -> None:
        self.driver.steps += 1

    # ---- picking an occurrence both sides agree on ---------------------------------------------

    def pick(self, data: st.DataObject) -> tuple[Occurrence, EventOut] | None:
        mine = self.model.expand(*WINDOW)
        counts: dict[Any, int] = {}
        for occurrence in mine:
            counts[occurrence.key] = counts.get(occurrence.key, 0) + 1
        unique = [o for o in mine if counts[o.key] == 1]
        if not unique:
            return None
        chosen = data.draw(st.sampled_from(unique), label="occurrence")
        [theirs] = [e for e in self.driver.occurrences(self.user) if key_of(e) == chosen.key]
        return chosen, theirs

    # ---- rules ------------------------------------------------------------------------------------

    @precondition(lambda self: len(self.model.uids()) < 3)
    @rule(
        kind=series_kinds,
        first=st.dates(date(2026, 9, 28), date(2026, 11, 20)),
        clock=clocks,
        minutes=st.sampled_from((30, 60, 90)),
        interval=st.sampled_from((1, 1, 2)),
        end=st.one_of(st.none(), st.integers(2, 12), st.integers(15, 150).map(lambda d: timedelta(days=d))),
        title=st.sampled_from(TITLES),
    )
    def create(
        self, kind: str, first: date, clock: time, minutes: int, interval: int, end: Any, title: str
    ) -> None:
        self.step()
        if kind.startswith("monthly"):
            first = first.replace(day=min(first.day, 28))
        rule: dict[str, list[Any]] = {
            "FREQ": [{"daily": "DAILY", "weekly": "WEEKLY", "weekly2": "WEEKLY"}.get(kind, "MONTHLY")]
        }
        if interval > 1 and not kind.startswith("monthly"):
            rule["INTERVAL"] = [interval]
        if kind == "weekly":
            rule["BYDAY"] = [DAY_NAMES[first.weekday()]]
        elif kind == "weekly2":
            rule["BYDAY"] = [DAY_NAMES[first.weekday()], DAY_NAMES[(first.weekday() + 3) % 7]]
        elif kind == "monthly_day":
            rule["BYMONTHDAY"] = [first.day]
        if isinstance(end, int):
            rule["COUNT"] = [end]
        elif isinstance(end, timedelta):
            rule["UNTIL"] = [first + end]
        text = rule_text(rule)
        result = self.driver.execute(
            PrepareOrCreate(
                envelope=self.driver.envelope(self.user),
                idempotency_key=self.driver.key(),
                args=PrepareOrCreateSchedule(
                    title=title,
                    date=first.isoformat(),
                    time=clock.strftime("%H:%M"),
                    duration_minutes=minutes,
                    recurrence=text,
                ),
            )
        )
        result = self.driver.confirm(self.user, result)
        assert result.status == "created", result
        if "UNTIL" in rule:
            # RFC 5545: with a zoned DTSTART, UNTIL is UTC; the user's day ends at its last second.
            local_end = datetime.combine(rule["UNTIL"][0], time(23, 59, 59), tzinfo=TZ)
            rule["UNTIL"] = [local_end.astimezone(UTC)]
        uid = self.model.create(title, datetime.combine(first, clock, tzinfo=TZ), minutes, rule)
        [first_one, *_] = sorted(
            (o for o in self.model.expand(*WINDOW) if o.uid == uid), key=lambda o: o.start
        )
        assert result.event is not None
        assert key_of(result.event) == first_one.key

    @rule(
        data=st.data(),
        scope=st.sampled_from(("this", "following", "all")),
        title=st.one_of(st.none(), st.sampled_from((*TITLES, "评审"))),
        shift=st.one_of(st.none(), st.integers(-6, 6).filter(bool)),
        clock=st.one_of(st.none(), clocks),
        minutes=st.one_of(st.none(), st.sampled_from((30, 60, 120))),
    )
    def update(
        self,
        data: st.DataObject,
        scope: str,
        title: str | None,
        shift: int | None,
        clock: time | None,
        minutes: int | None,
    ) -> None:
        picked = self.pick(data)
        if picked is None or (title, shift, clock, minutes) == (None, None, None, None):
            return
        self.step()
        occurrence, event = picked
        day = occurrence.start.date() + timedelta(days=shift) if shift else None
        ask = Ask(title=title, day=day, clock=clock, minutes=minutes)
        snapshot = self.model.cal.to_ical()
        uids = self.model._uids
        try:
            before, after = self.model.update(occurrence.uid, occurrence.slot, scope, ask)
            refused = False
        except Refused:
            self.model.cal = type(self.model.cal).from_ical(snapshot)
            self.model._uids = uids
            refused = True
        update = UpdateSchedule(
            event_id=event.id,
            title=title,
            date=day.isoformat() if day else None,
            time=clock.strftime("%H:%M") if clock else None,
            duration_minutes=minutes,
        )
        prepared = self.driver.execute(
            PrepareChange(
                envelope=self.driver.envelope(self.user),
                idempotency_key=self.driver.key(),
                action="update",
                event_id=event.id,
                update=update,
                scope=scope,
            )
        )
        if refused:
            assert prepared.status == "error", prepared
            assert prepared.error is not None and prepared.error.code == "inexpressible_change", prepared
            return
        done = self.driver.confirm(self.user, prepared)
        assert done.status == "updated", done
        assert done.before is not None and done.event is not None
        assert key_of(done.before) == before.key
        assert key_of(done.event) == after.key

    @rule(data=st.data(), scope=st.sampled_from(("this", "following", "all")))
    def delete(self, data: st.DataObject, scope: str) -> None:
        picked = self.pick(data)
        if picked is None:
            return
        self.step()
        occurrence, event = picked
        gone = self.model.delete(occurrence.uid, occurrence.slot, scope)
        prepared = self.driver.execute(
            PrepareChange(
                envelope=self.driver.envelope(self.user),
                idempotency_key=self.driver.key(),
                action="delete",
                event_id=event.id,
                scope=scope,
            )
        )
        assert prepared.stub is not None and prepared.stub.change is not None, prepared
        assert prepared.stub.change.removed_count == gone
        done = self.driver.confirm(self.user, prepared)
        assert done.status == "deleted", done
        assert done.removed_count == gone

    @invariant()
    def the_calendars_agree(self) -> None:
        mine = [o.key for o in self.model.expand(*WINDOW)]
        theirs = [key_of(e) for e in self.driver.occurrences(self.user)]
        assert theirs == sorted(mine)


@pytest.mark.timeout(0 if EXAMPLES > 100 else 300)
def test_series_edits_agree_with_the_rfc_5545_reference_model(database_url: str) -> None:
    driver = Driver(database_url)
    SeriesEdits.driver = driver
    started = clock_time.perf_counter()
    try:
        run_state_machine_as_test(
            SeriesEdits,
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=12,
                deadline=None,
                derandomize=EXAMPLES <= 100,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        elapsed = clock_time.perf_counter() - started
        print(f"series model: {driver.sequences} sequences, {driver.steps} steps, {elapsed:.0f} s")
        driver.close()
