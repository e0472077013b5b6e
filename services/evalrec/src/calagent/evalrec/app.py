"""The eval recorder: turn records in from JetStream, timelines and reports out over request-reply.

It sits beside the hot path, never on it: the agent publishes each turn's record (the gateway's
receive segment included, from the stamps the turn carried) and moves on, and no online decision
ever waits for or reads anything from here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.contracts import wire
from calagent.contracts.evalrec import (
    ReportRequest,
    ReportResult,
    TimelineRequest,
    TimelineResult,
    UsageRequest,
    UsageResult,
)
from calagent.contracts.turns import TurnRecord
from calagent.evalrec.adapters.models import SCHEMA
from calagent.evalrec.adapters.repository import SqlTurnRepository
from calagent.evalrec.domain.ports import TurnRepository
from calagent.evalrec.domain.report import build_report
from calagent.evalrec.domain.usage import first_day, summarize_usage
from calagent.runtime.bus import Bus, RetryPolicy
from calagent.runtime.clock import Clock, SystemClock
from calagent.runtime.db import database_state, make_engine, upgrade_async
from calagent.runtime.settings import Settings, load_settings

log = logging.getLogger("calagent.evalrec")

MIGRATIONS_DIR = Path(__file__).parent / "adapters" / "migrations"

# A report reads the newest turns only, so its cost stays flat however long the system has run.
REPORT_WINDOW_TURNS = 20_000
MAX_CANDIDATES = 1_000
# A database outage is waited out with backoff; a record still failing after five deliveries is
# dead-lettered.
RECORD_POLICY = RetryPolicy(max_deliver=5, ack_wait=180.0)


class EvalrecService:
    name = "evalrec"

    def __init__(self, settings: Settings, clock: Clock, repository: TurnRepository | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.repository = repository
        self._engine: AsyncEngine | None = None

    def wire(self, bus: Bus) -> None:
        bus.consume(wire.TURN_RECORDED, self.on_turn_recorded, policy=RECORD_POLICY)
        bus.serve(wire.EVALREC_TIMELINE, self.on_timeline)
        bus.serve(wire.EVALREC_REPORT, self.on_report)
        bus.serve(wire.EVALREC_USAGE, self.on_usage)

    async def start(self, bus: Bus) -> None:
        if self.repository is None:
            database_url = self.settings.require_database()
            await upgrade_async(database_url, MIGRATIONS_DIR, SCHEMA)
            self._engine = make_engine(database_url, pool_size=5)
            self.repository = SqlTurnRepository(self._engine)

    async def health(self) -> dict[str, str]:
        return {"database": await database_state(self._engine)}

    async def stop(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    def _repo(self) -> TurnRepository:
        if self.repository is None:
            raise RuntimeError("evalrec is not started")
        return self.repository

    async def on_turn_recorded(self, record: TurnRecord) -> None:
        # A database error propagates: the bus naks and JetStream redelivers later, and the
        # idempotent insert makes that redelivery safe.
        if not await self._repo().save_turn(record, self.clock.now()):
            log.info("turn %s was already recorded", record.envelope.turn_id)

    async def on_timeline(self, request: TimelineRequest) -> TimelineResult:
        return TimelineResult(timeline=await self._repo().timeline(request.turn_id, request.user_id))

    async def on_report(self, request: ReportRequest) -> ReportResult:
        facts = await self._repo().recent_turns(REPORT_WINDOW_TURNS)
        limit = min(max(request.limit, 0), MAX_CANDIDATES)
        return ReportResult(report=build_report(facts, candidates=request.candidates, limit=limit))

    async def on_usage(self, request: UsageRequest) -> UsageResult:
        today = self.clock.now().astimezone(ZoneInfo(request.tz)).date()
        since = first_day(today, request.days)
        facts = await self._repo().usage(since, request.user_id)
        rows, total = summarize_usage(facts, request.by)
        return UsageResult(since=since.isoformat(), rows=tuple(rows), total=total)


def create_app(settings: Settings | None = None, clock: Clock | None = None) -> EvalrecService:
    return EvalrecService(settings or load_settings(), clock or SystemClock())
