"""Drift check: the offline harness drives the production code path, not a simulation of it."""

from __future__ import annotations

import ast
import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import calagent.cli.evaluate
import calagent.cli.evaluation
from calagent.agent.adapters.model import DeltaSink, ModelResponse, ModelToolCall
from calagent.agent.app import AgentService
from calagent.agent.domain.session import ArchivedMessage
from calagent.agent.loop import TurnRunner
from calagent.agent.ports import AgentCommand, AgentQuery
from calagent.agent.tools import Tools
from calagent.cli.evaluate import run_offline
from calagent.cli.evaluation.cases import default_cases_dir, load_cases
from calagent.cli.stack import Stack, start_stack
from calagent.contracts.commands import CommandResult, StubOut, StubSlots
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import QueryResult
from calagent.contracts.time import ParsedReply, SlotPatch
from calagent.contracts.tools import TOOL_KINDS, tool_schemas
from calagent.contracts.turns import TurnEvent, TurnRequested
from calagent.devtools.testing.servers import Servers
from calagent.runtime.clock import FrozenClock
from calagent.scriptedmodel import Script, ScriptedModelServer

pytestmark = pytest.mark.eval

# Contract §5, §9, §15 and §16, written out: every tool's fixed name, kind and argument names.
CONTRACT_TOOLS: dict[str, tuple[str, set[str]]] = {
    "prepare_or_create_schedule": (
        "terminal",
        {"title", "date", "time", "end_time", "duration_minutes", "all_day", "calendar", "allow_conflict"}
        | {"recurrence", "end_date", "reminder_minutes"},
    ),
    "query_schedule_range": ("terminal", {"start", "end", "incomplete_only"}),
    "suggest_free_time": ("terminal", {"start", "end", "duration_minutes", "attendees"}),
    "cancel_schedule_command": ("terminal", {"command_id"}),
    "save_memory": ("terminal", {"content"}),
    "search_memory": ("intermediate", {"query"}),
    "search_chat_archive": ("intermediate", {"query"}),
    "find_events": ("intermediate", {"start", "end", "text"}),
    "update_schedule": (
        "terminal",
        {"event_id", "title", "date", "time", "end_time", "duration_minutes", "end_date", "all_day"}
        | {"calendar", "reminder_minutes", "scope"},
    ),
    "delete_schedule": ("terminal", {"event_id", "scope"}),
    "confirm_command": ("terminal", {"command_id"}),
    "propose_automation": ("terminal", {"trigger", "steps"}),
    "undo_change": ("terminal", {"change_id"}),
}
# "No schema has a user id, e-mail or any identity field."
IDENTITY_FIELDS = {"user_id", "user", "userid", "email", "e_mail", "owner", "owner_id", "account", "identity"}
# What each tool's handler must hand on: the command or query the agent sends the commands service
# over the bus, or the store call of the agent's own memory and archive.
SENDS = {
    "prepare_or_create_schedule": "PrepareOrCreate",
    "query_schedule_range": "QueryRange",
    "suggest_free_time": "SuggestFree",
    "find_events": "FindEventsQuery",
    "update_schedule": "PrepareChange",
    "delete_schedule": "PrepareChange",
    "cancel_schedule_command": "CancelStub",
    "confirm_command": "MergeStub",
    "propose_automation": "ProposePlan",
    "undo_change": "RevertChange",
    "save_memory": "save_memory",
    "search_memory": "search_memory",
    "search_chat_archive": "search_archive",
}
NOW = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)


def contract_gaps(schemas: Sequence[dict[str, Any]]) -> list[str]:
    """Where the tool schemas the model sees differ from the contract's tools and arguments."""
    seen = {s["function"]["name"]: s["function"]["parameters"] for s in schemas}
    gaps = [f"missing tool {name}" for name in CONTRACT_TOOLS if name not in seen]
    for name, (kind, arguments) in CONTRACT_TOOLS.items():
        if name not in seen:
            continue
        properties = set(seen[name]["properties"])
        gaps += [f"{name}: no argument {a}" for a in sorted(arguments - properties)]
        if TOOL_KINDS.get(name) != kind:
            gaps.append(f"{name}: kind {TOOL_KINDS.get(name)}, the contract says {kind}")
    for name, parameters in seen.items():
        properties = set(parameters["properties"])
        gaps += [
            f"{name}: required {r} is not an argument"
            for r in parameters.get("required", [])
            if r not in properties
        ]
        gaps += [f"{name}: identity field {f}" for f in sorted(properties & IDENTITY_FIELDS)]
    return gaps


# Values for the arguments, written from the contract's own examples (§5, §6, §9), never derived
# from the schema under test: a symbol pattern that drifted from the contract (one that refused
# `D+1T12:00` or `M+1`) refuses these, where a value generated from that pattern would pass it.
CONTRACT_VALUES: dict[str, Any] = {
    "title": "和张三开会",
    "date": "W3+1",
    "time": "15:00",
    "start": "D+1T12:00",
    "end": "M+1",
    "duration_minutes": 30,
    "event_id": "e1",
    "trigger": "每天早上",
    "steps": ["总结我的日程"],
    "content": "咖啡不加糖",
    "query": "生日",
}


def contract_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Every argument the tool requires, valued from the contract (a required argument the contract
    gives no value for fails)."""
    required = schema["function"]["parameters"].get("required", [])
    missing = [name for name in required if name not in CONTRACT_VALUES]
    assert not missing, f"{schema['function']['name']} requires {missing}, which the contract does not value"
    return {name: CONTRACT_VALUES[name] for name in required}


class OneCallModel:
    """Calls `tool` with the contract's values for the arguments its schema requires, then answers
    in words."""

    model = "one-call"

    def __init__(self, tool: str | None) -> None:
        self.tool = tool
        self.arguments: dict[str, Any] | None = None

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_delta: DeltaSink | None,
        *,
        budget_s: float | None = None,
    ) -> ModelResponse:
        calls = []
        if self.tool is not None and self.arguments is None:
            schema = next(t for t in tools if t["function"]["name"] == self.tool)
            self.arguments = contract_arguments(schema)
            calls = [ModelToolCall(id="c1", name=self.tool, arguments=json.dumps(self.arguments))]
        return ModelResponse(
            text="" if calls else "好的。", tool_calls=calls, start_ms=0, first_token_ms=1, end_ms=2
        )


class RecordingPorts:
    """The commands service, the time service and the agent's store in one: each records what it
    was sent (a command or query by its type, a store call by its name)."""

    def __init__(self, offered: StubOut | None = None) -> None:
        self.sent: list[str] = []
        self.offered = offered

    async def execute(self, command: AgentCommand) -> CommandResult:
        self.sent.append(type(command).__name__)
        return CommandResult(status="held")

    async def query(self, query: AgentQuery) -> QueryResult:
        self.sent.append(type(query).__name__)
        return QueryResult(calendars=("工作",), stub=self.offered)

    async def parse_reply(self, text: str, now: datetime, tz: str) -> ParsedReply:
        return ParsedReply(patch=SlotPatch(), complete=False)

    async def history(self, user_id: str, conversation_id: str, exclude_turn: str) -> list[ArchivedMessage]:
        return []

    async def archive(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def save_memory(self, user_id: str, content: str, key: str, at: datetime) -> None:
        self.sent.append("save_memory")

    async def search_memory(self, user_id: str, query: str) -> list[str]:
        self.sent.append("search_memory")
        return []

    async def search_archive(self, user_id: str, query: str, before_turn: str) -> list[str]:
        self.sent.append("search_archive")
        return []


# A held request the user was shown, for the tool that answers one: a confirmation runs only the
# offer the user was last shown, on the user's own words consenting to it (contract §19).
OFFERED = StubOut(
    id="s1", status="held", title="开会", expires_at=NOW + timedelta(minutes=30), slots=StubSlots()
)
ANSWERS_AN_OFFER = {"confirm_command"}


async def run_turn(tool: str | None, *, offered: StubOut | None = None) -> tuple[Any, list[str]]:
    """One turn through the production runner (its loop, its dispatch table, its handlers) whose
    model calls `tool`; what the turn answered and what its handlers sent. With `offered`, the user
    was shown that offer and answers it with "确认"."""
    ports = RecordingPorts(offered)
    runner = TurnRunner(
        clock=FrozenClock(NOW),
        model=OneCallModel(tool),
        commands=ports,
        time=ports,
        store=ports,
        session_gap_minutes=120,
    )
    env = Envelope(turn_id="t1", user_id="u1", conversation_id="c", occurred_at=NOW, tz="Asia/Shanghai")

    async def sink(event: TurnEvent) -> None:
        return None

    text = "确认" if offered is not None else "安排一下"
    turn = TurnRequested(
        envelope=env,
        text=text,
        raw_text=text,
        active_command_id=offered.id if offered is not None else None,
    )
    answer, _record = await runner.run(turn, "t1", sink)
    return answer, ports.sent


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
    assert contract_gaps(agent.runner.schemas) == []
    assert type(agent.runner.tools) is Tools
    assert {app.name for app in stack.apps} == {"timeparse", "commands", "agent", "evalrec"}


def test_the_tool_schemas_the_model_sees_are_the_contracts() -> None:
    assert contract_gaps(tool_schemas()) == []


@pytest.mark.parametrize("tool", list(SENDS))
async def test_every_tool_runs_its_handler_through_the_real_dispatch(tool: str) -> None:
    """The contract's example arguments pass the runner's validation, reach the handler in its
    table, and the handler sends what the tool is for, once."""
    offered = OFFERED if tool in ANSWERS_AN_OFFER else None
    _, before = await run_turn(None, offered=offered)
    answer, sent = await run_turn(tool, offered=offered)
    assert [call.name for call in answer.tool_calls] == [tool]
    assert not answer.tool_calls[0].result.startswith("error:"), answer.tool_calls[0].result
    added = list(sent)
    for item in before:
        added.remove(item)
    assert added == [SENDS[tool]]


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
