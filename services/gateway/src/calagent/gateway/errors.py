"""Every error the gateway answers, in one shape (contract §11): `{"error": {"code", "message"}}`.

A failure of another service is a status, never a stack trace: 503 when it does not answer, 502
when it answers badly (`downstream`), 504 when a turn runs out of time.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from calagent.gateway.auth import AuthError
from calagent.gateway.limits import PAYLOAD_TOO_LARGE
from calagent.gateway.quotas import QuotaExceededError, QuotaUnavailableError
from calagent.gateway.session import CsrfError
from calagent.gateway.turns import AgentUnreachableError, IdempotencyKeyReusedError, TurnTimeoutError
from calagent.runtime.bus import BusRequestError

log = logging.getLogger("calagent.gateway")

# The `code` of an error body by HTTP status, where the status alone says what went wrong.
ERROR_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: PAYLOAD_TOO_LARGE,
    422: "invalid_request",
    500: "internal_error",
    502: "bad_gateway",
    503: "service_unavailable",
    504: "turn_timeout",
}


def error_code(status: int) -> str:
    return ERROR_CODES.get(status, "http_error")


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


# An answer about a credential or a sign-in flow is never kept by a cache on the way.
NO_STORE = {"Cache-Control": "no-store"}


def error_json(
    status: int, message: str, code: str | None = None, *, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    return JSONResponse(
        error_body(code or error_code(status), message, **extra), status_code=status, headers=headers
    )


def refusal_json(code: str, message: str) -> JSONResponse:
    """What commands refused: 404 for what is not the caller's (answered like what does not
    exist), 422 for a request it would not carry out."""
    return error_json(404 if code == "not_found" else 422, message, code)


class DownstreamError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def downstream(service: str, exc: BusRequestError) -> DownstreamError:
    """A request to `service` that got no usable answer: 503 when it is not answering (no
    responder, a timeout, a transient failure), 502 when it answered with an error."""
    if exc.code in ("unavailable", "timeout", "transient"):
        return DownstreamError(503, f"the {service} service is not answering ({exc.code})")
    return DownstreamError(502, f"the {service} service could not answer ({exc.code})")


class UnprocessableError(Exception):
    """A 422; `errors` are `{"loc", "msg", "type"}` items, sent as one message naming each field."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors

    @classmethod
    def one(cls, loc: list[str | int], msg: str, kind: str = "value_error") -> UnprocessableError:
        return cls([{"loc": loc, "msg": msg, "type": kind}])

    @property
    def message(self) -> str:
        return "; ".join(f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in self.errors)


def add_error_handlers(app: FastAPI) -> None:
    """Map every exception a route may raise to its status and the contract's error body."""

    @app.exception_handler(AuthError)
    async def on_auth_error(_request: Request, exc: AuthError) -> JSONResponse:
        return error_json(401, str(exc), headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(CsrfError)
    async def on_csrf(_request: Request, exc: CsrfError) -> JSONResponse:
        return error_json(403, str(exc), "csrf_failed")

    @app.exception_handler(UnprocessableError)
    async def on_unprocessable(_request: Request, exc: UnprocessableError) -> JSONResponse:
        return error_json(422, exc.message)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Routes parse their own input; this keeps any validation FastAPI does in the same shape.
        errors = [{"loc": e.get("loc", ()), "msg": e.get("msg", "invalid")} for e in exc.errors()]
        return error_json(422, UnprocessableError(errors).message)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Unknown paths and methods: FastAPI's default body would be `{"detail": …}`.
        return error_json(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))

    @app.exception_handler(IdempotencyKeyReusedError)
    async def on_key_reused(_request: Request, exc: IdempotencyKeyReusedError) -> JSONResponse:
        return error_json(409, str(exc), "idempotency_key_reused")

    @app.exception_handler(DownstreamError)
    async def on_downstream(_request: Request, exc: DownstreamError) -> JSONResponse:
        return error_json(exc.status, exc.detail)

    @app.exception_handler(QuotaExceededError)
    async def on_quota(_request: Request, exc: QuotaExceededError) -> JSONResponse:
        return error_json(
            429,
            exc.message,
            exc.code,
            headers={"Retry-After": str(math.ceil(exc.retry_after_s))},
            retry_after_s=round(exc.retry_after_s, 3),
        )

    @app.exception_handler(QuotaUnavailableError)
    async def on_quota_unavailable(_request: Request, exc: QuotaUnavailableError) -> JSONResponse:
        log.warning("%s", exc)
        return error_json(503, "the turn could not be checked against the account's limits; try again")

    @app.exception_handler(TurnTimeoutError)
    async def on_timeout(_request: Request, exc: TurnTimeoutError) -> JSONResponse:
        return error_json(504, "the agent did not answer in time", turn_id=exc.turn_id)

    @app.exception_handler(AgentUnreachableError)
    async def on_unreachable(_request: Request, exc: AgentUnreachableError) -> JSONResponse:
        log.warning("%s", exc)
        return error_json(503, "the turn could not be handed to the agent; try again")

    @app.exception_handler(Exception)
    async def on_unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error in the gateway", exc_info=exc)
        return error_json(500, "internal error in the gateway")
