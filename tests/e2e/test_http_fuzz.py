"""No input produces a 5xx (contract §11, issue 13): the gateway's own OpenAPI document, fuzzed
with schemathesis against the running system (real NATS, PostgreSQL, every service, the scripted
model), with a valid bearer token.

Schemathesis generates the requests (valid ones and, in its negative mode, ones that break the
schema); they are sent through the stack's own client, on the event loop its services run on.
`CALAGENT_FUZZ_EXAMPLES` sets the examples per operation and mode: small in `make test`, large in
the fault suite (`CALAGENT_FUZZ_EXAMPLES=2000`).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.core.result import Err
from schemathesis.generation.case import Case
from schemathesis.generation.modes import GenerationMode

from calagent.cli.stack import Stack

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("CALAGENT_FUZZ_EXAMPLES", "25"))
# Its answers are the other engineer's contract (503 while a service is missing), not input's.
NOT_FUZZED = frozenset({"/healthz"})


def generated_cases(document: dict[str, Any], mode: GenerationMode) -> list[Case[Any]]:
    """`EXAMPLES` cases per operation, generated up front: hypothesis drives a synchronous test,
    and the requests then go out on the stack's own event loop."""
    schema = schemathesis.openapi.from_dict(document)
    cases: list[Case[Any]] = []
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            raise result.err()
        operation = result.ok()
        if operation.path in NOT_FUZZED:
            continue

        @settings(
            max_examples=EXAMPLES, database=None, deadline=None, suppress_health_check=list(HealthCheck)
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def collect(case: Case[Any]) -> None:
            cases.append(case)

        try:
            collect()
        except Unsatisfiable:
            # Negative mode on an operation with no parameters or body: nothing to break.
            continue
    return cases


async def served_schema(stack: Stack, user: str) -> dict[str, Any]:
    """The OpenAPI document as the running gateway serves it: only with the bearer."""
    assert (await stack.client.get("/openapi.json")).status_code == 401
    response = await stack.client.get("/openapi.json", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


# About sixteen operations, each request a few tens of milliseconds: the suite's 300 s per test
# holds `make test`'s short run, not the fault suite's thousand examples per operation (where the
# timer's signal, landing inside a handler of the in-process stack, shows as that request's 503).
@pytest.mark.timeout(300 + EXAMPLES)
@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: m.value)
async def test_no_generated_request_gets_a_5xx(stack: Stack, mode: GenerationMode, user: str) -> None:
    cases = generated_cases(await served_schema(stack, user), mode)
    assert cases
    failures: list[str] = []
    statuses: dict[int, int] = {}
    for case in cases:
        kwargs: dict[str, Any] = case.as_transport_kwargs(
            base_url="http://gateway", headers=stack.headers(user)
        )
        kwargs.pop("cookies", None)
        response = await stack.client.request(**kwargs)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        if response.status_code >= 500:
            failures.append(f"{response.status_code} {response.text[:200]}\n  {case.as_curl_command()}")
        elif response.status_code >= 400:
            error = response.json()["error"]
            assert error["code"] and error["message"], response.text
    print(f"fuzz {mode.value}: {len(cases)} requests, statuses {sorted(statuses.items())}")
    assert not failures, "\n".join(failures)


# ---- the hand-written hostile table of issue 13, through the whole system ---------------------------

HOSTILE_THROUGH_THE_STACK: dict[str, tuple[str, str, bytes | None, int]] = {
    "NUL in message": ("POST", "/v1/chat", b'{"message": "\\u0000"}', 422),
    "lone surrogate in message": ("POST", "/v1/chat", b'{"message": "\\ud800 hi"}', 422),
    "deep nesting": ("POST", "/v1/chat", b'{"message": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", 413),
    "deep nesting under the cap": (
        "POST",
        "/v1/chat",
        b'{"message": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
        422,
    ),
    "events year 1": ("GET", "/v1/events?start=0001-01-01&end=0001-01-03", None, 422),
    "events year 9999": ("GET", "/v1/events?start=9999-12-01&end=9999-12-31", None, 422),
    "events year 1 to 9999": (
        "GET",
        "/v1/events?start=0001-01-01T00:00:00%2B14:00&end=9999-12-31",
        None,
        422,
    ),
    "events at the edge of the supported years": (
        "GET",
        "/v1/events?start=2199-12-31T00:00:00-12:00&end=2199-12-31T23:59:59-12:00",
        None,
        200,
    ),
    "events at the first supported day": ("GET", "/v1/events?start=1900-01-01&end=1900-01-02", None, 200),
    "timeline %00": ("GET", "/v1/turns/%00/timeline", None, 404),
    "timeline non-UTF-8": ("GET", "/v1/turns/%ff/timeline", None, 404),
    "timeline very long": ("GET", "/v1/turns/" + "f" * 2_000 + "/timeline", None, 404),
    "plan %00": ("DELETE", "/v1/plans/%00", None, 404),
    "active command with a body": ("GET", "/v1/commands/active", b"x" * 100_000, 413),
}


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    HOSTILE_THROUGH_THE_STACK.values(),
    ids=HOSTILE_THROUGH_THE_STACK.keys(),
)
async def test_hostile_input_through_the_whole_system_is_never_a_5xx(
    stack: Stack, user: str, method: str, path: str, body: bytes | None, status: int
) -> None:
    headers = {**stack.headers(user), "Content-Type": "application/json"}
    response = await stack.client.request(method, path, content=body, headers=headers)
    assert response.status_code == status, response.text
    if status >= 400:
        assert set(response.json()["error"]) >= {"code", "message"}
