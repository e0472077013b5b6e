"""The schedule-command service: the only writer of calendar state."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.commands.adapters.store import SqlStore
from calagent.commands.adapters.timeclient import BusTimeClient
from calagent.commands.handlers import Handlers
from calagent.commands.service import CommandConfig, CommandService
from calagent.contracts import wire
from calagent.contracts.commands import CommandRequest, CommandResult, QueryRequest, QueryResult
from calagent.runtime.bus import Bus
from calagent.runtime.clock import Clock, SystemClock
from calagent.runtime.db import database_state, make_engine, upgrade_async
from calagent.runtime.settings import Settings, load_settings

MIGRATIONS_DIR = Path(__file__).parent / "adapters" / "migrations"
SCHEMA = "commands"


class CommandsService:
    name = "commands"

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock
        self.config = CommandConfig.from_settings(settings)
        self.engine: AsyncEngine | None = None
        self.service: CommandService | None = None
        self.handlers: Handlers | None = None

    def wire(self, bus: Bus) -> None:
        bus.serve(wire.COMMAND_EXECUTE, self.on_command)
        bus.serve(wire.COMMAND_QUERY, self.on_query)

    async def start(self, bus: Bus) -> None:
        database_url = self.settings.require_database()
        await upgrade_async(database_url, MIGRATIONS_DIR, SCHEMA)
        self.engine = make_engine(database_url)
        self.service = CommandService(SqlStore(self.engine), BusTimeClient(bus), self.config, self.clock)
        self.handlers = Handlers(self.service)

    def _handlers(self) -> Handlers:
        if self.handlers is None:
            raise RuntimeError("commands is not started")
        return self.handlers

    async def on_command(self, request: CommandRequest) -> CommandResult:
        return await self._handlers().on_command(request)

    async def on_query(self, request: QueryRequest) -> QueryResult:
        return await self._handlers().on_query(request)

    async def health(self) -> dict[str, str]:
        return {"database": await database_state(self.engine)}

    async def stop(self) -> None:
        if self.engine is not None:
            await self.engine.dispose()
            self.engine = None


def create_app(settings: Settings | None = None, clock: Clock | None = None) -> CommandsService:
    return CommandsService(settings or load_settings(), clock or SystemClock())
