"""How a bus handler's failure is answered (`CommandService.on_command`/`on_query` run through
`answered`; the app's account and people handlers through `transient_failures`): infrastructure
failures become `transient`.

A database or time-service outage is worth retrying (the agent retries with the same idempotency
key, so nothing is lost or written twice); a malformed request never reaches here, the bus
dead-letters it. A value the domain or the database cannot take (a date whose arithmetic
overflows, a string PostgreSQL refuses) fails the same way on every retry: it is answered as an
error result at once, never retried as `transient` and never left to dead-letter the turn. So is a
write that breaks a constraint (unique, check, foreign key): the code should have kept it, so it is
a defect, logged with the constraint's name — except the unique keys that are claims, where a
violation is a concurrent writer of the same key and the retry finds what it wrote.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from calagent.commands.ports import KeyInFlightError
from calagent.contracts.commands import CommandResult
from calagent.contracts.queries import QueryResult
from calagent.runtime.bus import TransientError
from calagent.runtime.settle import RateLimitedLog
from calagent.runtime.settle import is_transient as runtime_is_transient

log = logging.getLogger("calagent.commands")
Answer = TypeVar("Answer", CommandResult, QueryResult)

_transient_log = RateLimitedLog(log)


# The unique keys that are claims: the first writer of a key wins, a concurrent one waits for it
# (both are written ON CONFLICT DO NOTHING). A violation of one can only be such a concurrent
# writer, and the retry finds what it wrote: the command's stored result (`claim_key`), the
# message already on record (`claim_inbound`). Every other violation is a defect.
CLAIMS = frozenset({"pk_idempotency", "uq_inbound_mail_message"})


class InputError(Exception):
    """The request carries a value that cannot be handled, now or on any retry."""


class ConstraintDefect(Exception):
    """A write broke a constraint the code should have kept: the same on every retry."""

    def __init__(self, what: str, constraint: str | None) -> None:
        super().__init__(f"{what} broke the store's constraint {constraint or '(unnamed)'}")
        self.constraint = constraint


def _wrapped(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it wraps: SQLAlchemy's error, the DBAPI adapter's, the driver's own."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return
        yield seen
        seen = getattr(seen, "orig", None) or seen.__cause__


def is_input_error(exc: BaseException) -> bool:
    """Whether `exc`, or what it wraps, says a value cannot be taken. SQLAlchemy wraps the driver's
    refusal of an argument ("invalid input for query argument … date value out of range") in a
    plain `DBAPIError`; the driver's own exception underneath is a `ValueError`."""
    for seen in _wrapped(exc):
        if isinstance(seen, OverflowError | ValueError | DataError):
            return True
        # asyncpg's DataError family, matched by name so the untyped driver need not be imported.
        if type(seen).__module__.startswith("asyncpg") and any(
            cls.__name__ == "DataError" for cls in type(seen).__mro__
        ):
            return True
    return False


def broken_constraint(exc: BaseException) -> str | None:
    """The constraint a violation names (asyncpg's `constraint_name` on the driver's error under
    SQLAlchemy's `IntegrityError`); None when `exc` is no violation or names none (NOT NULL)."""
    return next(
        (name for seen in _wrapped(exc) if isinstance(name := getattr(seen, "constraint_name", None), str)),
        None,
    )


def is_defect(exc: BaseException) -> bool:
    """A constraint violation that is not a claim's race: no retry can get past it."""
    violation = any(isinstance(seen, IntegrityError) for seen in _wrapped(exc))
    return violation and broken_constraint(exc) not in CLAIMS


def is_transient(exc: BaseException) -> bool:
    """An unreachable dependency (the bus's own rule), or a database error that a retry with the
    same key resolves (a race for a claim with a concurrent writer, a key still in flight). Input
    errors and defects are sorted out before this is asked, and are never transient."""
    if is_defect(exc):
        return False
    return isinstance(exc, SQLAlchemyError | KeyInFlightError) or runtime_is_transient(exc)


@contextlib.contextmanager
def transient_failures(what: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if is_input_error(exc):
            log.info("%s refused its input: %r", what, exc)
            raise InputError(f"{type(exc).__name__}: {exc}") from exc
        if is_defect(exc):
            constraint = broken_constraint(exc)
            log.error("%s broke constraint %s: a defect, answered at once", what, constraint, exc_info=exc)
            raise ConstraintDefect(what, constraint) from exc
        if not is_transient(exc):
            raise
        _transient_log.warning(what, "%s failed transiently: %r", what, exc)
        raise TransientError(f"{what}: {type(exc).__name__}: {exc}") from exc


async def answered(
    what: str, running: Awaitable[Answer], refused: Callable[[str, str], Answer], input_code: str
) -> Answer:
    """What a command or query answers: its result, or — for input no retry can carry out, or a
    broken constraint — the refusal built at once (`refused(code, message)`); a transient fault
    is raised for the bus to redeliver."""
    try:
        with transient_failures(what):
            return await running
    except InputError as exc:
        return refused(input_code, f"{what} could not be carried out: {exc}")
    except ConstraintDefect as exc:
        return refused("internal_error", f"{exc}; nothing was changed")
