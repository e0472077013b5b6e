"""Connected calendars (contract §12, §14): connecting a CalDAV account, listing, disconnecting, and
choosing the default calendar among the user's accounts.

The password crosses the bus once, in `ConnectCalDav`, from the gateway to commands, which stores
it encrypted; no reply and no other message carries it, and its field is kept out of `repr` so a
logged request does not show it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from calagent.contracts.base import WireModel
from calagent.contracts.envelope import Envelope


class ConnectCalDav(WireModel):
    kind: Literal["connect"] = "connect"
    envelope: Envelope
    url: str = Field(min_length=8, max_length=2000)
    username: str = Field(min_length=1, max_length=200)
    password: str = Field(min_length=1, max_length=500, repr=False)


class ListAccounts(WireModel):
    kind: Literal["list"] = "list"
    envelope: Envelope


class DisconnectAccount(WireModel):
    kind: Literal["disconnect"] = "disconnect"
    envelope: Envelope
    account_id: str = Field(min_length=1, max_length=64)


class SetDefaultCalendar(WireModel):
    """The calendar (of any of the user's accounts) that receives creates naming none."""

    kind: Literal["set_default"] = "set_default"
    envelope: Envelope
    account_id: str = Field(min_length=1, max_length=64)
    calendar_url: str = Field(min_length=1, max_length=2000)


AnyAccountCommand = ConnectCalDav | ListAccounts | DisconnectAccount | SetDefaultCalendar


class AccountRequest(WireModel):
    command: Annotated[AnyAccountCommand, Field(discriminator="kind")]


class RemoteCalendar(WireModel):
    name: str
    url: str
    color: str | None = None
    # The calendar that receives the events the assistant writes.
    default: bool = False


class AccountProblem(WireModel):
    """The account's last failure (contract §22), in our words: what failed and the HTTP status at
    most, never the server's own text."""

    kind: Literal["sync", "delivery"]
    message: str
    at: datetime


class AccountWarning(WireModel):
    """Something the user should know of a calendar (contract §22).

    `events_withheld`: events the calendar stopped showing, kept here until the offer `command_id`
    is answered; `missing` of them, `had`/`shows`: how many the calendar held and showed when it
    lost them at once (None: an object gone under a change of ours).
    `object_skipped`: one object (`href`, `uid`) that could not be read, not shown; `problem` says
    why in our words. `object_partly_read`: one shown as far as it could be read (`problem`: what
    was left out, e.g. a repeat rule only its first occurrence of which is shown)."""

    kind: Literal["events_withheld", "object_skipped", "object_partly_read"] = "events_withheld"
    calendar: str
    missing: int = 0
    had: int | None = None
    shows: int | None = None
    command_id: str | None = None
    href: str | None = None
    uid: str | None = None
    problem: str | None = None


class AccountSync(WireModel):
    """How far the account's sync is (issue 44 item 9): `first_sync` and `syncing` while one runs
    (the first of the account, or a later one), `idle` between them, with the counts of the last.
    `events`: the events the sync has read so far (a later sync reads only what changed)."""

    state: Literal["first_sync", "syncing", "idle"]
    calendars_done: int = 0
    calendars_total: int = 0
    events: int = 0


class AccountOut(WireModel):
    id: str
    url: str
    username: str
    calendars: tuple[RemoteCalendar, ...] = ()
    created_at: datetime
    last_synced_at: datetime | None = None
    # Health you can see (contract §22): the last failure, the deliveries still waiting and those
    # the server refused (kept a week), and what waits for the user's answer.
    last_error: AccountProblem | None = None
    pending_deliveries: int = 0
    rejected_deliveries: int = 0
    warnings: tuple[AccountWarning, ...] = ()
    # None before the account's first sync starts (and from a commands service older than this).
    sync: AccountSync | None = None


class AccountError(WireModel):
    code: Literal[
        "refused",
        "unreachable",
        "no_calendars",
        "not_found",
        "invalid_url",
        "address_not_allowed",
        "not_a_calendar",
    ]
    message: str


class AccountResult(WireModel):
    account: AccountOut | None = None
    accounts: tuple[AccountOut, ...] = ()
    deleted: bool = False
    error: AccountError | None = None


class OutboxWake(WireModel):
    """Committed writes wait in the CalDAV outbox: a worker should look now, not at its next sweep."""

    user_id: str = Field(min_length=1, max_length=128)
