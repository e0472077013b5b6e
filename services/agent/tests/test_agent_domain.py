"""Pure pieces of the agent: session segments, exit-check claims, post-hoc intent, receipts,
context, search terms."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from calagent.agent.domain.claims import claims_creation, claims_schedule_read
from calagent.agent.domain.context import build_messages
from calagent.agent.domain.intent import infer_post_hoc_intent
from calagent.agent.domain.language import detect_language
from calagent.agent.domain.reads import free_time_receipt, query_receipt
from calagent.agent.domain.receipts import command_receipt
from calagent.agent.domain.search import rank, search_terms
from calagent.agent.domain.session import ArchivedMessage, latest_segment
from calagent.agent.domain.view import View
from calagent.contracts.commands import CommandResult, EventOut, StubOut, StubSlots
from calagent.contracts.queries import QueryResult
from calagent.contracts.suggestions import EmptyReason, FreeSlot, SlotAttendee, SuggestionPeople

pytestmark = pytest.mark.unit

T0 = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)  # 10:00 in Asia/Shanghai, a Thursday
ZH = View("Asia/Shanghai", "zh", date(2026, 9, 24))
EN = View("Asia/Shanghai", "en", date(2026, 9, 24))


def msg(minutes: int, role: str = "user", content: str = "x") -> ArchivedMessage:
    return ArchivedMessage(role, content, T0 + timedelta(minutes=minutes))


def test_only_the_latest_session_segment_enters_the_prompt() -> None:
    history = [msg(0, content="明天去开会"), msg(5), msg(300), msg(310)]
    segment = latest_segment(history, T0 + timedelta(minutes=320), timedelta(minutes=120))
    assert [m.created_at for m in segment.messages] == [history[2].created_at, history[3].created_at]
    assert segment.older_count == 2
    assert segment.older_last_at == history[1].created_at


def test_a_long_silence_before_now_empties_the_segment() -> None:
    history = [msg(0), msg(10)]
    segment = latest_segment(history, T0 + timedelta(days=30), timedelta(minutes=120))
    assert segment.messages == ()
    assert segment.older_count == 2


def test_segment_is_capped() -> None:
    history = [msg(i) for i in range(50)]
    segment = latest_segment(history, T0 + timedelta(minutes=50), timedelta(minutes=120), max_messages=20)
    assert len(segment.messages) == 20
    assert segment.older_count == 30


@pytest.mark.parametrize(
    "text",
    [
        "已创建日程「修汽车轮毂」，时间为北京时间周六下午两点。",
        "已经帮你安排好了明天的会议",
        "日程添加成功！",
        "I've created the meeting for tomorrow at 3pm.",
        "Your meeting has been scheduled.",
        "Done — added to your calendar.",
    ],
)
def test_creation_claims_are_found(text: str) -> None:
    assert claims_creation(text)


@pytest.mark.parametrize(
    "text",
    ["辛苦了，好好休息一下吧。", "你想安排在哪天？", "Which day works for you?", "Sounds tiring, rest well."],
)
def test_harmless_replies_are_not_creation_claims(text: str) -> None:
    assert not claims_creation(text)


@pytest.mark.parametrize(
    "text",
    [
        "你明天没有任何安排，很空闲。",
        "你明天下午有一个会议",
        "You have no meetings tomorrow.",
        "Your afternoon is free.",
    ],
)
def test_read_claims_are_found(text: str) -> None:
    assert claims_schedule_read(text)


@pytest.mark.parametrize("text", ["辛苦了，好好休息。", "Hello! How can I help?"])
def test_chit_chat_is_not_a_read_claim(text: str) -> None:
    assert not claims_schedule_read(text)


@pytest.mark.parametrize(
    ("tools", "active", "expected"),
    [
        (["prepare_or_create_schedule"], True, "schedule.clarification_reply"),
        (["prepare_or_create_schedule"], False, "schedule.create"),
        (["query_schedule_range"], False, "schedule.query_range"),
        (["search_memory"], False, "memory.search"),
        (["search_chat_archive"], False, "archive.search"),
        ([], False, "general.chat"),
        (["search_memory", "prepare_or_create_schedule"], False, "schedule.create"),
        (["save_memory"], False, "memory.save"),
        (["cancel_schedule_command"], True, "schedule.cancel"),
    ],
)
def test_post_hoc_intent_follows_the_seed_table(tools: list[str], active: bool, expected: str) -> None:
    assert infer_post_hoc_intent(tools, had_active_stub=active) == expected


def test_language_is_chosen_from_the_message() -> None:
    assert detect_language("明天下午三点") == "zh"
    assert detect_language("tomorrow 3pm") == "en"


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("\u3400", "zh"),  # CJK Extension A
        ("\U0002000b", "zh"),  # Extension B (plane 2): a name written with a rare character
        ("\uf92c", "zh"),  # a Compatibility Ideograph
        ("\u4dc0 ok", "en"),  # a Yijing hexagram sits between the ideograph blocks but is no ideograph
        ("。！「」", "en"),  # CJK punctuation alone is not Chinese
    ],
)
def test_chinese_is_any_han_ideograph_and_nothing_else(text: str, lang: str) -> None:
    assert detect_language(text) == lang


def event(title: str = "和张三开会") -> EventOut:
    start = datetime.fromisoformat("2026-09-30T15:00:00+08:00")
    return EventOut(
        id="e1",
        title=title,
        start=start,
        end=start + timedelta(hours=1),
        calendar="工作",
        weekday=3,
        tz="Asia/Shanghai",
    )


def test_created_receipt_carries_weekday_and_date_and_no_zone_for_a_reader_in_it() -> None:
    text = command_receipt(CommandResult(status="created", persisted=True, event=event()), ZH)
    assert "周三 9月30日 15:00–16:00" in text and "Asia/Shanghai" not in text
    english = command_receipt(CommandResult(status="created", persisted=True, event=event()), EN)
    assert "Wed Sep 30 15:00–16:00" in english and "Asia/Shanghai" not in english
    # The model is told the zone whatever it is.
    assert EN.for_model().span(event().start, event().end) == "Wed Sep 30 15:00–16:00 (Asia/Shanghai)"


def test_needs_date_receipt_lists_the_candidates_with_weekdays() -> None:
    stub = StubOut(
        id="s1",
        status="needs_date",
        title="修汽车轮毂",
        slots=StubSlots(date="WE"),
        candidates=(date(2026, 9, 26), date(2026, 9, 27)),
        expires_at=T0,
    )
    text = command_receipt(CommandResult(status="needs_date", stub=stub), ZH)
    assert "周六 9月26日" in text and "周日 9月27日" in text


def test_query_receipt_names_the_window_and_events() -> None:
    result = QueryResult(
        events=(event(),),
        range_start=datetime.fromisoformat("2026-09-30T12:00:00+08:00"),
        range_end=datetime.fromisoformat("2026-09-30T18:00:00+08:00"),
    )
    text = query_receipt(result, ZH)
    assert "周三 9月30日 12:00" in text and "和张三开会" in text and "Asia/Shanghai" not in text


def test_context_carries_bounded_facts_and_no_identity() -> None:
    stub = StubOut(
        id="s1",
        status="needs_date",
        title="修汽车轮毂",
        slots=StubSlots(date="WE"),
        candidates=(date(2026, 9, 26), date(2026, 9, 27)),
        expires_at=T0,
    )
    history = [msg(0, content="old stuff"), msg(500, content="recent")]
    segment = latest_segment(history, T0 + timedelta(minutes=505), timedelta(minutes=120))
    messages = build_messages(
        now=T0,
        tz="Asia/Shanghai",
        calendars=("工作", "家庭", "个人"),
        stub=stub,
        segment=segment,
        text="周日下午",
        quoted=(),
        forwarded=None,
    )
    system = messages[0]["content"]
    assert "周四" in system and "Asia/Shanghai" in system
    assert "工作, 家庭, 个人" in system
    assert "id=s1" in system and "2026-09-27" in system
    assert "1 earlier messages" in system
    assert [m["content"] for m in messages[1:]] == ["recent", "周日下午"]
    assert "old stuff" not in str(messages)


def test_search_terms_split_chinese_into_bigrams() -> None:
    assert search_terms("妈妈生日") == ["妈妈", "妈生", "生日"]
    assert rank(["妈妈的生日是10月3日", "咖啡不加糖"], search_terms("妈妈生日")) == ["妈妈的生日是10月3日"]
    assert search_terms("coffee sugar") == ["coffee", "sugar"]


@pytest.mark.parametrize(
    "text",
    ["你好！有什么可以帮你安排的吗？", "我可以帮你创建、查询日程，记住你的偏好。", "要我帮你安排吗？"],
)
def test_offers_and_capabilities_are_not_creation_claims(text: str) -> None:
    assert not claims_creation(text)


@pytest.mark.parametrize(
    "text", ["你明天有安排吗？", "Do you have anything planned tomorrow?", "你好！有什么可以帮你安排的吗？"]
)
def test_questions_back_to_the_user_claim_nothing(text: str) -> None:
    assert not claims_schedule_read(text)
    assert not claims_creation(text)


def test_a_claim_after_a_question_is_still_found() -> None:
    assert claims_creation("要我再确认吗？已经帮你创建好了。")


def test_an_accepted_invitation_says_the_organizer_has_the_answer_not_that_invitations_went_out() -> None:
    from calagent.contracts.people import Attendee, InvitationOut

    invited = event().model_copy(
        update={
            "attendees": (
                Attendee(name="", email="me@mail.test"),
                Attendee(name="Ana", email="ana@example.org"),
            ),
            "organizer": "ana@example.org",
        }
    )
    stub = StubOut(
        id="s1",
        status="created",
        title=invited.title,
        slots=StubSlots(),
        expires_at=T0,
        kind="invitation",
        invitation=InvitationOut(
            method="REQUEST",
            uid="u-1",
            organizer="ana@example.org",
            title=invited.title,
            start=invited.start,
            end=invited.end,
            attendees=invited.attendees,
        ),
    )
    text = command_receipt(CommandResult(status="created", persisted=True, event=invited, stub=stub), EN)
    assert "ana@example.org" in text
    assert "me@mail.test" not in text and "invitations" not in text


@pytest.mark.parametrize("view", [ZH, EN])
def test_an_invitation_from_someone_not_in_the_contacts_is_offered_saying_so(view: View) -> None:
    from calagent.agent.domain.receipts import _TEXTS
    from calagent.contracts.people import InvitationOut

    def offer(sender_known: bool) -> str:
        invitation = InvitationOut(
            method="REQUEST",
            uid="u-2",
            organizer="mallory@example.org",
            title="季度评审",
            start=T0 + timedelta(days=1),
            end=T0 + timedelta(days=1, hours=1),
            sender_known=sender_known,
        )
        stub = StubOut(
            id="s2",
            status="held",
            title=invitation.title,
            slots=StubSlots(),
            expires_at=T0 + timedelta(days=7),
            kind="invitation",
            hold_reason="invitation_received",
            proposed_start=invitation.start,
            proposed_end=invitation.end,
            invitation=invitation,
        )
        return command_receipt(CommandResult(status="held", stub=stub), view)

    marked = _TEXTS["invitation.stranger"][0 if view.zh else 1]
    assert marked in offer(sender_known=False)
    assert marked not in offer(sender_known=True)
    assert "mallory@example.org" in offer(sender_known=False)


# ---- free time -----------------------------------------------------------------------------------


def test_a_suggestion_with_no_slot_says_why_each_reason_in_its_own_words() -> None:
    people = SuggestionPeople(counted=("Bob",))
    reasons: tuple[EmptyReason, ...] = (
        "window_too_short",
        "outside_hours",
        "organizer_unavailable",
        "attendees_unavailable",
    )
    for view in (ZH, EN):
        replies = {
            reason: free_time_receipt((), 60, view, people=people, empty_reason=reason) for reason in reasons
        }
        assert len(set(replies.values())) == len(reasons), replies
        assert "Bob" in replies["attendees_unavailable"]
        # Who is busy on their own is named, and only they are.
        both = SuggestionPeople(counted=("Bob", "Carol"), busy=("Carol",))
        busy = free_time_receipt((), 60, view, people=both, empty_reason="attendees_unavailable")
        assert "Carol" in busy.splitlines()[-1] and "Bob" not in busy.splitlines()[-1]


def test_a_slot_less_than_sure_says_how_sure_and_whose_time_is_tentative() -> None:
    start = datetime(2026, 9, 25, 1, 0, tzinfo=UTC)
    sure = FreeSlot(
        start=start,
        end=start + timedelta(hours=1),
        weekday=5,
        attendees=(SlotAttendee(who="me", availability="free"), SlotAttendee(who="Bob", availability="free")),
    )
    doubtful = sure.model_copy(
        update={
            "start": start + timedelta(hours=3),
            "end": start + timedelta(hours=4),
            "confidence": 75.0,
            "attendees": (
                SlotAttendee(who="me", availability="free"),
                SlotAttendee(who="Bob", availability="tentative"),
            ),
            "reason": "tentative",
        }
    )
    for view in (ZH, EN):
        reply = free_time_receipt((sure, doubtful), 60, view)
        sure_line, doubtful_line = reply.splitlines()[-2:]
        assert "75%" in doubtful_line and "Bob" in doubtful_line
        assert "%" not in sure_line and "Bob" not in sure_line


@pytest.mark.parametrize("code", ["changed_since", "already_undone", "nothing_to_undo"])
def test_each_refused_undo_is_said_in_both_languages(code: str) -> None:
    refused = CommandResult(status="error", error={"code": code, "message": "m"})
    zh, en = command_receipt(refused, ZH), command_receipt(refused, EN)
    assert "撤销" in zh and "undo" in en.lower(), (zh, en)
    assert zh != en
