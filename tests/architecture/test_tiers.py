"""Every test says its tier (pyproject's markers): in its module's `pytestmark`, or on itself or
its class where one module holds tests of two tiers. A test with none is left out of every run
that selects a tier (`-m unit`)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from tests.architecture.test_layers import parsed

from calagent.devtools.testing.plugin import pytest_ignore_collect

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
TIERS = frozenset({"unit", "integration", "e2e", "eval", "benchmark"})
SUITES = ("services/*/tests/**/test_*.py", "libs/*/tests/**/test_*.py", "apps/*/tests/**/test_*.py")


def _test_modules() -> list[Path]:
    found = [path for pattern in SUITES for path in ROOT.glob(pattern)]
    return sorted([*found, *(ROOT / "tests").glob("**/test_*.py")])


def _tiers(node: ast.expr) -> set[str]:
    """The tiers a mark expression names: `pytest.mark.unit`, a list or tuple of marks, or a mark
    called with arguments."""
    if isinstance(node, ast.List | ast.Tuple):
        return set().union(*(_tiers(e) for e in node.elts))
    if isinstance(node, ast.Call):
        return _tiers(node.func)
    if isinstance(node, ast.Attribute) and node.attr in TIERS:
        return {node.attr}
    return set()


def _marked(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    return set().union(*(_tiers(d) for d in node.decorator_list))


def untiered_tests(path: Path) -> Iterator[str]:
    tree = parsed(path)
    module: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            module = _tiers(node.value)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            if len(module | _marked(node)) != 1:
                yield node.name
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if not (
                    isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test")
                ):
                    continue
                if len(module | _marked(node) | _marked(item)) != 1:
                    yield f"{node.name}.{item.name}"


def test_every_test_names_exactly_one_tier() -> None:
    modules = _test_modules()
    assert len(modules) > 100  # the patterns still find the suites
    wrong = {str(p.relative_to(ROOT)): names for p in modules if (names := list(untiered_tests(p)))}
    assert not wrong, wrong


def _module_tiers(path: Path) -> set[str]:
    """The tiers of a module's tests: its own `pytestmark`'s and every one a test or class names."""
    tree = parsed(path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            found |= _tiers(node.value)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found |= _marked(node)
    return found


def test_the_unit_run_leaves_out_only_modules_without_a_unit_test() -> None:
    unit_run = cast(pytest.Config, SimpleNamespace(option=SimpleNamespace(markexpr="unit")))
    modules = _test_modules()
    left_out = [path for path in modules if pytest_ignore_collect(path, unit_run)]
    assert len(left_out) > 30  # the e2e and integration suites
    assert not [str(p.relative_to(ROOT)) for p in left_out if "unit" in _module_tiers(p)]
    assert any("unit" in _module_tiers(p) for p in modules if p not in left_out)
