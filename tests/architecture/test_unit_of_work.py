"""Every path opens the commands unit of work the same way (issue 31): through the store, which
sets its commit hooks, or through `from_server`, which says its writes are not sent anywhere.
Constructing `SqlUnitOfWork` elsewhere would skip one or the other without saying so.

What the unit of work is handed to is built in one place too (issue 43 item 4): `Writes`' collaborators
and the dispatch itself are constructed by `bootstrap.py` only, so the inbox and the sync share the
instances the commands run on instead of building (or reaching for) their own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tests.architecture.test_layers import parsed

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "services/commands/src/calagent/commands/adapters/store.py"
COMMANDS = ROOT / "services/commands/src/calagent/commands"
ROOT_MODULE = COMMANDS / "bootstrap.py"
# The sync's own rooms keep stubs outside any command (held objects, conflicts): they hold the stub
# rules (`Pending`, a wrapper of the stub TTL) without a `Writes` to take them from.
SYNC_OWN = {("Pending", "caldav/withheld.py"), ("Pending", "caldav/conflicts.py")}


def _constructions(path: Path) -> list[int]:
    tree = parsed(path)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "SqlUnitOfWork")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "SqlUnitOfWork")
        )
    ]


def test_the_unit_of_work_is_constructed_in_the_store_module_only() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for tree in ("services", "tests", "apps")
        for path in (ROOT / tree).rglob("*.py")
        if path != HOME and ".venv" not in path.parts
        for line in _constructions(path)
    }
    assert found == set()
    assert _constructions(HOME), "the store module opens it"


def _collaborators() -> dict[str, str]:
    """`Writes`' collaborators, read from the fields of `writes.Collaborators`, with the reads and
    the dispatch the root builds around them: class name → the module it is imported from."""
    tree = parsed(COMMANDS / "writes.py")
    homes = {
        alias.name: node.module or ""
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    fields = next(
        node.body for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Collaborators"
    )
    named = {
        field.annotation.id: homes[field.annotation.id]
        for field in fields
        if isinstance(field, ast.AnnAssign) and isinstance(field.annotation, ast.Name)
    }
    return named | {
        "Queries": "calagent.commands.queries",
        "Calendars": "calagent.commands.calendars",
        "Feeds": "calagent.commands.feeds",
        "PlanDeletion": "calagent.commands.plans",
        "Writes": "calagent.commands.writes",
        "CommandService": "calagent.commands.service",
    }


def _built(path: Path, classes: dict[str, str]) -> set[tuple[str, int]]:
    """The collaborators `path` constructs: a call of a name it imports from the class's module."""
    tree = parsed(path)
    imported = {
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if classes.get(alias.name) == node.module
    }
    return {
        (imported[node.func.id], node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported
    }


def test_writes_collaborators_are_built_in_the_composition_root_only() -> None:
    classes = _collaborators()
    assert {"Pending", "Placing", "Changes", "Tasks", "Replans", "Creates"} <= set(classes)
    found = {
        f"{name} in {path.relative_to(COMMANDS)}:{line}"
        for path in COMMANDS.rglob("*.py")
        if path != ROOT_MODULE
        for name, line in _built(path, classes)
        if (name, str(path.relative_to(COMMANDS))) not in SYNC_OWN
    }
    assert found == set()
    assert {name for name, _ in _built(ROOT_MODULE, classes)} == set(classes), "the root builds each one"
