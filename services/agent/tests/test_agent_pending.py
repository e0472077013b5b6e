"""The pending-command rules of contract §8 the agent owns: the timed gate and the fast path."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from calagent.agent.domain.pending import LastAssistant, bare_answer, fast_path_patch, timed_gate
from calagent.agent.domain.receipts import View, command_receipt
from calagent.contracts.commands import CommandResult, EventOut, StubOut, StubSlots
from calagent.contracts.time import ParsedReply, SlotPatch

pytestmark = pytest.mark.unit

NOW = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=30)


def stub(status: str = "held", **fields: object) -> StubOut:
    values: dict[str, object] = {
        "id": "s1",
        "status": status,
        "title": "开会",
        "slots": StubSlots(date="2026-09-23", time="15:00"),
        "expires_at": NOW + timedelta(minutes=30),
    }
    values.update(fields)
    return StubOut.model_validate(values)


@pytest.mark.parametrize(
    "text",
    ["好", "好的", "好的！", "确认", "可以。", "嗯嗯", "yes", "OK", "Sure!", "do it", "Confirm.", "ok ok"],
)
def test_bare_confirmations(text: str) -> None:
    assert bare_answer(text) == "confirm"


@pytest.mark.parametrize("text", ["不要", "算了", "取消", "no", "Never mind.", "nope", "cancel", "算了吧"])
def test_bare_refusals(text: str) -> None:
    assert bare_answer(text) == "refuse"


@pytest.mark.parametrize(
    "text",
    [
        "好，改到周五",
        "好的，明天下午三点和张三开会",
        "yes but make it 4pm",
        "不用换，直接创建",
        "好累",
        "好好休息",
        "ok let's move it",
        "好 不要",  # both polarities: not a bare answer
        "",
        "。。。",
    ],
)
def test_anything_more_than_a_bare_word_is_for_the_model(text: str) -> None:
    assert bare_answer(text) is None


def offer(at: datetime = NOW, command_id: str | None = "s1") -> LastAssistant:
    return LastAssistant(at=at, offer_command_id=command_id)


def test_the_gate_needs_the_offer_to_be_the_last_message_and_inside_the_window() -> None:
    held = stub()
    kwargs = {"stub": held, "window": WINDOW, "third_party": False}
    assert timed_gate("好", last_assistant=offer(), now=NOW + timedelta(minutes=29), **kwargs) == "confirm"  # type: ignore[arg-type]
    assert timed_gate("算了", last_assistant=offer(), now=NOW, **kwargs) == "refuse"  # type: ignore[arg-type]
    # After the window the same word is ordinary chat.
    assert timed_gate("好", last_assistant=offer(), now=NOW + timedelta(minutes=31), **kwargs) is None  # type: ignore[arg-type]
    # The last assistant message was something else (chit-chat after the offer).
    assert timed_gate("好", last_assistant=offer(command_id=None), now=NOW, **kwargs) is None  # type: ignore[arg-type]
    assert timed_gate("好", last_assistant=None, now=NOW, **kwargs) is None  # type: ignore[arg-type]
    # An offer of another stub.
    assert timed_gate("好", last_assistant=offer(command_id="other"), now=NOW, **kwargs) is None  # type: ignore[arg-type]


def test_the_gate_ignores_forwarded_words_and_stubs_that_offer_nothing() -> None:
    assert (
        timed_gate("好", stub=stub(), last_assistant=offer(), now=NOW, window=WINDOW, third_party=True)
        is None
    )
    weekend = stub("needs_date", candidates=(date(2026, 9, 26), date(2026, 9, 27)))
    assert (
        timed_gate("好", stub=weekend, last_assistant=offer(), now=NOW, window=WINDOW, third_party=False)
        is None
    )
    assert (
        timed_gate("好", stub=None, last_assistant=offer(), now=NOW, window=WINDOW, third_party=False) is None
    )


def parsed(complete: bool = True, **patch: object) -> ParsedReply:
    return ParsedReply(patch=SlotPatch.model_validate(patch), complete=complete)


def test_fast_path_only_for_a_message_the_grammar_consumed_whole() -> None:
    conflict = stub("conflict", slots=StubSlots(date="2026-09-25", time="15:00"))
    assert fast_path_patch(conflict, parsed(time="16:00"), third_party=False) == SlotPatch(time="16:00")
    # The same words forwarded or quoted are someone else's answer: the model reads them.
    assert fast_path_patch(conflict, parsed(time="16:00"), third_party=True) is None
    # "删除明天下午四点的会": a date and a time inside a sentence that says something else.
    assert fast_path_patch(conflict, parsed(False, date="D+1", time="16:00"), third_party=False) is None


def test_fast_path_refuses_what_does_not_answer_the_stub() -> None:
    weekend = stub(
        "needs_date", slots=StubSlots(date="WE"), candidates=(date(2026, 9, 26), date(2026, 9, 27))
    )
    assert fast_path_patch(weekend, parsed(weekday=7, time="14:00"), third_party=False) is not None
    assert fast_path_patch(weekend, parsed(weekday=3, time="14:00"), third_party=False) is None
    assert fast_path_patch(weekend, parsed(date="D-1", time="15:00"), third_party=False) is None
    assert fast_path_patch(stub("held"), parsed(time="14:00"), third_party=False) is None
    assert fast_path_patch(None, parsed(time="14:00"), third_party=False) is None
    assert fast_path_patch(stub("conflict"), parsed(), third_party=False) is None


def test_an_ambiguous_hour_follows_the_stubs_afternoon_and_is_never_taken_as_morning() -> None:
    afternoon = stub("conflict", slots=StubSlots(date="2026-09-25", time="15:00"))
    assert fast_path_patch(afternoon, parsed(ambiguous_time="04:00"), third_party=False) == SlotPatch(
        time="16:00"
    )
    no_time = stub("needs_time", slots=StubSlots(date="2026-09-25"))
    assert fast_path_patch(no_time, parsed(ambiguous_time="03:15"), third_party=False) is None
    morning = stub("conflict", slots=StubSlots(date="2026-09-25", time="09:00"))
    assert fast_path_patch(morning, parsed(ambiguous_time="05:00"), third_party=False) is None


# ---- receipts: the year, and DST -----------------------------------------------------------------


def _event(start: datetime, end: datetime, tz: str) -> EventOut:
    return EventOut(
        id="e", title="会", start=start, end=end, calendar="工作", weekday=start.isoweekday(), tz=tz
    )


def test_a_receipt_names_the_year_only_when_it_is_not_this_year() -> None:
    start = datetime(2027, 1, 8, 15, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    result = CommandResult(
        status="created", persisted=True, event=_event(start, start + timedelta(hours=1), "Asia/Shanghai")
    )
    assert "2027年1月8日" in command_receipt(result, View("Asia/Shanghai", "zh", date(2026, 12, 1)))
    assert "Jan 8, 2027" in command_receipt(result, View("Asia/Shanghai", "en", date(2026, 12, 1)))
    assert "2027" not in command_receipt(result, View("Asia/Shanghai", "zh", date(2027, 1, 1)))


def test_a_receipt_across_a_dst_change_shows_both_offsets() -> None:
    tz = ZoneInfo("America/New_York")
    start = datetime(2026, 11, 1, 1, 30, tzinfo=tz)  # the first 01:30, EDT
    end = (start.astimezone(UTC) + timedelta(hours=1)).astimezone(tz)  # the second 01:30, EST
    result = CommandResult(status="created", persisted=True, event=_event(start, end, "America/New_York"))
    text = command_receipt(result, View("America/New_York", "en", date(2026, 10, 30)))
    assert "01:30 (UTC-04:00)–01:30 (UTC-05:00)" in text
    assert "01:30–01:30" not in text
    ordinary = datetime(2026, 11, 5, 9, 0, tzinfo=tz)
    plain = CommandResult(
        status="created",
        persisted=True,
        event=_event(ordinary, ordinary + timedelta(hours=1), "America/New_York"),
    )
    assert "09:00–10:00" in command_receipt(plain, View("America/New_York", "en", date(2026, 10, 30)))


def test_a_superseded_stub_is_named_in_one_clause() -> None:
    start = datetime(2026, 9, 25, 15, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    result = CommandResult(
        status="created",
        persisted=True,
        event=_event(start, start + timedelta(hours=1), "Asia/Shanghai"),
        superseded=stub("superseded", title="修汽车轮毂"),
    )
    text = command_receipt(result, View("Asia/Shanghai", "zh", date(2026, 9, 24)))
    assert "修汽车轮毂" in text and "已创建「会」" in text
