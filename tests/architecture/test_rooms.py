"""No loops between rooms, read from the source trees like the layers (`test_layers`).

A room is a top-level module of a service package (`commands/writes.py`, `gateway/state.py`) or
one of its sub-packages taken whole (`commands/caldav/`, `commands/ical/`, `commands/domain/`,
`commands/tasks/` with its own `tasks/domain/`).
A room may import another only if that one does not import it back, through any number of rooms
between: two rooms in a loop can be neither read, tested nor moved one without the other. A
type-only import (under `if TYPE_CHECKING:`) counts: it is the same dependency, paid by the reader.

The web page's ES modules (`gateway/web/static/*.js`, one per concern) are rooms too, read from
their `import` lines: a module that must tell one that imports it sends an event instead.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

import pytest
from tests.architecture.test_layers import MODULES, ROOT, SERVICES, Module

pytestmark = pytest.mark.unit

MODULE_NAMES = frozenset(module.name for module in MODULES)
PAGE = ROOT / "services/gateway/src/calagent/gateway/web/static"
# `import … from "./x.js"` over any number of lines, `import "./x.js"`, `export … from "./x.js"`,
# and `import("./x.js")`.
_JS_IMPORT = re.compile(
    r"""^\s*(?:import\s+(?:[\w$*\s{},]+?\s+from\s+)?|export\s+(?:\*|\{[^}]*\})\s+from\s+)["']\./([\w.-]+)\.js["']"""
    r"""|\bimport\(\s*["']\./([\w.-]+)\.js["']""",
    re.MULTILINE,
)


def room_of(module: str) -> str:
    """`calagent.commands.caldav.outbox` is in the room `calagent.commands.caldav`."""
    return ".".join(module.split(".")[:3])


def _module_named(imported: str) -> str | None:
    """The source module an import names: itself, or the module a name is taken from."""
    while imported and imported not in MODULE_NAMES:
        imported = imported.rpartition(".")[0]
    return imported or None


@dataclass(frozen=True)
class RoomImport:
    module: Module
    line: int
    room: str  # the room imported

    def __str__(self) -> str:
        return f"{self.module.path.relative_to(ROOT)}:{self.line} imports {self.room}"


def room_imports(service: str) -> list[RoomImport]:
    """Every import by one of the service's rooms of another of its rooms."""
    found: dict[tuple[str, int, str], RoomImport] = {}  # one per line and room imported
    inside = f"calagent.{service}."
    for module in MODULES:
        if module.layer != "service" or module.owner != service:
            continue
        for line, target, names in module.import_statements():
            # `from calagent.commands import views` imports the module `views`, not the package.
            for imported in [f"{target}.{name}" for name in names] or [target]:
                named = _module_named(imported)
                if named is None or not named.startswith(inside):
                    continue
                if room_of(named) != room_of(module.name):
                    found.setdefault(
                        (module.name, line, room_of(named)), RoomImport(module, line, room_of(named))
                    )
    return list(found.values())


def loops(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One loop per set of rooms that reach each other (Tarjan's strongly connected components),
    as the shortest path from its first room back to itself: [a, b, c, a]."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        on_stack.add(room)
        for other in graph.get(room, ()):
            if other not in index:
                visit(other)
                low[room] = min(low[room], low[other])
            elif other in on_stack:
                low[room] = min(low[room], index[other])
        if low[room] == index[room]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == room:
                    break
            if len(component) > 1:
                components.append(component)

    for room in sorted(graph):
        if room not in index:
            visit(room)
    return [_shortest_loop(graph, component) for component in components]


def _shortest_loop(graph: Mapping[str, Iterable[str]], component: set[str]) -> list[str]:
    start = min(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        room = queue.popleft()
        for other in sorted(graph.get(room, ())):
            if other == start:
                path = [room]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if other in component and other not in came_from:
                came_from[other] = room
                queue.append(other)
    raise AssertionError(f"no loop through {start}")  # a component of two or more always has one


def _described(loop: list[str], imports: list[RoomImport]) -> str:
    lines = [" -> ".join(loop)]
    for room, other in pairwise(loop):
        lines += [f"    {i}" for i in imports if room_of(i.module.name) == room and i.room == other]
    return "\n".join(lines)


def test_the_rooms_are_found() -> None:
    # An import graph that missed the imports would find no loop and pass.
    commands = {(room_of(i.module.name), i.room) for i in room_imports("commands")}
    assert ("calagent.commands.caldav", "calagent.commands.ical") in commands
    # `from calagent.commands.caldav import remote, rows`: a sub-package's module, by its name.
    assert ("calagent.commands.caldav", "calagent.commands.adapters") in commands
    # A sub-package's sub-package is its room too: `tasks/domain/changes.py` is in `tasks`.
    assert ("calagent.commands.caldav", "calagent.commands.tasks") in commands
    gateway = {(room_of(i.module.name), i.room) for i in room_imports("gateway")}
    assert ("calagent.gateway.state", "calagent.gateway.mailbox") in gateway


def test_a_loop_is_found_through_every_room_in_it() -> None:
    graph = {"a": ["b"], "b": ["c", "d"], "c": ["a"], "d": [], "e": ["e2"], "e2": ["e"]}
    assert loops(graph) == [["a", "b", "c", "a"], ["e", "e2", "e"]]
    assert loops({"a": ["b"], "b": ["c"], "c": []}) == []


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_no_room_of_a_service_imports_itself_back(service: str) -> None:
    imports = room_imports(service)
    graph: dict[str, set[str]] = defaultdict(set)
    for found in imports:
        graph[room_of(found.module.name)].add(found.room)
    described = [_described(loop, imports) for loop in loops(graph)]
    assert not described, "rooms in a loop:\n" + "\n".join(described)


def js_imports(source: str) -> set[str]:
    """The page's modules one module's source imports, by name (`./chat.js` is `chat`)."""
    return {static or dynamic for static, dynamic in _JS_IMPORT.findall(source)}


def page_imports() -> dict[str, set[str]]:
    return {path.stem: js_imports(path.read_text(encoding="utf-8")) for path in sorted(PAGE.glob("*.js"))}


def test_every_form_of_a_js_import_is_read() -> None:
    source = """
import { a } from "./one.js";
import {
  b,
  c,
} from './two.js';
import "./three.js";
import * as four from "./four.js";
export { d } from "./five.js";
const six = await import("./six.js");
const not_an_import = "./seven.js";
"""
    assert js_imports(source) == {"one", "two", "three", "four", "five", "six"}


def test_the_pages_modules_are_found() -> None:
    # A reader that missed the imports would find no loop and pass.
    graph = page_imports()
    assert len(graph) > 10
    assert {"calendar", "chat", "details", "session", "settings"} <= graph["app"]
    assert "dates" in graph["cards"]  # an import over several lines
    assert set().union(*graph.values()) <= set(graph)  # every module imported is one of the page's


def test_no_module_of_the_page_imports_itself_back() -> None:
    graph = page_imports()
    found = [" -> ".join(loop) for loop in loops(graph)]
    assert not found, "the page's modules in a loop:\n" + "\n".join(found)
