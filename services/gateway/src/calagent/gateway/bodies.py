"""A route's JSON body read one way: what is not JSON to Python's parser (not UTF-8, malformed,
nested too deeply, a number too long to convert) is a 422, never a 500."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from calagent.contracts.text import unstorable_in
from calagent.gateway.errors import error_json

Body = TypeVar("Body", bound=BaseModel)


def json_value(raw: bytes) -> Any | JSONResponse:
    """The body's JSON value, or the 422 that says it is not JSON or holds text that cannot be
    stored or sent (a NUL, a lone surrogate: `contracts.text`), in any key or value."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        # JSONDecodeError and UnicodeDecodeError are ValueErrors, and so is an integer literal
        # longer than Python converts (4,300 digits).
        return error_json(422, "the body is not valid JSON", "invalid_request")
    reason = unstorable_in(data)
    if reason:
        return error_json(422, reason, "invalid_request")
    return data


def body_model(
    raw: bytes, model: type[Body], refusal: str | Callable[[ValidationError], str]
) -> Body | JSONResponse:
    """The body as `model`, or a 422: not JSON, or not the model (`refusal` says what was wanted)."""
    data = json_value(raw)
    if isinstance(data, JSONResponse):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        return error_json(422, refusal if isinstance(refusal, str) else refusal(exc), "invalid_request")
