"""One write command's transaction and what it knows around it, shared by every write module."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from zoneinfo import ZoneInfo

from calagent.commands.domain.changelog import ChangeContext
from calagent.commands.ports import UnitOfWork
from calagent.contracts.commands import CommandError, CommandResult
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import QueryResult
from calagent.contracts.time import ResolveRequest, ResolveResult


def new_id() -> str:
    return uuid.uuid4().hex


def error_result(code: str, message: str) -> CommandResult:
    return CommandResult(
        status="error", error=CommandError.model_validate({"code": code, "message": message})
    )


def query_error(code: str, message: str) -> QueryResult:
    return QueryResult(error=CommandError.model_validate({"code": code, "message": message}))


@dataclass
class Txn:
    """What one command knows around it: its transaction, the user, the zone, both clocks."""

    uow: UnitOfWork
    envelope: Envelope
    key: str
    tz: ZoneInfo
    now: datetime  # the service clock: stub expiry
    # Resolutions started before the transaction opened, by the request they answer.
    prefetched: dict[ResolveRequest, asyncio.Task[ResolveResult]] = field(default_factory=dict)
    # The change this command's writes to events are logged as (contract §15).
    change: ChangeContext | None = None

    def log_as(self, context: ChangeContext | None = None, **details: str | None) -> ChangeContext:
        """Name (or refine: its scope, the change it undoes) the change this command's writes
        belong to, before they are written."""
        base = context or self.change
        assert base is not None
        self.change = replace(base, **details)  # type: ignore[arg-type]
        self.uow.changes.log_changes_as(self.change)
        return self.change

    @property
    def user_id(self) -> str:
        return self.envelope.user_id

    @property
    def turn_id(self) -> str | None:
        return self.envelope.turn_id

    @property
    def spoken_at(self) -> datetime:  # the moment the user spoke: "in the past" is relative to it
        return self.envelope.occurred_at
