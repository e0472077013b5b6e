"""How a handler failure is classified: an outage is `transient` (retried with the same key), a
value the service cannot take is an answered error at once (never retried into a dead letter)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.exc import DataError, DBAPIError, OperationalError

from calagent.commands.handlers import InputError, transient_failures
from calagent.contracts.commands import CommandRequest
from calagent.contracts.queries import QueryRange, QueryRequest
from calagent.runtime.bus import BusRequestError, TransientError

from .conftest import Harness
from .test_commands_service import create, env

pytestmark = pytest.mark.unit


def driver_refusal() -> DBAPIError:
    """What SQLAlchemy raises when asyncpg refuses an argument: a plain DBAPIError whose `orig`
    was caused by the driver's ValueError."""
    orig = Exception("invalid input for query argument $3 (date value out of range)")
    orig.__cause__ = ValueError("date value out of range")
    return DBAPIError("SELECT …", {}, orig)


INPUT_ERRORS: list[BaseException] = [
    OverflowError("date value out of range"),
    ValueError("year 0 is out of range"),
    DataError("INSERT …", {}, Exception("invalid input value")),
    driver_refusal(),
]


@pytest.mark.parametrize("exc", INPUT_ERRORS, ids=lambda e: type(e).__name__)
def test_a_value_the_service_cannot_take_is_an_input_error(exc: BaseException) -> None:
    with pytest.raises(InputError), transient_failures("create"):
        raise exc


@pytest.mark.parametrize(
    "exc",
    [
        OperationalError("SELECT 1", {}, Exception("connection refused")),
        ConnectionRefusedError(),
        TimeoutError(),
        BusRequestError("timeout", "timeparse did not answer"),
        BusRequestError("transient", "timeparse is restarting"),
    ],
    ids=lambda e: type(e).__name__ + (f":{e.code}" if isinstance(e, BusRequestError) else ""),
)
def test_an_outage_is_transient(exc: BaseException) -> None:
    with pytest.raises(TransientError), transient_failures("create"):
        raise exc


def test_a_failed_answer_that_is_not_retryable_is_not_made_transient() -> None:
    # timeparse answered `internal`: asking it again gives the same answer.
    with pytest.raises(BusRequestError) as caught, transient_failures("create"):
        raise BusRequestError("internal", "timeparse failed")
    assert caught.value.code == "internal"


@pytest.mark.parametrize("exc", INPUT_ERRORS, ids=lambda e: type(e).__name__)
async def test_an_input_error_is_answered_as_an_error_result(
    exc: BaseException, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(_request: Any) -> Any:
        raise exc

    handlers = harness.service
    monkeypatch.setattr(handlers, "execute", failing)
    monkeypatch.setattr(handlers, "query", failing)
    result = await handlers.on_command(CommandRequest(command=create(date="D+1")))
    assert result.status == "error"
    assert result.error is not None and result.error.code == "invalid_arguments"
    answer = await handlers.on_query(
        QueryRequest(query=QueryRange(envelope=env(), start_symbol="D", end_symbol="D+1"))
    )
    assert answer.error is not None and answer.error.code == "invalid_range"
