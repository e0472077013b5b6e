"""What a request proposes: the resolver's answer and the slots turned into a start and an end, or
what is still missing (what the stub then does with it: `pending.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from calagent.commands.domain.timeutil import at_local, end_from_clock, local_date, local_day_span, parse_hhmm
from calagent.contracts.commands import StubSlots
from calagent.contracts.time import ResolveResult

DEFAULT_DURATION = timedelta(minutes=60)


@dataclass(frozen=True)
class Proposal:
    start: datetime
    end: datetime
    all_day: bool


@dataclass(frozen=True)
class Incomplete:
    status: Literal["needs_date", "needs_time"]
    candidates: tuple[date, ...] = ()
    # A single resolved day, pinned so a relative symbol ("D+1") cannot drift on a later reply.
    pinned_date: date | None = None


class UnresolvableError(ValueError):
    """The resolver answered with nothing usable (neither a time, a date nor candidates)."""


def plan(
    resolved: ResolveResult, slots: StubSlots, tz: ZoneInfo, last_day: date | None = None
) -> Proposal | Incomplete:
    """Turn a resolution plus slots into a concrete proposal, or say what is still missing.

    `last_day` (the resolved `end_date`) makes a multi-day event: all day through that local day,
    or from the start until `end_time` (else the start's clock time) on that day.
    """
    if len(resolved.candidates) > 1:
        return Incomplete("needs_date", candidates=tuple(sorted(resolved.candidates)))
    day: date | None = resolved.date
    if day is None and resolved.candidates:
        day = resolved.candidates[0]
    if day is None and resolved.start is not None:
        day = local_date(resolved.start, tz)
    if day is None:
        raise UnresolvableError("the resolver returned neither a time, a date nor candidates")
    if last_day is not None and last_day < day:
        raise ValueError("the last day of an event cannot be before its first")
    if slots.all_day:
        start, _ = local_day_span(day, tz)
        _, end = local_day_span(last_day or day, tz)
        return Proposal(start, end, all_day=True)
    if resolved.start is None:
        return Incomplete("needs_time", pinned_date=day)
    start = resolved.start.astimezone(UTC)
    if last_day is not None and last_day != day:
        clock = slots.end_time or start.astimezone(tz).strftime("%H:%M")
        end = at_local(last_day, parse_hhmm(clock), tz)
        if end <= start:
            raise ValueError("a multi-day event must end after it starts")
        return Proposal(start, end, all_day=False)
    if slots.end_time:
        end = end_from_clock(start, slots.end_time, tz)
    elif slots.duration_minutes:
        end = start + timedelta(minutes=slots.duration_minutes)
    else:
        end = start + DEFAULT_DURATION
    return Proposal(start, end, all_day=False)
