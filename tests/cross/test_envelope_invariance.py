"""Invariant 7 across the real pieces: the gateway's unwrapping, the time service's short-reply
parser and the agent's routing decision. For every wrapper a channel puts around the user's text,
`decide(w(s)) == decide(s)`; a reply-quote of an earlier message above or below the user's words
is transport for the zero-model answers too (contract §14)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from calagent.agent.domain.pending import (
    LastAssistant,
    fast_path_patch,
    speaks_for_user,
    timed_gate,
    write_hold,
)
from calagent.contracts.commands import StubOut, StubSlots
from calagent.contracts.transport import own_names, unwrap
from calagent.devtools.testing.examples import examples
from calagent.timeparse.domain.replies import parsed_reply

pytestmark = pytest.mark.unit

NOW = datetime(2026, 9, 24, 2, 0, tzinfo=UTC)
# The user as the wrappers below name them (the gateway builds this from the token).
OWN = own_names("alice", aliases=("Alice",))
# (fast path or model, hold, patch, timed-gate answer)
Decision = tuple[str, str | None, str, str | None]


def _stub(status: str | None) -> StubOut | None:
    if status is None:
        return None
    return StubOut(
        id="s1",
        status=status,
        title="修汽车轮毂",
        slots=StubSlots(date="WE", time="15:00") if status != "needs_date" else StubSlots(date="WE"),
        candidates=(date(2026, 9, 26), date(2026, 9, 27)) if status == "needs_date" else (),
        expires_at=NOW + timedelta(minutes=30),
    )


def decide(raw: str, stub_status: str | None) -> Decision:
    """Every code-side decision of a turn on an active stub, from the raw channel text."""
    unwrapped = unwrap(raw, OWN)
    parsed = parsed_reply(unwrapped.text)
    stub = _stub(stub_status)
    own_words = speaks_for_user(promoted=unwrapped.promoted, forwarded=unwrapped.forwarded)
    patch = fast_path_patch(stub, parsed, own_words=own_words, now=NOW, tz="Asia/Shanghai")
    gate = timed_gate(
        unwrapped.text,
        stub=stub,
        last_assistant=LastAssistant(at=NOW, offer_command_id="s1"),
        now=NOW,
        window=timedelta(minutes=30),
        own_words=own_words,
    )
    return (
        "fast_path" if patch is not None else "model",
        write_hold(unwrapped.third_party),
        parsed.model_dump_json(),
        gate,
    )


WRAPPERS: list[Callable[[str], str]] = [
    lambda s: f'<untrusted_channel_message channel="telegram" from="@alice">{s}</untrusted_channel_message>',
    lambda s: (
        f'<untrusted_channel_message channel="telegram" from="Alice">\n{s}\n</untrusted_channel_message>'
    ),
    lambda s: f"[Telegram from Alice] {s}",
    lambda s: f"[telegram]\n{s}",
    lambda s: f"{s}\n\n-- \nAlice Zhang\nACME Corp",
    lambda s: f"{s}\n\nSent from my iPhone",
    lambda s: f"  {s}  \n\n",
    lambda s: s.replace("\n", "\r\n"),
]

REPLIES = [
    "周日下午2点",
    "明天上午十点半",
    "下午两点",
    "next Wednesday 3pm",
    "不用换，直接创建",
    "周六",
    "10月1号下午3点到5点",
    "sunday 2pm",
    "算了，不建了",
    "昨天下午开了个会，好累",
    "明天下午三点和张三开会",
    "好的",
    "确认！",
    "算了",
    "删除明天下午四点的会",
    "3点一刻",
]

user_text = st.one_of(
    st.sampled_from(REPLIES),
    st.text(
        alphabet=st.characters(
            codec="utf-8", exclude_characters="<>[]\r\n\x85\u2028\u2029\x0b\x0c\x1c\x1d\x1e-"
        ),
        min_size=1,
        max_size=40,
    ).filter(lambda s: s.strip() and not s.strip().startswith((">", "Sent", "发自"))),
)


@settings(max_examples=examples(300), deadline=None)
@given(
    s=user_text,
    wrapper=st.sampled_from(WRAPPERS),
    stub=st.sampled_from([None, "needs_date", "needs_time", "conflict", "held"]),
)
def test_channel_wrappers_never_change_the_decision(
    s: str, wrapper: Callable[[str], str], stub: str | None
) -> None:
    assert decide(wrapper(s), stub) == decide(s, stub)


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_the_weekend_reply_takes_the_fast_path_through_every_channel(wrapper: Callable[[str], str]) -> None:
    route, hold, patch, _gate = decide(wrapper("周日下午2点"), "needs_date")
    assert route == "fast_path"
    assert hold is None
    assert '"weekday":7' in patch


def test_a_forwarded_block_is_held_not_fast_pathed() -> None:
    raw = "帮我加一下\n---------- Forwarded message ---------\nFrom: boss@example.com\n明天上午10点评审会"
    route, hold, _, _gate = decide(raw, None)
    assert route == "model"
    assert hold == "third_party_content"


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_a_bare_yes_answers_the_offer_through_every_channel(wrapper: Callable[[str], str]) -> None:
    assert decide(wrapper("好的"), "held")[3] == "confirm"
    assert decide(wrapper("好的，改到周五"), "held")[3] is None


# A reply-quote of the earlier message, the way clients put it above or below the user's reply.
REPLY_QUOTES: list[Callable[[str], str]] = [
    lambda s: f"> 这个周末去买菜\n{s}",
    lambda s: f"＞ 这个周末去买菜\n\n{s}",
    lambda s: f"» 周六还是周日？\n{s}",
    lambda s: (
        "On Thu, Sep 24, 2026 at 10:00 AM calagent <bot@example.com> wrote:\n"
        f"> 这个周末去买菜\n> 周六还是周日？\n\n{s}"
    ),
    lambda s: f"{s}\n\n> 这个周末去买菜\n> 周六还是周日？",
    lambda s: f"「calagent：这个周末去买菜」\n- - - - - - - - - - - - - - -\n{s}",
]


def answers(decision: Decision) -> tuple[str, str, str | None]:
    """The zero-model answers of a decision: the route, the parse and the timed gate. (The hold of
    a write the model makes stays third-party: the model reads the quote too.)"""
    route, _hold, patch, gate = decision
    return route, patch, gate


@settings(max_examples=examples(300), deadline=None)
@given(
    s=user_text,
    quote=st.sampled_from(REPLY_QUOTES),
    wrapper=st.sampled_from(WRAPPERS),
    stub=st.sampled_from([None, "needs_date", "needs_time", "conflict", "held"]),
)
def test_a_reply_quote_never_changes_the_zero_model_answer(
    s: str, quote: Callable[[str], str], wrapper: Callable[[str], str], stub: str | None
) -> None:
    # With nothing of the user's own ("»:" is itself a quote of ":"), the quote would stand in for it.
    own = unwrap(s, OWN)
    assume(own.text and not own.promoted)
    assert answers(decide(wrapper(quote(s)), stub)) == answers(decide(s, stub))


@pytest.mark.parametrize("quote", REPLY_QUOTES)
def test_a_quoted_weekend_reply_takes_the_fast_path(quote: Callable[[str], str]) -> None:
    route, _hold, patch, _gate = decide(quote("周日下午2点"), "needs_date")
    assert route == "fast_path"
    assert '"weekday":7' in patch
    assert decide(quote("好的"), "held")[3] == "confirm"


# Someone else's words in every shape a channel delivers them (issue 13): the decision on them is
# the decision on third-party content — never the fast path, never the timed gate, always held.
THIRD_PARTY: list[Callable[[str], str]] = [
    lambda s: f"> {s}",
    lambda s: f"＞ {s}",
    lambda s: f"» {s}",
    lambda s: f"```\n{s}\n```",
    lambda s: f"---------- Forwarded message ---------\nFrom: bob@example.com\n\n{s}",
    lambda s: f"Forwarded message:\n{s}",
    lambda s: f"Fwd: {s}",
    lambda s: f"________________________________\nFrom: Bob\nSent: Monday\nTo: Alice\nSubject: x\n\n{s}",
    lambda s: f"From: Bob\nTo: Alice\nSubject: x\n\n{s}",
    lambda s: f"已转发邮件\n{s}",
    lambda s: f"转发自 王五：\n{s}",
    lambda s: f"[聊天记录]\n{s}",
    lambda s: (
        f'<untrusted_channel_message channel="telegram" from="someone-else">{s}</untrusted_channel_message>'
    ),
    lambda s: f"[Telegram from Bob] {s}",
]


@settings(max_examples=examples(200), deadline=None)
@given(
    s=st.sampled_from(REPLIES),
    shape=st.sampled_from(THIRD_PARTY),
    wrapper=st.sampled_from(WRAPPERS),
    stub=st.sampled_from([None, "needs_date", "needs_time", "conflict", "held"]),
)
def test_third_party_content_in_any_shape_and_channel_is_held_and_never_answers_a_stub(
    s: str, shape: Callable[[str], str], wrapper: Callable[[str], str], stub: str | None
) -> None:
    route, hold, _patch, gate = decide(wrapper(shape(s)), stub)
    assert route == "model"
    assert hold == "third_party_content"
    assert gate is None
