"""Every path opens the commands unit of work the same way (issue 31): through the store, which
sets its commit hooks, or through `from_server`, which says its writes are not sent anywhere.
Constructing `SqlUnitOfWork` elsewhere would skip one or the other without saying so.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tests.architecture.test_layers import parsed

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "services/commands/src/calagent/commands/adapters/store.py"


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
