"""Where an event may go: the user's day symbols resolved by the time service, the events a new
place would overlap, the calendars and the organizer address a write uses. Built by `bootstrap` and
handed to what prepares creates, changes and offers, so none of them reaches back into it."""

from __future__ import annotations

from datetime import date, datetime

from calagent.commands.config import CommandConfig
from calagent.commands.domain.model import Event
from calagent.commands.domain.overlap import find_conflicts
from calagent.commands.domain.people import new_mail_address
from calagent.commands.ports import TimePort
from calagent.commands.reads import ALL_DAY_SLACK, events_in
from calagent.commands.txn import Txn, error_result
from calagent.contracts.commands import CommandResult, StubSlots
from calagent.contracts.envelope import Envelope
from calagent.contracts.limits import OUT_OF_RANGE_MESSAGE, within_supported_years
from calagent.contracts.time import ResolveRequest, ResolveResult


class Placing:
    def __init__(self, time_port: TimePort, config: CommandConfig) -> None:
        self.time = time_port
        self.config = config

    def resolve_request(
        self, slots: StubSlots, envelope: Envelope, words: str | None = None
    ) -> ResolveRequest | None:
        """`words`: the words that asked for the write, whose recurrence marker the answer carries."""
        if not slots.date:
            return None
        return ResolveRequest(
            date=slots.date,
            time=None if slots.all_day else slots.time,
            end_time=None if slots.all_day else slots.end_time,
            now=envelope.occurred_at,
            tz=envelope.tz,
            holiday_country=self.config.holiday_country,
            words=words,
        )

    async def last_day(self, txn: Txn, symbol: str | None) -> date | CommandResult | None:
        """The last day a multi-day event names (`end_date`), if it names one."""
        return await self.resolve_day(txn, symbol) if symbol else None

    async def resolve_day(self, txn: Txn, symbol: str) -> date | CommandResult:
        """A date symbol to the local day it names, or the error result to answer with."""
        request = self.resolve_request(StubSlots(date=symbol), txn.envelope)
        if request is None:
            return error_result("invalid_symbol", "a date symbol is required")
        resolved = await self.time.resolve(request)
        if resolved.error is not None:
            return error_result(resolved.error.code, resolved.error.message)
        if not resolved_within_supported_years(resolved):
            return error_result("invalid_time", OUT_OF_RANGE_MESSAGE)
        if resolved.date is not None:
            return resolved.date
        if len(resolved.candidates) == 1:
            return resolved.candidates[0]
        return error_result("invalid_symbol", f"{symbol!r} does not name one day")

    async def conflicts(
        self,
        txn: Txn,
        start: datetime,
        end: datetime,
        all_day: bool,
        ignore_ids: frozenset[str] = frozenset(),
        own_series: str | None = None,
    ) -> tuple[Event, ...]:
        """What [start, end) would meet: never the events in `ignore_ids` (the one being moved),
        and not the occurrences of `own_series` (a change reaching past one occurrence moves them
        all)."""
        nearby = await events_in(
            txn.uow, txn.user_id, start - ALL_DAY_SLACK, end + ALL_DAY_SLACK, incomplete_only=True
        )
        found = find_conflicts(start, end, all_day, nearby, txn.tz, ignore_ids=ignore_ids)
        return tuple(c for c in found if own_series is None or c.series_id != own_series)

    async def calendars(self, txn: Txn) -> list[str]:
        """The user's calendar names, the default first; made on first use in the language of the
        request (the same rule as a read's)."""
        return await txn.uow.settings.calendars(
            txn.user_id, self.config.calendars.named_for(txn.envelope.lang)
        )

    async def organizer(self, txn: Txn) -> str:
        """The user's private address, made on first need: the ORGANIZER of what is sent."""
        address = await txn.uow.people.mailbox(
            txn.user_id, new_mail_address(self.config.mail_domain), txn.now
        )
        assert address is not None
        return address


def resolved_within_supported_years(resolved: ResolveResult) -> bool:
    """Every day and instant the resolver named lies in the years a calendar entry may have: an
    event at 9999-12-31 23:30 would overflow when its end is computed, one in year 1 when it is
    converted to UTC."""
    values = [v for v in (resolved.start, resolved.end, resolved.date) if v is not None]
    return all(within_supported_years(v) for v in (*values, *resolved.candidates))
