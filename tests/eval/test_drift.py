"""Drift check: the offline harness drives the production code path, not a simulation of it."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import calagent.cli.evaluate
import calagent.cli.evaluation
from calagent.agent.app import AgentService
from calagent.agent.loop import TurnRunner
from calagent.agent.tools import Tools
from calagent.cli.evaluate import run_offline
from calagent.cli.evaluation.cases import default_cases_dir, load_cases
from calagent.cli.stack import Stack, start_stack
from calagent.contracts.tools import TOOL_KINDS, TOOL_MODELS, tool_schemas
from calagent.runtime.testing.servers import Servers
from calagent.scriptedmodel import Script, ScriptedModelServer

pytestmark = pytest.mark.eval


@pytest.fixture(scope="module")
def scripted() -> ScriptedModelServer:
    return ScriptedModelServer(Script(rules=[]))


@pytest.fixture
async def stack(servers: Servers, database_url: str, scripted: ScriptedModelServer) -> AsyncIterator[Stack]:
    scripted.start()
    system = await start_stack(
        nats_url=servers.nats_url, database_url=database_url, model_base_url=scripted.base_url
    )
    yield system
    await system.stop()


async def test_the_stack_runs_the_production_agent(stack: Stack) -> None:
    agents = [app for app in stack.apps if app.name == "agent"]
    assert len(agents) == 1
    agent = agents[0]
    assert type(agent) is AgentService  # built by calagent.agent.app.create_app, not a stand-in
    assert agent.runner is not None
    assert type(agent.runner) is TurnRunner
    assert agent.runner.schemas == tool_schemas()
    assert type(agent.runner.tools) is Tools
    assert {app.name for app in stack.apps} == {"timeparse", "commands", "agent", "evalrec"}


def test_the_tool_table_covers_exactly_the_contract_tools() -> None:
    # The contract's names and kinds against the runner's own table of handlers: two independent
    # lists. That each handler really runs is shown by the agent's unit test
    # `test_every_contract_tool_runs_through_the_real_dispatch`.
    assert set(TOOL_KINDS) == set(TOOL_MODELS)
    assert [s["function"]["name"] for s in tool_schemas()] == list(TOOL_MODELS)
    table = Tools(commands=None, store=None, clock=None).table  # type: ignore[arg-type]
    assert set(table) == set(TOOL_MODELS.values())


async def test_what_the_scripted_model_received_in_the_eval_is_the_production_request(
    servers: Servers, scripted: ScriptedModelServer
) -> None:
    # Fresh database: this module's own already holds the stack test's rows.
    database = await asyncio.to_thread(servers.create_database)
    cases = [c for c in load_cases(default_cases_dir()) if c.group in ("opening", "intent")]
    results = await run_offline(cases, servers.nats_url, database, scripted=scripted)
    assert {r.status for r in results} == {"passed"}, [r.reason for r in results if r.status != "passed"]
    requests = scripted.requests
    assert requests
    for request in requests:
        assert request.tools == tool_schemas()
        assert request.parallel_tool_calls is False
        assert request.stream  # the production client streams


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_eval_has_no_second_dispatcher() -> None:
    """The eval speaks HTTP to the gateway; it never calls the agent, commands or gateway code itself.
    (The stack builds the services with their production factories; that is stack.py, not the eval.)
    The time service's resolver is used only to compare symbols in expectations."""
    files = [
        Path(calagent.cli.evaluate.__file__),
        *Path(calagent.cli.evaluation.__file__).parent.glob("*.py"),
    ]
    forbidden = ("calagent.agent", "calagent.commands", "calagent.gateway", "calagent.evalrec")
    for path in files:
        for name in _imports(path):
            assert not name.startswith(forbidden), f"{path.name} imports {name}"
        text = path.read_text(encoding="utf-8")
        assert "TurnRunner" not in text and "_dispatch" not in text, path.name
