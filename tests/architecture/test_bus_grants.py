"""Every subject a service's code asks for is granted to it in the permission table `calagent up`
writes (`runtime.trust`), read from the services' source trees (their calls, by `ast`), not from
the table: a request the table does not allow waits out its timeout under `calagent up` while
every test run as the admin is green (issue 43: the agent's `calagent.people.manage`).

A declaration of `wire` named as the first argument of `serve`, `consume` or `listen` is served or
read there; named anywhere else (`request`, a publisher, a helper that asks) it is sent to.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from calagent.contracts import subjects, wire
from calagent.runtime.trust import STREAM_SIDES, allowed

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# The calls whose first argument is a declaration this service receives on.
RECEIVING = frozenset({"serve", "consume", "listen"})


@dataclass(frozen=True)
class Use:
    service: str
    declaration: str  # its name in `wire`
    receives: bool
    where: str


def _receiving_arguments(tree: ast.AST) -> set[int]:
    """The nodes (by id) that are the first argument of a receiving call."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in RECEIVING
            and node.args
        ):
            found.add(id(node.args[0]))
    return found


def uses(service: str) -> Iterator[Use]:
    """Every `wire.<DECLARATION>` the service's source names, and whether it receives there."""
    source = ROOT / "services" / service / "src"
    for path in sorted(source.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        receiving = _receiving_arguments(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "wire"
                and isinstance(getattr(wire, node.attr, None), wire.Endpoint | wire.Stream | wire.Topic)
            ):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                yield Use(service, node.attr, id(node) in receiving, where)


def granted(use: Use) -> bool:
    declared = getattr(wire, use.declaration)
    if isinstance(declared, wire.Endpoint):
        return allowed(use.service, declared.subject, publish=not use.receives)
    if isinstance(declared, wire.Stream):
        if use.receives:
            return STREAM_SIDES[declared.subject].consumed_by == use.service
        return allowed(use.service, declared.subject, publish=True)
    assert isinstance(declared, wire.Topic)
    return allowed(use.service, declared.subject("one"), publish=not use.receives)


ALL_USES = [use for service in subjects.SERVICES for use in uses(service)]


def test_the_source_trees_name_what_each_service_asks_and_serves() -> None:
    # The reading finds calls where they are: a service that asks or serves nothing here would
    # mean the tree moved and the test below checks nothing.
    for service in subjects.SERVICES:
        assert any(u.service == service and u.receives for u in ALL_USES), service
    assert any(
        u.service == "agent" and u.declaration == "COMMAND_EXECUTE" and not u.receives for u in ALL_USES
    )
    assert any(
        u.service == "gateway" and u.declaration == "TURN_REQUESTED" and not u.receives for u in ALL_USES
    )


def test_every_subject_a_service_asks_or_serves_is_granted_to_it_in_the_deployed_table() -> None:
    refused = [
        f"{u.service} {'receives' if u.receives else 'sends'} {u.declaration} at {u.where}"
        for u in ALL_USES
        if not granted(u)
    ]
    assert refused == []
