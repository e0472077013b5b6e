"""What the command service needs from the outside world, as Protocols.

The application layer (`service.py`) talks only to these; the SQL store and the bus time client
implement them, and unit tests use hand-written in-memory fakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol

from calagent.commands.domain.model import Event, Stub
from calagent.contracts.commands import CommandResult
from calagent.contracts.time import RangeRequest, RangeResult, ResolveRequest, ResolveResult


class KeyInFlightError(Exception):
    """An idempotency key exists without a stored result: the first attempt has not finished."""


class TimePort(Protocol):
    async def resolve(self, request: ResolveRequest) -> ResolveResult: ...

    async def resolve_range(self, request: RangeRequest) -> RangeResult: ...


class UnitOfWork(Protocol):
    """One database transaction. Leaving it without `commit()` rolls everything back."""

    @property
    def db_ms(self) -> float: ...

    async def claim_key(self, user_id: str, key: str) -> CommandResult | None:
        """Insert the idempotency row first. None: this transaction owns the key. Otherwise the
        result the first owner stored (waiting for it to commit if it is still running)."""
        ...

    async def store_result(self, user_id: str, key: str, result: CommandResult) -> None: ...

    async def lock_user(self, user_id: str) -> None:
        """Serialise writes of one user (one active stub, conflict checks without races)."""
        ...

    async def calendars(self, user_id: str, defaults: Sequence[str]) -> list[str]:
        """The user's calendar names in order, created from `defaults` on first use."""
        ...

    async def get_stub(self, user_id: str, stub_id: str) -> Stub | None: ...

    async def active_stub(self, user_id: str) -> Stub | None:
        """The stub in an active status, whether or not its time has run out."""
        ...

    async def insert_stub(self, stub: Stub) -> None: ...

    async def update_stub(self, stub: Stub) -> None: ...

    async def events_overlapping(
        self, user_id: str, start: datetime, end: datetime, *, incomplete_only: bool = False
    ) -> list[Event]:
        """Events with `start_at < end AND end_at > start`, ordered by start."""
        ...

    async def events_by_ids(self, user_id: str, ids: Sequence[str]) -> list[Event]: ...

    async def all_events(self, user_id: str) -> list[Event]: ...

    async def insert_event(self, event: Event, *, turn_id: str, key: str) -> None: ...

    async def commit(self) -> None: ...


class Store(Protocol):
    def unit_of_work(self) -> AbstractAsyncContextManager[UnitOfWork]: ...
