"""Which event a change is about (contract §20): the candidates a change carries from the turn's
find, and the user's pick read by code with zero model calls."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from calagent.agent.domain.choosing import Found, candidates_for, choose
from calagent.agent.domain.pending import LastAssistant, consent_to, timed_gate
from calagent.agent.domain.session import ArchivedMessage
from calagent.agent.loop import TurnRunner
from calagent.agent.ports import AgentCommand, AgentQuery
from calagent.contracts.commands import (
    CommandResult,
    EventCandidate,
    EventOut,
    MergeStub,
    PrepareChange,
    StubOut,
    StubSlots,
)
from calagent.contracts.envelope import Envelope
from calagent.contracts.queries import FindEventsQuery, QueryResult, TurnContext
from calagent.contracts.time import ParsedReply, SlotPatch
from calagent.contracts.turns import DirectCall, TurnEvent, TurnRequested
from calagent.runtime.clock import FrozenClock

from .test_agent_runner import FakeModel, FakeStore, FakeTime, reply

pytestmark = pytest.mark.unit

NOW = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)  # Thursday 10:00 in Shanghai
TZ = "Asia/Shanghai"


def at(day: str, clock: str) -> datetime:
    return datetime.fromisoformat(f"{day}T{clock}:00+08:00")


def event(event_id: str, title: str, day: str, clock: str) -> EventOut:
    start = at(day, clock)
    return EventOut(
        id=event_id,
        title=title,
        start=start,
        end=start + timedelta(hours=1),
        calendar="工作",
        weekday=start.isoweekday(),
        tz=TZ,
    )


# Tomorrow (Friday) at 15:00 and 17:00, and Saturday at 17:00.
MEETINGS = (
    event("e1", "和张三开会", "2026-09-25", "15:00"),
    event("e2", "和张三吃饭", "2026-09-25", "17:00"),
    event("e3", "和张三开会", "2026-09-26", "17:00"),
)


def asking(*events: EventOut, stub_id: str = "s1") -> StubOut:
    return StubOut(
        id=stub_id,
        status="held",
        title=events[0].title,
        slots=StubSlots(),
        expires_at=NOW + timedelta(minutes=30),
        kind="change",
        hold_reason="which_event",
        event_candidates=tuple(
            EventCandidate(event_id=e.id, title=e.title, start=e.start, end=e.end, calendar=e.calendar)
            for e in events
        ),
    )


def read(points: bool = True, days: tuple[date, ...] = (), **patch: Any) -> ParsedReply:
    """The time service's reading of a reply (`calagent parse-reply`), as the turn context brings it."""
    return ParsedReply(patch=SlotPatch(**patch), complete=False, points_at_one=points, days=days)


FRIDAY, SATURDAY = date(2026, 9, 25), date(2026, 9, 26)


@pytest.mark.parametrize(
    ("text", "parsed", "picked"),
    [
        # Ordinals, in either language; one past the list asks again.
        ("第二个", None, "e2"),
        ("就第2个吧", None, "e2"),
        ("2", None, "e2"),
        ("#3", None, "e3"),
        ("number 2", None, "e2"),
        ("the second one", None, "e2"),
        ("Third.", None, "e3"),
        ("最后一个", None, "e3"),
        ("第四个", None, "ask_again"),
        # Its time, day or weekday as the time service reads them ("五点" is 05:00 or 17:00).
        ("三点那个", read(ambiguous_time="03:00"), "e1"),
        ("五点那个", read(ambiguous_time="05:00"), "ask_again"),
        ("明天五点那个", read(date="D+1", ambiguous_time="05:00", days=(FRIDAY,)), "e2"),
        ("周六那个", read(weekday=6), "e3"),
        ("后天的", read(date="D+2", days=(SATURDAY,)), "e3"),
        ("the 3pm one", read(time="15:00"), "e1"),
        ("九点那个", read(time="09:00"), "ask_again"),
        # Title words one of them has; words all of them have ask again.
        ("吃饭那个", read(points=False), "e2"),
        ("和张三吃饭", None, "e2"),
        ("张三那个", None, "ask_again"),
        # Anything else is not a choice: the model reads it.
        ("明天天气怎么样", read(points=False, date="D+1", days=(FRIDAY,)), None),
        ("把吃饭那个删了", None, None),
    ],
)
def test_a_reply_picks_one_of_the_candidates_or_asks_again_or_is_the_models(
    text: str, parsed: ParsedReply | None, picked: str | None
) -> None:
    assert choose(text, asking(*MEETINGS), parsed, TZ) == picked


def test_a_change_carries_what_the_find_it_was_chosen_from_listed_for_the_same_words() -> None:
    lunch = event("e4", "午饭", "2026-09-25", "12:00")
    by_words = Found("张三", MEETINGS)
    by_range = Found(None, (*MEETINGS, lunch))
    assert candidates_for("e3", [by_words]) == ("e3", "e1", "e2")
    # A search of a range only: the events titled like the one picked.
    assert candidates_for("e3", [by_range]) == ("e3", "e1")
    assert candidates_for("e4", [by_range]) == ("e4",)
    # The latest find that listed it counts; an id no find listed carries nothing.
    assert candidates_for("e1", [by_words, Found("开会", (MEETINGS[0],))]) == ("e1",)
    assert candidates_for("e9", [by_words]) == ()


def test_nothing_consents_to_a_change_still_asking_which() -> None:
    stub = asking(*MEETINGS[:2])
    assert consent_to("确认", stub, own_words=True) is None
    assert consent_to("好的，改吧", stub, own_words=True) is None
    last = LastAssistant(at=NOW, offer_command_id=stub.id)
    window = timedelta(minutes=30)
    assert timed_gate("确认", stub=stub, last_assistant=last, now=NOW, window=window, own_words=True) is None
    assert (
        timed_gate("算了", stub=stub, last_assistant=last, now=NOW, window=window, own_words=True) == "refuse"
    )
    one = stub.model_copy(update={"event_candidates": stub.event_candidates[:1]})
    assert consent_to("确认", one, own_words=True) == "confirm"


# ---- through the turn runner ------------------------------------------------------------------


class ChoosingCommands:
    """Commands as the turn sees them: a find listing two meetings, a change that asks which, and a
    pick that offers the change for the one picked."""

    def __init__(self, stub: StubOut | None = None, parsed: ParsedReply | None = None) -> None:
        self.stub = stub
        self.parsed = parsed
        self.executed: list[AgentCommand] = []

    async def execute(self, command: AgentCommand) -> CommandResult:
        self.executed.append(command)
        if isinstance(command, PrepareChange):
            chosen = [e for i in command.candidates for e in MEETINGS if e.id == i]
            return CommandResult(status="held", stub=asking(*chosen))
        if isinstance(command, MergeStub) and command.pick is not None:
            picked = next(e for e in MEETINGS if e.id == command.pick)
            stub = asking(picked).model_copy(
                update={"hold_reason": "change_confirmation", "event_candidates": ()}
            )
            return CommandResult(status="held", stub=stub)
        return CommandResult(status="error")

    async def query(self, query: AgentQuery) -> QueryResult:
        if isinstance(query, TurnContext):
            return QueryResult(calendars=("工作",), stub=self.stub, parsed=self.parsed)
        if isinstance(query, FindEventsQuery):
            return QueryResult(events=MEETINGS[:2])
        return QueryResult()


async def run_turn(
    commands: ChoosingCommands, model: FakeModel, text: str, *, offered: str | None = None
) -> tuple[Any, list[TurnEvent]]:
    events: list[TurnEvent] = []

    async def sink(item: TurnEvent) -> None:
        events.append(item)

    runner = TurnRunner(
        clock=FrozenClock(NOW),
        model=model,
        commands=commands,
        time=FakeTime(),
        store=FakeStore(),
        session_gap_minutes=120,
    )
    env = Envelope(turn_id="t2", user_id="u1", conversation_id="c", occurred_at=NOW, tz=TZ)
    history = [
        ArchivedMessage(
            role="user", content="把明天和张三的会改到后天", created_at=NOW - timedelta(minutes=1)
        ),
        ArchivedMessage(
            role="assistant",
            content="要改哪一个？",
            created_at=NOW - timedelta(minutes=1),
            offer_command_id=offered,
        ),
    ]
    answer, _ = await runner.run(
        TurnRequested(envelope=env, text=text, raw_text=text), "t2", sink, history=history
    )
    return answer, events


async def test_a_change_the_model_picks_from_a_find_of_two_carries_both_the_models_pick_first() -> None:
    commands = ChoosingCommands()
    model = FakeModel(
        [
            reply("", ("find_events", {"start": "D+1", "end": "D+2", "text": "张三"})),
            reply("", ("update_schedule", {"event_id": "e2", "date": "D+2"})),
        ]
    )
    answer, _ = await run_turn(commands, model, "把明天和张三的会改到后天")
    [change] = [c for c in commands.executed if isinstance(c, PrepareChange)]
    assert (change.event_id, change.candidates) == ("e2", ("e2", "e1"))
    assert answer.outcome == "held"
    assert [c.event_id for c in answer.command.event_candidates] == ["e2", "e1"]


async def test_a_bare_confirmation_of_a_change_asking_which_asks_again_with_no_model_and_no_write() -> None:
    stub = asking(*MEETINGS[:2])
    commands = ChoosingCommands(stub)
    answer, _ = await run_turn(commands, FakeModel([]), "确认", offered=stub.id)
    assert (answer.outcome, answer.model_calls, commands.executed) == ("held", 0, [])
    assert answer.command is not None and len(answer.command.event_candidates) == 2


async def test_a_reply_naming_one_picks_it_with_no_model_and_a_reply_naming_several_asks_again() -> None:
    stub = asking(*MEETINGS[:2])
    commands = ChoosingCommands(stub, read(ambiguous_time="05:00"))
    answer, _ = await run_turn(commands, FakeModel([]), "五点那个", offered=stub.id)
    assert (answer.outcome, answer.model_calls) == ("held", 0)
    [pick] = commands.executed
    assert isinstance(pick, MergeStub) and (pick.command_id, pick.pick, pick.confirm) == ("s1", "e2", False)
    assert answer.command is not None and answer.command.event_candidates == ()
    # "张三的" is in both titles: asked again, nothing sent.
    again = ChoosingCommands(stub, read(points=False))
    answer, _ = await run_turn(again, FakeModel([]), "张三的", offered=stub.id)
    assert (answer.outcome, answer.model_calls, again.executed) == ("held", 0, [])


async def test_the_models_confirmation_of_a_change_asking_which_runs_nothing() -> None:
    stub = asking(*MEETINGS[:2])
    commands = ChoosingCommands(stub)
    model = FakeModel([reply("", ("confirm_command", {}))])
    # Not a bare word: the model reads it, and its confirmation is refused by code.
    answer, _ = await run_turn(commands, model, "确认，就这么改吧", offered=stub.id)
    assert answer.model_calls == 1
    assert [c.result for c in answer.tool_calls] == ["refused:not_consent"]
    assert commands.executed == []


async def test_a_change_the_user_names_on_the_page_carries_just_that_event() -> None:
    commands = ChoosingCommands(asking(*MEETINGS[:2]))
    runner = TurnRunner(
        clock=FrozenClock(NOW),
        model=FakeModel([]),
        commands=commands,
        time=FakeTime(),
        store=FakeStore(),
        session_gap_minutes=120,
    )
    env = Envelope(turn_id="t3", user_id="u1", conversation_id="c", occurred_at=NOW, tz=TZ)
    direct = DirectCall(tool="delete_schedule", arguments={"event_id": "e2"})
    turn = TurnRequested(envelope=env, text="delete e2", raw_text="delete e2", direct=direct)

    async def sink(item: TurnEvent) -> None:
        return None

    await runner.run(turn, "t3", sink)
    [change] = [c for c in commands.executed if isinstance(c, PrepareChange)]
    assert change.candidates == ("e2",)
