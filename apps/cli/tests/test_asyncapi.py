"""The AsyncAPI document in docs/ is what the code generates today, and covers every subject."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from calagent.cli.asyncapi import document, render
from calagent.contracts import subjects, wire

pytestmark = pytest.mark.unit

CHECKED_IN = Path(__file__).resolve().parents[3] / "docs" / "asyncapi.json"


def test_the_checked_in_document_is_current() -> None:
    assert CHECKED_IN.read_text(encoding="utf-8") == render(), (
        "docs/asyncapi.json is stale: run `calagent asyncapi --out docs/asyncapi.json`"
    )


def _addresses(doc: dict[str, Any]) -> dict[str, set[str]]:
    """Each channel address with the actions (send/receive) the services take on it."""
    seen: dict[str, set[str]] = {}
    for operation in doc["operations"].values():
        channel = doc["channels"][unquote(operation["channel"]["$ref"].rsplit("/", 1)[-1])]
        seen.setdefault(channel["address"], set()).add(operation["action"])
    return seen


def test_every_declared_subject_is_wired_by_some_service() -> None:
    # Two independent sources: what `contracts.wire` declares, and what the services register.
    declared = [value for value in vars(wire).values() if isinstance(value, wire.Endpoint | wire.Stream)]
    declared += [wire.health(service) for service in subjects.SERVICES]
    declared += [wire.deadletter(service) for service in subjects.SERVICES]
    addresses = _addresses(document())
    for item in declared:
        assert item.subject in addresses, f"nobody serves or publishes {item.subject}"
        if isinstance(item, wire.Endpoint):
            assert "receive" in addresses[item.subject], f"nobody answers {item.subject}"
        elif item.durable is not None:
            assert addresses[item.subject] == {"send", "receive"}, item.subject
    assert addresses[wire.TURN_EVENTS.wildcard] == {"send", "receive"}


def test_request_reply_operations_document_their_replies() -> None:
    doc = document()
    receive = doc["operations"]["commands:receive:calagent.command.execute"]
    replies = [ref["$ref"].rsplit(":", 1)[-1] for ref in receive["reply"]["messages"]]
    assert replies == ["CommandResult", "BusErrorReply"]
    assert "CommandResult" in doc["components"]["schemas"]
    assert json.dumps(doc)  # serialisable as it stands
