"""The schedule-command service: the only writer of calendar state."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.commands.adapters.store import SqlStore
from calagent.commands.adapters.timeclient import BusTimeClient
from calagent.commands.adapters.zones import KvZones
from calagent.commands.bootstrap import bootstrap
from calagent.commands.caldav.accounts import Accounts
from calagent.commands.caldav.addresses import AddressRule, Guard
from calagent.commands.caldav.credentials import Vault, load_key
from calagent.commands.caldav.inbound import InboundSync
from calagent.commands.caldav.outbox import Deliverer
from calagent.commands.caldav.withheld import Holds
from calagent.commands.caldav.worker import SyncWorker
from calagent.commands.config import CommandConfig
from calagent.commands.handlers import transient_failures
from calagent.commands.people.contacts import People
from calagent.commands.people.inbox import Inbox, SettingsDirectory
from calagent.commands.people.invitations import Invitations
from calagent.commands.people.mailer import MailOutbox, SmtpTarget
from calagent.commands.service import CommandService
from calagent.commands.settings import SETTINGS_COMMANDS, SettingsDesk
from calagent.contracts import wire
from calagent.contracts.caldav import (
    AccountRequest,
    AccountResult,
    ConnectCalDav,
    DisconnectAccount,
    OutboxWake,
    SetDefaultCalendar,
)
from calagent.contracts.commands import CommandRequest, CommandResult
from calagent.contracts.people import FindMailbox, PeopleRequest, PeopleResult, ReceiveMail
from calagent.contracts.queries import QueryRequest, QueryResult
from calagent.contracts.settings import user_key
from calagent.runtime.bus import Bus, TopicPublisher, instance_id
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
        self.accounts: Accounts | None = None
        self.people: People | None = None
        self.settings_desk: SettingsDesk | None = None
        self.inbox: Inbox | None = None
        self.sync: SyncWorker | None = None
        self._wakes: TopicPublisher[OutboxWake] | None = None
        self._background: set[asyncio.Task[None]] = set()

    def wire(self, bus: Bus) -> None:
        bus.serve(wire.COMMAND_EXECUTE, self.on_command)
        bus.serve(wire.COMMAND_QUERY, self.on_query)
        bus.serve(wire.CALDAV_ACCOUNTS, self.on_account)
        bus.serve(wire.PEOPLE_MANAGE, self.on_people)
        bus.listen(wire.CALDAV_OUTBOX, self.on_outbox_wake)
        self._wakes = bus.topic_publisher(wire.CALDAV_OUTBOX)

    async def start(self, bus: Bus) -> None:
        database_url = self.settings.require_database()
        await upgrade_async(database_url, MIGRATIONS_DIR, SCHEMA)
        self.engine = make_engine(database_url)
        store = SqlStore(
            self.engine, on_outbox=self._outbox_waiting, before_commit=Invitations(self.clock).queue
        )
        root = bootstrap(store, BusTimeClient(bus), self.config, self.clock)
        self.service = root.service
        self.people = People(store, self.clock, self.settings.mail_domain)
        self.settings_desk = SettingsDesk(store, self.clock, KvZones(bus), self.config.working_hours)
        self.inbox = Inbox(
            store,
            root.rooms.answers,
            root.rooms.counters,
            root.rooms.proposing,
            self.clock,
            SettingsDirectory(),
            self.settings.default_tz,
        )
        vault = Vault(load_key(self.settings.credentials_key, self.settings.data_dir))
        guard = Guard(AddressRule.from_setting(self.settings.caldav_allow_networks))
        smtp = SmtpTarget.parse(self.settings.smtp_url) if self.settings.smtp_url else None
        self.accounts = Accounts(self.engine, vault, self.clock, self.config.calendars, guard)
        self.sync = SyncWorker(
            Deliverer(
                self.engine,
                vault,
                self.clock,
                self.config.stub_ttl,
                guard,
                max_attempts=self.settings.caldav_max_attempts,
                default_tz=self.settings.default_tz,
                after_sync=root.rooms.replans.after_sync,
            ),
            InboundSync(
                self.engine,
                vault,
                f"commands-{instance_id()}",
                self.settings.default_tz,
                guard,
                Holds(self.clock, self.config.stub_ttl),
                after_sync=root.rooms.replans.after_sync,
            ),
            sweep_s=self.settings.caldav_sweep_s,
            sync_s=self.settings.caldav_sync_s,
            others=(MailOutbox(self.engine, smtp),),
        )
        self.sync.start()

    def _inbox(self) -> Inbox:
        if self.inbox is None:
            raise RuntimeError("commands is not started")
        return self.inbox

    def _service(self) -> CommandService:
        if self.service is None:
            raise RuntimeError("commands is not started")
        return self.service

    async def on_command(self, request: CommandRequest) -> CommandResult:
        return await self._service().on_command(request)

    async def on_query(self, request: QueryRequest) -> QueryResult:
        return await self._service().on_query(request)

    async def health(self) -> dict[str, str]:
        return {"database": await database_state(self.engine)}

    def _outbox_waiting(self, users: Sequence[str]) -> None:
        """After a commit that queued deliveries: every replica's worker is told (this one too)."""
        if self.sync is not None:
            self.sync.wake()
        publisher = self._wakes
        if publisher is None:
            return
        for user_id in users:
            task = asyncio.ensure_future(publisher.publish(user_key(user_id), OutboxWake(user_id=user_id)))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def on_outbox_wake(self, _wake: OutboxWake) -> None:
        if self.sync is not None:
            self.sync.wake()

    async def on_account(self, request: AccountRequest) -> AccountResult:
        accounts = self.accounts
        if accounts is None:
            raise RuntimeError("commands is not started")
        command = request.command
        with transient_failures(f"account.{command.kind}"):
            if isinstance(command, ConnectCalDav):
                result = await accounts.connect(command)
                if result.account is not None and self.sync is not None:
                    self.sync.sync_soon(result.account.id)
                    self.sync.wake()  # the events written before the connection
                return result
            if isinstance(command, DisconnectAccount):
                return await accounts.disconnect(command)
            if isinstance(command, SetDefaultCalendar):
                return await accounts.set_default(command)
            return await accounts.listing(command)

    async def on_people(self, request: PeopleRequest) -> PeopleResult:
        people, desk = self.people, self.settings_desk
        if people is None or desk is None:
            raise RuntimeError("commands is not started")
        command = request.command
        with transient_failures(f"people.{command.kind}"):
            if isinstance(command, SETTINGS_COMMANDS):
                return await desk.run(command)
            if isinstance(command, FindMailbox):
                return PeopleResult(user_id=await self._inbox().owner(command.address))
            if isinstance(command, ReceiveMail):
                return PeopleResult(inbound=await self._inbox().receive(command))
            return await people.run(command)

    async def stop(self) -> None:
        if self.sync is not None:
            await self.sync.stop()
            self.sync = None
        if self.engine is not None:
            await self.engine.dispose()
            self.engine = None


def create_app(settings: Settings | None = None, clock: Clock | None = None) -> CommandsService:
    return CommandsService(settings or load_settings(), clock or SystemClock())
