"""The AsyncAPI document of every subject and schema, generated from the services' own wiring.

Each service declares its subscribers and publishers in `wire(bus)` (the gateway in `create_app`),
with no I/O; this module wires all five on unconnected buses and has the runtime's
`specification` (FastStream's AsyncAPI generator) describe them. `docs/asyncapi.json` is its output, and a test regenerates it.

    calagent asyncapi [--out docs/asyncapi.json]

`faststream docs gen --factory calagent.cli.asyncapi:docs_app` gives the same channels, operations
and schemas, without the request-reply replies this module adds (FastStream documents what a
subscriber receives, not what it answers).
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any

from faststream import FastStream
from faststream.specification import AsyncAPI

from calagent.contracts.bus import BusErrorReply
from calagent.contracts.wire import Endpoint
from calagent.runtime.bus import Bus, specification
from calagent.runtime.clock import FrozenClock
from calagent.runtime.settings import Settings

TITLE = "calagent"
VERSION = "0.1.0"
DESCRIPTION = (
    "The calendar agent's bus: request-reply endpoints served by queue groups, JetStream subjects "
    "consumed by durable pull consumers shared by replicas, and per-turn progress events. "
    "A request-reply responder that cannot answer replies with a BusErrorReply instead."
)
# Documentation only: no connection is made.
DOCS_SERVER = "nats://localhost:4222"


def system_buses() -> list[Bus]:
    """Every service wired as in production, on buses that never connect."""
    from calagent.agent.app import create_app as create_agent
    from calagent.commands.app import create_app as create_commands
    from calagent.evalrec.app import create_app as create_evalrec
    from calagent.gateway.app import create_app as create_gateway
    from calagent.timeparse.app import create_app as create_timeparse

    # The gateway refuses to exist without a token secret; this one signs nothing.
    settings = Settings.model_validate(
        {"NATS_URL": DOCS_SERVER, "CALAGENT_AUTH_SECRET": secrets.token_hex(32)}
    )
    clock = FrozenClock(datetime.fromisoformat("2026-01-01T00:00:00+00:00"))
    buses: list[Bus] = []
    for factory in (create_timeparse, create_commands, create_agent, create_evalrec):
        app = factory(settings, clock)
        bus = Bus(DOCS_SERVER, app.name, clock)
        app.wire(bus)
        bus.serve_health()
        buses.append(bus)
    gateway_bus = Bus(DOCS_SERVER, "gateway", clock)
    create_gateway(settings, clock, bus=gateway_bus)
    gateway_bus.serve_health()
    buses.append(gateway_bus)
    return buses


def system_specification(buses: list[Bus] | None = None) -> AsyncAPI:
    return specification(
        system_buses() if buses is None else buses, title=TITLE, version=VERSION, description=DESCRIPTION
    )


def docs_app() -> FastStream:
    """For `faststream docs gen --factory`: an app whose specification covers every service."""
    spec = system_specification()
    return FastStream(spec.brokers[0], specification=spec)


def document() -> dict[str, Any]:
    buses = system_buses()
    doc: dict[str, Any] = system_specification(buses).to_specification().to_jsonable()
    for bus in buses:
        for endpoint in bus.endpoints:
            _add_reply(doc, bus.title(endpoint.subject), endpoint)
    return doc


def _add_reply(doc: dict[str, Any], title: str, endpoint: Endpoint[Any, Any]) -> None:
    """FastStream documents what a subscriber receives, not what it answers: add the reply (the
    endpoint's reply type, or a `BusErrorReply`) to the operation as AsyncAPI 3 `reply`."""
    components = doc["components"]
    names = []
    for model in (endpoint.reply, BusErrorReply):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in schema.pop("$defs", {}).items():
            components["schemas"].setdefault(name, definition)
        components["schemas"].setdefault(model.__name__, schema)
        name = f"{title}:{model.__name__}"
        components["messages"][name] = {
            "name": name,
            "title": model.__name__,
            "payload": {"$ref": f"#/components/schemas/{model.__name__}"},
            "contentType": "application/json",
        }
        names.append(name)
    doc["operations"][title]["reply"] = {
        "address": {
            "location": "$message.header#/reply_to",
            "description": "The requester's NATS inbox (the message's reply subject).",
        },
        "messages": [{"$ref": f"#/components/messages/{name}"} for name in names],
    }


def render() -> str:
    # Sorted keys: the brokers keep some registrations in sets, and the file must not churn.
    return json.dumps(document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
