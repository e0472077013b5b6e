"""Bus handlers: unwrap the request, run it, turn infrastructure failures into `transient`.

A database or time-service failure is worth retrying (the agent retries with the same idempotency
key, so nothing is lost or written twice); a malformed request never reaches here, the bus
dead-letters it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from opentelemetry import trace
from sqlalchemy.exc import SQLAlchemyError

from calagent.commands.ports import KeyInFlightError
from calagent.commands.service import CommandService
from calagent.contracts.commands import CommandRequest, CommandResult, QueryRequest, QueryResult
from calagent.runtime.bus import BusRequestError, TransientError

log = logging.getLogger("calagent.commands")
tracer = trace.get_tracer("calagent.commands")

TRANSIENT = (SQLAlchemyError, OSError, TimeoutError, BusRequestError, KeyInFlightError)


def is_transient(exc: BaseException) -> bool:
    # asyncpg errors that escape SQLAlchemy's wrapping (raised while connecting) are matched by
    # module so the untyped driver need not be imported here.
    return isinstance(exc, TRANSIENT) or type(exc).__module__.startswith("asyncpg")


@contextlib.contextmanager
def transient_failures(what: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("%s failed transiently: %r", what, exc)
        raise TransientError(f"{what}: {type(exc).__name__}: {exc}") from exc


class Handlers:
    def __init__(self, service: CommandService) -> None:
        self.service = service

    async def on_command(self, request: CommandRequest) -> CommandResult:
        command = request.command
        with (
            tracer.start_as_current_span(f"command.{command.kind}") as span,
            transient_failures(command.kind),
        ):
            result = await self.service.execute(command)
            span.set_attribute("calagent.status", result.status)
            span.set_attribute("calagent.db_ms", result.db_ms)
            return result

    async def on_query(self, request: QueryRequest) -> QueryResult:
        query = request.query
        with tracer.start_as_current_span(f"query.{query.kind}") as span, transient_failures(query.kind):
            result = await self.service.query(query)
            span.set_attribute("calagent.db_ms", result.db_ms)
            return result
