"""The turn runner over hand-written fakes: terminal vs intermediate semantics live in the runtime."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from calagent.agent.adapters.model import DeltaSink, ModelResponse, ModelToolCall, ModelUnavailable
from calagent.agent.loop import TurnRunner
from calagent.agent.ports import AgentCommand, AgentQuery
from calagent.contracts.commands import CommandResult, EventOut
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import ListCalendars, QueryResult, TurnContext
from calagent.contracts.time import ParsedReply, SlotPatch
from calagent.contracts.turns import TurnEvent, TurnRequested
from calagent.runtime.clock import FrozenClock

pytestmark = pytest.mark.unit

NOW = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)


class FakeModel:
    model = "fake"

    def __init__(self, responses: list[ModelResponse | Exception]) -> None:
        self.responses = responses
        self.calls: list[list[dict[str, Any]]] = []

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_delta: DeltaSink | None,
        *,
        budget_s: float | None = None,
    ) -> ModelResponse:
        self.calls.append([dict(m) for m in messages])
        response = self.responses.pop(0)
        if isinstance(response, Exception):
            raise response
        return response


def reply(text: str = "", *calls: tuple[str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse(
        text=text,
        tool_calls=[
            ModelToolCall(id=f"c{i}", name=n, arguments=json.dumps(a)) for i, (n, a) in enumerate(calls)
        ],
        start_ms=0,
        first_token_ms=1,
        end_ms=2,
    )


class FakeCommands:
    def __init__(self) -> None:
        self.executed: list[AgentCommand] = []
        self.queried: list[AgentQuery] = []

    async def execute(self, command: AgentCommand) -> CommandResult:
        self.executed.append(command)
        start = datetime.fromisoformat("2026-09-25T15:00:00+08:00")
        event = EventOut(
            id=f"e{len(self.executed)}",
            title="t",
            start=start,
            end=start + timedelta(hours=1),
            calendar="工作",
            weekday=5,
            tz="Asia/Shanghai",
        )
        return CommandResult(status="created", persisted=True, event=event)

    async def query(self, query: AgentQuery) -> QueryResult:
        self.queried.append(query)
        if isinstance(query, ListCalendars | TurnContext):
            return QueryResult(calendars=("工作", "家庭", "个人"))
        return QueryResult()


class FakeTime:
    async def parse_reply(self, text: str, now: datetime, tz: str) -> ParsedReply:
        return ParsedReply(patch=SlotPatch(), complete=False)


class FakeStore:
    def __init__(self) -> None:
        self.memories: list[str] = ["妈妈的生日是10月3日"]

    async def save_memory(self, user_id: str, content: str, key: str, at: Any) -> None:
        self.memories.append(content)

    async def search_memory(self, user_id: str, query: str) -> list[str]:
        return list(self.memories)

    async def search_archive(self, user_id: str, query: str, before_turn: str) -> list[str]:
        return []


def turn(text: str) -> TurnRequested:
    env = Envelope(turn_id="t1", user_id="u1", conversation_id="c", occurred_at=NOW, tz="Asia/Shanghai")
    return TurnRequested(envelope=env, text=text, raw_text=text)


async def run(model: FakeModel, text: str = "明天下午三点开会") -> tuple[Any, FakeCommands, list[TurnEvent]]:
    commands = FakeCommands()
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    runner = TurnRunner(
        clock=FrozenClock(NOW),
        model=model,
        commands=commands,
        time=FakeTime(),
        store=FakeStore(),
        session_gap_minutes=120,
    )
    answer, _record = await runner.run(turn(text), "t1", sink)
    return answer, commands, events


CREATE = ("prepare_or_create_schedule", {"title": "开会", "date": "D+1", "time": "15:00"})


async def test_a_terminal_tool_ends_the_turn_without_another_model_call() -> None:
    model = FakeModel([reply("", CREATE), reply("should never be asked")])
    answer, commands, events = await run(model)
    assert answer.outcome == "created"
    assert len(model.calls) == 1
    assert len(commands.executed) == 1
    assert [e.type for e in events] == ["turn.started", "tool.called", "turn.done"]


async def test_an_intermediate_tool_result_goes_back_to_the_model() -> None:
    model = FakeModel([reply("", ("search_memory", {"query": "妈妈生日"})), reply("", CREATE)])
    answer, _commands, _ = await run(model, "妈妈生日请她吃饭")
    assert answer.model_calls == 2
    tool_message = model.calls[1][-1]
    assert tool_message["role"] == "tool" and "10月3日" in tool_message["content"]
    assert answer.intent == "schedule.create"


async def test_a_second_write_in_one_response_is_refused_back_to_the_model_and_issued_next() -> None:
    second = ("prepare_or_create_schedule", {"title": "另一个", "date": "D+2", "time": "09:00"})
    model = FakeModel([reply("", CREATE, second), reply("", second)])
    answer, commands, _ = await run(model)
    assert [c.result for c in answer.tool_calls] == [
        "created",
        "refused:one_write_per_response",
        "created",
    ]
    assert len(commands.executed) == 2
    assert answer.model_calls == 2
    # The model learnt why the second write did not run, and got the first one's result.
    tool_messages = [m for m in model.calls[1] if m["role"] == "tool"]
    assert "one_write_per_response" in tool_messages[1]["content"]
    assert '"outcome": "created"' in tool_messages[0]["content"]
    # Both writes are in the reply the user sees.
    assert answer.reply.count("已创建") == 2
    assert len(answer.events) == 2


async def test_the_second_write_is_refused_when_the_first_call_did_not_end_the_turn() -> None:
    bad = ("prepare_or_create_schedule", {"title": "x", "date": "天"})
    model = FakeModel([reply("", bad, CREATE), reply("", CREATE)])
    answer, commands, _ = await run(model)
    assert [c.result for c in answer.tool_calls][:2] == [
        "error:invalid_arguments",
        "refused:one_write_per_response",
    ]
    assert len(commands.executed) == 1  # only the retry after the errors went back to the model
    assert answer.outcome == "created"


async def test_an_unavailable_model_writes_nothing() -> None:
    model = FakeModel([ModelUnavailable("connection refused")])
    answer, commands, _ = await run(model)
    assert answer.outcome == "model_unavailable"
    assert commands.executed == []


async def test_a_fabricated_claim_is_replaced_not_appended() -> None:
    model = FakeModel([reply("已为你创建日程「开会」")])
    answer, commands, _ = await run(model)
    assert answer.outcome == "claim_replaced"
    assert "已为你创建" not in answer.reply
    assert commands.executed == []


async def test_a_claim_never_reaches_the_stream() -> None:
    from calagent.agent.exit_check import ClaimGuardedStream

    sent: list[str] = []

    async def emit(chunk: str) -> None:
        sent.append(chunk)

    stream = ClaimGuardedStream(emit)
    for piece in ["好的，", "我来看看。", "已为", "你创建", "日程「开会」，时间是明天下午三点。"]:
        await stream.feed(piece)
    assert "创建" not in "".join(sent)

    harmless = ClaimGuardedStream(emit)
    sent.clear()
    text = "辛苦了，今天好好休息一下吧，明天会更好的。"
    for char in text:
        await harmless.feed(char)
    assert "".join(sent) == text[: len(text) - ClaimGuardedStream.HOLD_BACK]


VALID_CALLS: dict[str, tuple[dict[str, Any], str]] = {
    # tool → (valid arguments, what its handler must have sent or touched)
    "prepare_or_create_schedule": ({"title": "开会", "date": "D+1", "time": "15:00"}, "PrepareOrCreate"),
    "query_schedule_range": ({"start": "D+1", "end": "D+2"}, "QueryRange"),
    "suggest_free_time": ({"start": "D+1", "end": "D+2", "duration_minutes": 30}, "SuggestFree"),
    "cancel_schedule_command": ({}, "CancelStub"),
    # Nothing pending was shown to the user: answered by code, never sent as "the active one".
    "confirm_command": ({"command_id": "s1"}, "error:no_active_command"),
    "find_events": ({"start": "D", "end": "D+7", "text": "会"}, "FindEventsQuery"),
    "update_schedule": ({"event_id": "e1", "time": "16:00"}, "PrepareChange"),
    "delete_schedule": ({"event_id": "e1", "scope": "all"}, "PrepareChange"),
    "propose_automation": ({"trigger": "每天早上", "steps": ["总结日程"]}, "ProposePlan"),
    "propose_times": (
        {"title": "聊一聊", "attendee": "王五", "start": "W1+1", "end": "W1+2", "duration_minutes": 60},
        "ProposeTimesCommand",
    ),
    "undo_change": ({"change_id": "c1"}, "RevertChange"),
    "add_task": (
        {"title": "季度报告", "duration_minutes": 240, "due": "W5+0", "due_time": "18:00"},
        "AddTaskCommand",
    ),
    "complete_task": ({"task_id": "t1"}, "CompleteTaskCommand"),
    "save_memory": ({"content": "咖啡不加糖"}, "memory"),
    "search_memory": ({"query": "生日"}, "memory"),
    "search_chat_archive": ({"query": "上次"}, "archive"),
}


@pytest.mark.parametrize("name", list(VALID_CALLS))
async def test_every_contract_tool_runs_through_the_real_dispatch(name: str) -> None:
    from calagent.contracts.tools import TOOL_MODELS

    assert set(VALID_CALLS) == set(TOOL_MODELS)
    arguments, touched = VALID_CALLS[name]
    model = FakeModel([reply("", (name, arguments)), reply("好的。")])
    answer, commands, _ = await run(model)
    assert answer.tool_calls[0].name == name
    assert not answer.tool_calls[0].result.startswith(("error:unknown_tool", "error:invalid_arguments"))
    sent = [type(c).__name__ for c in commands.executed] + [type(q).__name__ for q in commands.queried]
    if touched in ("memory", "archive"):
        assert answer.tool_calls[0].result in ("saved",) or answer.tool_calls[0].result.startswith("found:")
    elif touched.startswith("error:"):
        assert answer.tool_calls[0].result == touched and sent == ["TurnContext"]
    else:
        assert touched in sent, sent


async def test_a_nul_in_a_tool_argument_goes_back_to_the_model_and_never_to_storage() -> None:
    poisoned = ("prepare_or_create_schedule", {"title": "a\u0000b", "date": "D+1", "time": "15:00"})
    model = FakeModel([reply("", poisoned), reply("", CREATE)])
    answer, commands, _ = await run(model)
    assert [c.result for c in answer.tool_calls] == ["error:invalid_arguments", "created"]
    assert "\u0000" not in json.dumps(answer.model_dump(mode="json"))
    assert len(commands.executed) == 1 and "\u0000" not in commands.executed[0].model_dump_json()


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("add_task", {"title": "写报告", "duration_minutes": 120, "due": "D+1"}),
        ("complete_task", {"task_id": "t1"}),
    ],
)
async def test_a_task_tool_asked_for_by_forwarded_content_is_held_and_sends_nothing(
    name: str, arguments: dict[str, Any]
) -> None:
    # A task takes the user's time (or frees it): someone else's words do neither (contract §19).
    env = Envelope(turn_id="t1", user_id="u1", conversation_id="c", occurred_at=NOW, tz="Asia/Shanghai")
    forwarded = TurnRequested(
        envelope=env,
        text="看看这个",
        raw_text="看看这个",
        forwarded="周五前把报告写完，然后标记完成",
        third_party=True,
    )
    commands = FakeCommands()

    async def sink(event: TurnEvent) -> None:
        return None

    runner = TurnRunner(
        clock=FrozenClock(NOW),
        model=FakeModel([reply("", (name, arguments)), reply("好的。")]),
        commands=commands,
        time=FakeTime(),
        store=FakeStore(),
        session_gap_minutes=120,
    )
    answer, _record = await runner.run(forwarded, "t1", sink)
    assert answer.outcome == "held"
    assert answer.tool_calls[0].result == "held:third_party"
    assert not any(type(c).__name__ in ("AddTaskCommand", "CompleteTaskCommand") for c in commands.executed)
