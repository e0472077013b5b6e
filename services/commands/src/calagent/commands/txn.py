"""One write command's transaction and what it knows around it, shared by every write module."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from calagent.commands.ports import UnitOfWork
from calagent.contracts.commands import CommandError, CommandResult
from calagent.contracts.envelope import Envelope
from calagent.contracts.time import ResolveRequest, ResolveResult


def new_id() -> str:
    return uuid.uuid4().hex


def error_result(code: str, message: str) -> CommandResult:
    return CommandResult(
        status="error", error=CommandError.model_validate({"code": code, "message": message})
    )


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

    @property
    def user_id(self) -> str:
        return self.envelope.user_id

    @property
    def spoken_at(self) -> datetime:  # the moment the user spoke: "in the past" is relative to it
        return self.envelope.occurred_at
