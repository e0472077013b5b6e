"""The layers, read from the source trees themselves (their `import` statements, by `ast`).

    libs/      contracts, runtime, scriptedmodel: import no service and no application
    services/  each imports libs only: never another service, never the CLI or the dev tools
    apps/      devtools (embedded servers, test helpers) and cli (which may use everything)

A lazy import inside a function counts like one at the top: it is the same dependency, paid later.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
APPLICATIONS = ("cli", "devtools")


@cache
def parsed(path: Path) -> ast.Module:
    """A source file's tree, parsed once per run however many of the architecture tests read it."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. calagent.gateway.app
    path: Path
    layer: str  # "lib", "service" or "app"
    owner: str  # the top package under `calagent`: gateway, runtime, cli, ...

    def import_statements(self) -> Iterator[tuple[int, str, tuple[str, ...]]]:
        """Every import, under `if TYPE_CHECKING:` too: its line, the module it names (a relative
        one resolved) and the names a `from` import takes from it (a name may be a module)."""
        tree = parsed(self.path)
        package = self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield node.lineno, alias.name, ()
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                yield node.lineno, target, tuple(alias.name for alias in node.names)

    def imports(self) -> Iterator[tuple[int, str]]:
        for line, target, names in self.import_statements():
            yield line, target
            # `from calagent import gateway` names the package in the alias, not the module.
            if target == "calagent":
                for name in names:
                    yield line, f"calagent.{name}"


def source_modules() -> list[Module]:
    found = []
    for layer, folder in (("lib", "libs"), ("service", "services"), ("app", "apps")):
        for src in sorted((ROOT / folder).glob("*/src")):
            for path in sorted(src.rglob("*.py")):
                parts = path.relative_to(src).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                if len(parts) < 2 or parts[0] != "calagent":
                    continue
                found.append(Module(".".join(parts), path, layer, parts[1]))
    return found


MODULES = source_modules()
SERVICES = frozenset(module.owner for module in MODULES if module.layer == "service")


@dataclass(frozen=True)
class Edge:
    module: Module
    line: int
    imported: str
    target: str  # the imported module's top package under `calagent`

    def __str__(self) -> str:
        return f"{self.module.path.relative_to(ROOT)}:{self.line} imports {self.imported}"


def edges() -> list[Edge]:
    """Every import of another top package of `calagent`."""
    found = []
    for module in MODULES:
        for line, imported in module.imports():
            parts = imported.split(".")
            if len(parts) > 1 and parts[0] == "calagent" and parts[1] != module.owner:
                found.append(Edge(module, line, imported, parts[1]))
    return found


EDGES = edges()


def test_the_source_trees_are_found() -> None:
    # A glob that found nothing would make every test below pass.
    assert sorted(SERVICES) == ["agent", "commands", "evalrec", "gateway", "timeparse"]
    owners = {module.owner for module in MODULES}
    assert {"contracts", "runtime", "scriptedmodel", *APPLICATIONS} <= owners
    assert all(module.layer == "app" for module in MODULES if module.owner in APPLICATIONS)
    assert any(edge.target == "contracts" for edge in EDGES)


def test_no_service_imports_another_service() -> None:
    found = [str(e) for e in EDGES if e.module.layer == "service" and e.target in SERVICES]
    assert found == []


def test_libs_import_no_service_and_no_application() -> None:
    found = [
        str(e)
        for e in EDGES
        if e.module.layer == "lib" and (e.target in SERVICES or e.target in APPLICATIONS)
    ]
    assert found == []


def test_services_import_neither_the_cli_nor_the_dev_tools() -> None:
    found = [str(e) for e in EDGES if e.module.layer == "service" and e.target in APPLICATIONS]
    assert found == []


def test_the_dev_tools_import_no_service_and_not_the_cli() -> None:
    found = [
        str(e) for e in EDGES if e.module.owner == "devtools" and (e.target in SERVICES or e.target == "cli")
    ]
    assert found == []


# ---- the bus's insides -------------------------------------------------------------------------

# The nats-py connection, its JetStream context and the FastStream broker a `Bus` wraps, under
# either spelling: what anyone outside `calagent.runtime` needs of them is a method of `Bus`.
BUS_INSIDES = frozenset({"nc", "js", "broker", "_nc", "_js", "_broker"})


def _python_files_outside_the_runtime() -> list[Path]:
    """Every source and test module but the runtime's own (its tests may look inside)."""
    found = []
    for top in ("libs", "services", "apps", "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.is_relative_to(ROOT / "libs" / "runtime"):
                continue
            found.append(path)
    return found


def _annotation_names_bus(annotation: ast.expr | None) -> bool:
    return annotation is not None and any(
        isinstance(node, ast.Name) and node.id == "Bus" for node in ast.walk(annotation)
    )


def _bus_names(trees: list[ast.Module]) -> frozenset[str]:
    """Names that hold a `Bus` somewhere: annotated `Bus` (variables, fields, parameters) or bound
    to `Bus(...)` / `Bus.connect(...)`; and any name that says so (`bus`, `gateway_bus`, `_bus`)."""
    names: set[str] = set()

    def name_of(target: ast.expr) -> str:
        return target.attr if isinstance(target, ast.Attribute) else ast.unparse(target)

    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.AnnAssign) and _annotation_names_bus(node.annotation):
                names.add(name_of(node.target))
            elif isinstance(node, ast.arg) and _annotation_names_bus(node.annotation):
                names.add(node.arg)
            elif isinstance(node, ast.Assign):
                call = node.value.value if isinstance(node.value, ast.Await) else node.value
                if isinstance(call, ast.Call) and ast.unparse(call.func) in ("Bus", "Bus.connect"):
                    names.update(name_of(target) for target in node.targets)
    return frozenset(names)


def _holder(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def test_only_the_runtime_looks_inside_a_bus() -> None:
    paths = _python_files_outside_the_runtime()
    trees = [parsed(path) for path in paths]
    holders = _bus_names(trees)
    assert {"bus", "client"} <= holders  # the fixtures' buses are seen for what they are
    found = []
    for path, tree in zip(paths, trees, strict=True):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or node.attr not in BUS_INSIDES:
                continue
            holder = _holder(node.value)
            if holder is not None and (holder in holders or "bus" in holder.lower()):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert found == []
