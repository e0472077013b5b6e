"""What the command service needs from the outside world, as Protocols.

The application layer (`service.py`) talks only to these; the SQL store and the bus time client
implement them, and unit tests use hand-written in-memory fakes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from calagent.commands.domain.changelog import ChangeContext, LoggedChange, Snapshot
from calagent.commands.domain.effects import Effects
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.people import Contact, SentProposal, Told
from calagent.commands.domain.settings import StoredSettings
from calagent.contracts.commands import CommandResult, PlanOut
from calagent.contracts.settings import InvitationsFrom, ShareEntry
from calagent.contracts.tasks import TaskOut
from calagent.contracts.time import TimeService


class KeyInFlightError(Exception):
    """An idempotency key exists without a stored result: the first attempt has not finished."""


# The time service as this one calls it: the contract's own declaration.
TimePort = TimeService


class EventRows(Protocol):
    """The user's event rows (a series' master and overrides are rows too)."""

    async def events_overlapping(
        self, user_id: str, start: datetime, end: datetime, *, incomplete_only: bool = False
    ) -> list[Event]:
        """Rows with `start_at < end AND end_at > start`, plus series masters that start before
        `end` (their occurrences are expanded by the caller) and overrides whose slot is before
        `end`, wherever they were moved to; ordered by start."""
        ...

    async def events_by_ids(self, user_id: str, ids: Sequence[str]) -> list[Event]: ...

    async def all_events(self, user_id: str) -> list[Event]: ...

    async def insert_event(self, event: Event, *, turn_id: str, key: str | None) -> Event:
        """The row as stored (its defaults filled in). `key` None for rows written besides the
        command's own (an override, a split tail)."""
        ...

    async def get_event(self, user_id: str, event_id: str) -> Event | None:
        """A stored row of this user (locked for the transaction), or None: another user's id is
        indistinguishable from one that does not exist."""
        ...

    async def update_event(self, event: Event) -> None: ...

    async def delete_events(self, user_id: str, ids: Sequence[str]) -> int: ...

    async def series_overrides(self, user_id: str, series_id: str) -> list[Event]: ...

    async def events_by_uid(self, user_id: str, uid: str) -> list[Event]:
        """The user's rows of the object with this UID (master first)."""
        ...

    async def keep_object(self, user_id: str, event_id: str, ical: str) -> None: ...


class StubRows(Protocol):
    """Stubs (commands waiting for an answer) and the plans made from them."""

    async def get_stub(self, user_id: str, stub_id: str) -> Stub | None: ...

    async def active_stub(self, user_id: str) -> Stub | None:
        """The stub in an active status, whether or not its time has run out."""
        ...

    async def waiting_stubs(self, user_id: str) -> list[Stub]:
        """The offers from outside waiting beside the conversation, oldest first."""
        ...

    async def insert_stub(self, stub: Stub) -> None: ...

    async def update_stub(self, stub: Stub) -> None: ...

    async def insert_plan(self, user_id: str, plan: PlanOut, *, stub_id: str, key: str) -> None: ...

    async def set_plan_status(self, user_id: str, plan_id: str, status: str, at: datetime) -> None: ...

    async def plans(self, user_id: str) -> list[PlanOut]:
        """The user's plans that are not deleted, newest first."""
        ...

    async def delete_plan(self, user_id: str, plan_id: str, at: datetime) -> bool: ...


class ChangeLog(Protocol):
    """The change log (contract §15)."""

    def log_changes_as(self, context: ChangeContext) -> None:
        """The change the event rows this transaction writes from now on belong to."""
        ...

    async def change_page(self, user_id: str, limit: int, before: str | None = None) -> list[LoggedChange]:
        """The user's changes, newest first; `before`: only those older than that change."""
        ...

    async def get_change(self, user_id: str, change_id: str) -> LoggedChange | None:
        """One of the user's changes (locked), or None: another user's is indistinguishable."""
        ...

    async def latest_change(self, user_id: str, turn_id: str | None = None) -> LoggedChange | None:
        """The latest change by the assistant not undone yet (of that turn, when given)."""
        ...

    async def mark_undone(self, user_id: str, change_id: str, by: str) -> None: ...

    async def current_rows(
        self, user_id: str, ids: Sequence[str], *, series: bool = False
    ) -> dict[str, Snapshot]:
        """The rows stored now as the log records them, by id (locked); `series`: with overrides."""
        ...

    async def restore_rows(
        self, user_id: str, plan: Sequence[tuple[str, Snapshot | None]], current: Mapping[str, Snapshot]
    ) -> None:
        """Write rows back to the given snapshots (None: remove the row)."""
        ...


class PeopleRows(Protocol):
    """People (contract §16): contacts, the user's mailbox, received mail and mail to send."""

    async def contacts(self, user_id: str) -> list[Contact]: ...

    async def add_contact(self, user_id: str, contact: Contact) -> None: ...

    async def delete_contact(self, user_id: str, contact_id: str) -> bool:
        """False for an id that is not this user's (another user's is answered the same)."""
        ...

    async def mailbox(self, user_id: str, make: str | None = None, at: datetime | None = None) -> str | None:
        """The user's private address; when there is none and `make` is given, `make` becomes it."""
        ...

    async def mailbox_owner(self, address: str) -> str | None:
        """Whose private address this is."""
        ...

    async def claim_inbound(self, user_id: str, message_id: str, sender: str, at: datetime) -> int | None:
        """Record a received message; None when its Message-ID was received before."""
        ...

    async def settle_inbound(
        self, record_id: int, verdict: str, reason: str | None, method: str | None
    ) -> None: ...

    async def queue_mail(
        self, user_id: str, sender: str, mails: Sequence[tuple[str, Any]], carrier: dict[str, str]
    ) -> None: ...

    async def last_told(self, user_id: str, uid: str) -> Told | None:
        """What the people of the event `uid` were last sent; None before the first message."""
        ...

    def quiet_people(self) -> None:
        """This transaction's changes mail no attendee (an attendee's own answer is recorded)."""

    async def insert_proposal(self, user_id: str, sent: SentProposal, at: datetime) -> None: ...

    async def proposal_answered(self, user_id: str, message_ids: Sequence[str]) -> SentProposal | None:
        """The open proposal whose mail one of `message_ids` names (the newest, if several)."""
        ...

    async def get_proposal(self, user_id: str, proposal_id: str) -> SentProposal | None: ...

    async def book_proposal(self, user_id: str, proposal_id: str, event_id: str, at: datetime) -> None: ...

    async def note_zone(self, user_id: str, address: str, tz: str, at: datetime) -> None:
        """The zone a person's REPLY or COUNTER named, kept for the next proposal to them."""
        ...

    async def zone_of(self, user_id: str, address: str) -> str | None: ...


class SettingsRows(Protocol):
    """What users set: calendars, settings, free/busy sharing, feeds."""

    async def calendars(self, user_id: str, defaults: Sequence[str]) -> list[str]:
        """The user's calendar names in order, created from `defaults` on first use."""
        ...

    async def connected_calendars(self, user_id: str) -> list[str]:
        """Those of the user's calendar names a connected account brought (its display names)."""
        ...

    async def settings_of(self, user_ids: Sequence[str]) -> dict[str, StoredSettings]:
        """The saved settings of those of `user_ids` who saved any."""
        ...

    async def save_settings(self, user_id: str, saved: StoredSettings, at: datetime) -> None: ...

    async def users_with_email(self, addresses: Sequence[str]) -> dict[str, list[str]]:
        """Casefolded address → the users whose settings name it."""
        ...

    async def share(self, owner_id: str, with_user_id: str, level: str, at: datetime) -> None: ...

    async def unshare(self, owner_id: str, with_user_id: str) -> bool: ...

    async def sharing_of(self, user_id: str) -> tuple[list[ShareEntry], list[ShareEntry]]:
        """Whom `user_id` shares free/busy with, and who shares theirs with `user_id`."""
        ...

    async def replace_feed(self, user_id: str, secret_hash: str, tz: str, at: datetime) -> None:
        """Store the user's feed secret (its SHA-256 hex only) with the zone it is served in,
        replacing the previous one: the old address stops working."""
        ...

    async def feed_owner(self, secret_hash: str) -> tuple[str, str] | None:
        """(user id, zone) of the feed with this secret hash, or None."""
        ...


class SyncNotices(Protocol):
    """What the CalDAV outbox has to tell the user."""

    async def take_sync_notices(self, user_id: str, limit: int = 5) -> list[tuple[str, Event | TaskOut]]:
        """CalDAV deliveries refused or lost to the server's version, not told yet, with the
        event or task each was about; taking them marks them told."""
        ...


class TaskRows(Protocol):
    """The user's tasks (contract §21)."""

    async def list_tasks(self, user_id: str, *, open_only: bool = False) -> list[TaskOut]: ...

    async def tasks_by_ids(self, user_id: str, task_ids: Sequence[str]) -> list[TaskOut]: ...

    async def uids_by_id(self, user_id: str, task_ids: Iterable[str]) -> dict[str, str]:
        """The UIDs the given tasks' objects carry, by id (ours, `<id>@calagent`, until one came)."""
        ...

    async def insert_task(self, user_id: str, task: TaskOut, now: datetime) -> None: ...

    async def update_task(self, user_id: str, task: TaskOut, now: datetime) -> bool: ...

    async def delete_task(self, user_id: str, task_id: str) -> bool: ...

    async def blocks(self, user_id: str) -> list[Event]:
        """Every block of the user's tasks (events with a `task_id`), past ones too."""
        ...

    async def created_at(self, user_id: str, task_ids: Sequence[str]) -> dict[str, datetime]:
        """When each of the tasks that exist was made (an absent id: no such task)."""
        ...


class UnitOfWork(Protocol):
    """One database transaction and the repositories it has. Leaving it without `commit()` rolls
    everything back."""

    @property
    def events(self) -> EventRows: ...

    @property
    def stubs(self) -> StubRows: ...

    @property
    def changes(self) -> ChangeLog: ...

    @property
    def people(self) -> PeopleRows: ...

    @property
    def settings(self) -> SettingsRows: ...

    @property
    def sync(self) -> SyncNotices: ...

    @property
    def tasks(self) -> TaskRows: ...

    @property
    def effects(self) -> Effects:
        """What the transaction's writes recorded: handled at its commit and by the step after a
        write (`tasks.replans.Replans.after_write`)."""
        ...

    @property
    def db_ms(self) -> float: ...

    @property
    def has_open_tasks(self) -> bool:
        """Whether the user had an open task when `claim_key` claimed the key (read in its
        statement); True when no claim said (not known)."""
        ...

    async def claim_key(self, user_id: str, key: str) -> CommandResult | None:
        """Insert the idempotency row first. None: this transaction owns the key and holds the
        user's lock (`lock_user`), and the change named by `changes.log_changes_as` is already the
        one its event writes are logged as. Otherwise the result the first owner stored (waiting
        for it to commit if it is still running)."""
        ...

    async def store_result(
        self, user_id: str, key: str, result: CommandResult, *, logged_as: CommandResult | None = None
    ) -> CommandResult:
        """Store the key's result, and return it. With `logged_as` (the result naming this
        transaction's change), that one is stored and returned instead when the change altered
        anything the log keeps."""
        ...

    async def lock_user(self, user_id: str) -> None:
        """Serialise writes of one user (one active stub, conflict checks without races)."""
        ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...


class UserDirectory(Protocol):
    """What the user's settings say about them, read inside a unit of work: their own address
    (mail from it is the user's), their zone, and whose invitations they are offered."""

    async def own_address(self, uow: UnitOfWork, user_id: str) -> str | None: ...

    async def zone(self, uow: UnitOfWork, user_id: str) -> str | None: ...

    async def invitations_from(self, uow: UnitOfWork, user_id: str) -> InvitationsFrom: ...


@dataclass(frozen=True, slots=True)
class TurnReading:
    """What a turn's context reads: the user's active stub with the events it conflicts with, the
    user's calendars (the default first) and the sync notices now marked told."""

    stub: Stub | None
    calendars: list[str]
    notices: list[tuple[str, Event | TaskOut]] = field(default_factory=list)
    conflicts: list[Event] = field(default_factory=list)
    db_ms: float = 0.0
    # Those of `calendars` a connected account named: their names are someone else's words.
    connected: list[str] = field(default_factory=list)


class Store(Protocol):
    def unit_of_work(self) -> AbstractAsyncContextManager[UnitOfWork]: ...

    async def turn_context(self, user_id: str, defaults: Sequence[str]) -> TurnReading:
        """The active stub (as `StubRows.active_stub`), the calendars (made under `defaults` the
        first time, as `SettingsRows.calendars`) and the sync notices (taken, as
        `SyncNotices.take_sync_notices`), committed together: one statement on the user's path,
        with no transaction opened around it."""
        ...


class ZonePublisher(Protocol):
    """Where a user's saved zone is published after its commit, for the gateway to read before
    each turn without asking commands (None: the user saved none)."""

    async def publish_zone(self, user_id: str, tz: str | None) -> None: ...
