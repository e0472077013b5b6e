"""The pending-command rules of contract §8 the agent owns: the timed gate and the fast path."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from calagent.agent.domain.pending import (
    LastAssistant,
    bare_answer,
    consent_to,
    fast_path_patch,
    invitation_answer,
    next_weekday_symbol,
    speaks_for_user,
    timed_gate,
)
from calagent.agent.domain.receipts import command_receipt
from calagent.agent.domain.view import View
from calagent.contracts.commands import CommandResult, EventOut, StubOut, StubSlots
from calagent.contracts.time import ParsedReply, SlotPatch

pytestmark = pytest.mark.unit

NOW = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)  # a Thursday, 10:00 in Shanghai
TZ = "Asia/Shanghai"
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
    kwargs = {"stub": held, "window": WINDOW, "own_words": True}
    assert timed_gate("好", last_assistant=offer(), now=NOW + timedelta(minutes=29), **kwargs) == "confirm"  # type: ignore[arg-type]
    assert timed_gate("算了", last_assistant=offer(), now=NOW, **kwargs) == "refuse"  # type: ignore[arg-type]
    # After the window the same word is ordinary chat.
    assert timed_gate("好", last_assistant=offer(), now=NOW + timedelta(minutes=31), **kwargs) is None  # type: ignore[arg-type]
    # The last assistant message was something else (chit-chat after the offer).
    assert timed_gate("好", last_assistant=offer(command_id=None), now=NOW, **kwargs) is None  # type: ignore[arg-type]
    assert timed_gate("好", last_assistant=None, now=NOW, **kwargs) is None  # type: ignore[arg-type]
    # An offer of another stub.
    assert timed_gate("好", last_assistant=offer(command_id="other"), now=NOW, **kwargs) is None  # type: ignore[arg-type]


def test_the_gate_ignores_words_not_the_users_own_and_stubs_that_offer_nothing() -> None:
    assert (
        timed_gate("好", stub=stub(), last_assistant=offer(), now=NOW, window=WINDOW, own_words=False) is None
    )
    weekend = stub("needs_date", candidates=(date(2026, 9, 26), date(2026, 9, 27)))
    assert (
        timed_gate("好", stub=weekend, last_assistant=offer(), now=NOW, window=WINDOW, own_words=True) is None
    )
    assert timed_gate("好", stub=None, last_assistant=offer(), now=NOW, window=WINDOW, own_words=True) is None


def parsed(complete: bool = True, **patch: object) -> ParsedReply:
    return ParsedReply(patch=SlotPatch.model_validate(patch), complete=complete)


def fast(stub: StubOut | None, reply: ParsedReply, own_words: bool = True) -> SlotPatch | None:
    return fast_path_patch(stub, reply, own_words=own_words, now=NOW, tz=TZ)


def test_a_reply_quote_leaves_the_users_own_words_a_quote_or_forward_alone_is_not_them() -> None:
    # "> 周末去买菜\n周日下午5点": the gateway took the quote out; the rest is the user's.
    assert speaks_for_user(promoted=False, forwarded=None)
    # "> 好": nothing of the user's own, the quote stands in for it.
    assert not speaks_for_user(promoted=True, forwarded=None)
    # "好\n---------- Forwarded message ----------\n确认": the yes may be about the forward.
    assert not speaks_for_user(promoted=False, forwarded="确认")
    assert not speaks_for_user(promoted=True, forwarded="")


def test_fast_path_only_for_a_message_the_grammar_consumed_whole() -> None:
    conflict = stub("conflict", slots=StubSlots(date="2026-09-25", time="15:00"))
    assert fast(conflict, parsed(time="16:00")) == SlotPatch(time="16:00")
    # The same words standing in for someone else's answer: the model reads them.
    assert fast(conflict, parsed(time="16:00"), own_words=False) is None
    # "删除明天下午四点的会": a date and a time inside a sentence that says something else.
    assert fast(conflict, parsed(False, date="D+1", time="16:00")) is None


def test_fast_path_refuses_what_does_not_answer_the_stub() -> None:
    weekend = stub(
        "needs_date", slots=StubSlots(date="WE"), candidates=(date(2026, 9, 26), date(2026, 9, 27))
    )
    assert fast(weekend, parsed(weekday=7, time="14:00")) == SlotPatch(weekday=7, time="14:00")
    assert fast(weekend, parsed(date="D-1", time="15:00")) is None
    assert fast(stub("held"), parsed(time="14:00")) is None
    assert fast(None, parsed(time="14:00")) is None
    assert fast(stub("conflict"), parsed()) is None


@pytest.mark.parametrize(
    ("today", "weekday", "symbol"),
    [
        (date(2026, 9, 24), 6, "W6+0"),  # Thursday → this Saturday
        (date(2026, 9, 24), 4, "W4+0"),  # today itself
        (date(2026, 9, 24), 3, "W3+1"),  # Wednesday has passed: next week's
        (date(2026, 9, 27), 6, "W6+1"),  # on a Sunday every other day is next week's
        (date(2026, 9, 27), 7, "W7+0"),
        (date(2026, 9, 21), 1, "W1+0"),
    ],
)
def test_a_weekday_is_the_next_such_day_on_or_after_today(today: date, weekday: int, symbol: str) -> None:
    assert next_weekday_symbol(weekday, today) == symbol


def test_a_day_named_to_a_stub_without_candidates_moves_it_there() -> None:
    tomorrow = stub("needs_time", slots=StubSlots(date="2026-09-25"))
    assert fast(tomorrow, parsed(weekday=6, time="19:00")) == SlotPatch(date="W6+0", time="19:00")
    # A conflict knows its day from its proposed start (in the user's zone: 01:00 local is the 26th).
    clash = stub(
        "conflict",
        slots=StubSlots(date="D+1", time="01:00"),
        proposed_start=datetime(2026, 9, 25, 17, 0, tzinfo=UTC),
    )
    assert fast(clash, parsed(weekday=3, time="15:00")) == SlotPatch(date="W3+1", time="15:00")
    # A date beside the weekday already says the day.
    assert fast(tomorrow, parsed(date="--10-03", weekday=6)) == SlotPatch(date="--10-03", weekday=6)


def test_a_weekday_outside_the_candidates_moves_the_stub_or_goes_to_the_model() -> None:
    weekend = stub(
        "needs_date", slots=StubSlots(date="WE"), candidates=(date(2026, 9, 26), date(2026, 9, 27))
    )
    assert fast(weekend, parsed(weekday=1, time="14:00")) == SlotPatch(date="W1+1", time="14:00")
    # Next weekend's stub: "周一" could be the Monday before it or after it.
    later = stub(
        "needs_date", slots=StubSlots(date="WE+1"), candidates=(date(2026, 10, 3), date(2026, 10, 4))
    )
    assert fast(later, parsed(weekday=1, time="14:00")) is None
    assert fast(later, parsed(weekday=6, time="14:00")) == SlotPatch(weekday=6, time="14:00")


def test_a_weekday_for_a_stub_whose_day_is_unknown_or_far_goes_to_the_model() -> None:
    far = stub("needs_time", slots=StubSlots(date="2026-10-09"))
    assert fast(far, parsed(weekday=6, time="15:00")) is None
    unpinned = stub("needs_time", slots=StubSlots(date="D+1"))
    assert fast(unpinned, parsed(weekday=6, time="15:00")) is None
    past = stub("needs_time", slots=StubSlots(date="2026-09-23"))
    assert fast(past, parsed(weekday=6, time="15:00")) is None


def test_an_ambiguous_hour_follows_the_stubs_afternoon_and_is_never_taken_as_morning() -> None:
    afternoon = stub("conflict", slots=StubSlots(date="2026-09-25", time="15:00"))
    assert fast(afternoon, parsed(ambiguous_time="04:00")) == SlotPatch(time="16:00")
    no_time = stub("needs_time", slots=StubSlots(date="2026-09-25"))
    assert fast(no_time, parsed(ambiguous_time="03:15")) is None
    morning = stub("conflict", slots=StubSlots(date="2026-09-25", time="09:00"))
    assert fast(morning, parsed(ambiguous_time="05:00")) is None


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


# ---- an invitation received by mail is answered by its own words ---------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("接受", "ACCEPTED"),
        ("Accept!", "ACCEPTED"),
        ("拒绝。", "DECLINED"),
        ("暂定", "TENTATIVE"),
        ("maybe", "TENTATIVE"),
    ],
)
def test_an_invitation_offer_takes_a_bare_answer(text: str, answer: str) -> None:
    assert invitation_answer(text, stub=stub(kind="invitation"), own_words=True) == answer


@pytest.mark.parametrize("text", ["接受，但我会晚到", "接受 拒绝", "好", "accept the meeting on friday"])
def test_anything_more_than_a_bare_answer_is_for_the_model(text: str) -> None:
    assert invitation_answer(text, stub=stub(kind="invitation"), own_words=True) is None


def test_the_answer_words_mean_nothing_without_an_invitation_or_in_someone_elses_words() -> None:
    assert invitation_answer("接受", stub=stub(), own_words=True) is None
    assert invitation_answer("接受", stub=None, own_words=True) is None
    assert invitation_answer("接受", stub=stub(kind="invitation"), own_words=False) is None
    assert invitation_answer("接受", stub=stub("cancelled", kind="invitation"), own_words=True) is None


@pytest.mark.parametrize(
    ("words", "kind", "consent"),
    [
        ("确认", "create", "confirm"),
        ("确认，记下来", "create", "confirm"),
        ("好的，帮我加上", "change", "confirm"),
        ("接受", "change", None),
        ("今天天气怎么样", "change", None),
        ("好，算了", "change", None),
        ("接受", "invitation", "ACCEPTED"),
        ("拒绝，谢谢", "invitation", "DECLINED"),
        ("好", "invitation", None),
        ("接受，拒绝", "invitation", None),
    ],
)
def test_consent_answers_only_an_offer_of_its_kind(words: str, kind: str, consent: str | None) -> None:
    assert consent_to(words, stub(kind=kind), own_words=True) == consent
    assert consent_to(words, stub(kind=kind), own_words=False) is None
