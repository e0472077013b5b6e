"""Channel envelopes: real-looking inputs, and invariance of the user's words under every wrapper."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from calagent.contracts.turns import MAX_MESSAGE_CHARS
from calagent.gateway.envelopes import unwrap

pytestmark = pytest.mark.unit

TG_OPEN = '<untrusted_channel_message channel="telegram" from="{sender}">'
TG_CLOSE = "</untrusted_channel_message>"


# ---- a table of inputs as channels deliver them ---------------------------------------------------

CASES: list[tuple[str, str, dict[str, object]]] = [
    (
        "telegram envelope (seed 003)",
        '<untrusted_channel_message channel="telegram" from="Li Lei (@lilei)">'
        "build a workflow that checks my calendar and email</untrusted_channel_message>",
        {"text": "build a workflow that checks my calendar and email", "third_party": False},
    ),
    (
        "telegram envelope, multi-line, chinese",
        '<untrusted_channel_message channel="telegram" from="张三">\n明天下午三点和张三开会\n地点：会议室A\n'
        "</untrusted_channel_message>\n",
        {"text": "明天下午三点和张三开会\n地点：会议室A", "third_party": False},
    ),
    (
        "telegram tag line with sender",
        "[telegram from Li Lei] what's on my calendar today",
        {"text": "what's on my calendar today", "third_party": False},
    ),
    (
        "telegram tag on its own line",
        "[Telegram]\n下周三下午两点 牙医",
        {"text": "下周三下午两点 牙医", "third_party": False},
    ),
    (
        "tag inside an envelope",
        '<untrusted_channel_message channel="telegram" from="x">[telegram from x] 周日下午2点'
        "</untrusted_channel_message>",
        {"text": "周日下午2点", "third_party": False},
    ),
    (
        "e-mail to self with signature and phone footer",
        "Dentist next Wednesday 3pm please\r\n\r\n-- \r\nAlice Zhang\r\nProduct, ACME\r\n",
        {
            "text": "Dentist next Wednesday 3pm please",
            "third_party": False,
            "signature": "Alice Zhang\nProduct, ACME",
        },
    ),
    (
        "e-mail footer without signature",
        "Cancel tomorrow's standup\n\nSent from my iPhone",
        {"text": "Cancel tomorrow's standup", "third_party": False},
    ),
    (
        "gmail forward under the user's instruction",
        "Please put this on my calendar\n\n---------- Forwarded message ---------\n"
        "From: Bob <bob@example.com>\nDate: Mon, Sep 21, 2026 at 9:00 AM\nSubject: Offsite\n"
        "To: Alice <alice@example.com>\n\nOffsite on Friday 10am at HQ.\n",
        {
            "text": "Please put this on my calendar",
            "third_party": True,
            "forwarded": "From: Bob <bob@example.com>\nDate: Mon, Sep 21, 2026 at 9:00 AM\nSubject: Offsite\n"
            "To: Alice <alice@example.com>\n\nOffsite on Friday 10am at HQ.",
        },
    ),
    (
        "apple mail forward",
        "fyi\n\nBegin forwarded message:\n\nFrom: HR <hr@example.com>\nSubject: Training\n\nTraining Thu 2pm",
        {"text": "fyi", "third_party": True},
    ),
    (
        "chinese forward",
        "帮我加到日历\n\n---------- 转发的消息 ----------\n发件人: 王五\n周五上午十点评审会",
        {"text": "帮我加到日历", "third_party": True, "forwarded": "发件人: 王五\n周五上午十点评审会"},
    ),
    (
        "outlook chinese original",
        "好的，就这个时间\n\n-----原始邮件-----\n发件人: 李四\n主题: 周会\n周一上午九点周会",
        {"text": "好的，就这个时间", "third_party": True},
    ),
    (
        "reply with quoted lines and attribution",
        "Yes, book it.\n\nOn Mon, Sep 21, 2026 at 9:00 AM Bob <bob@example.com> wrote:\n"
        "> Can we meet Friday at 3pm?\n> Thanks, Bob",
        {
            "text": "Yes, book it.",
            "third_party": True,
            "quoted": ("Can we meet Friday at 3pm?", "Thanks, Bob"),
        },
    ),
    (
        "attribution wrapped over two lines",
        "ok\n\nOn Mon, Sep 21, 2026 at 9:00 AM Bob Builder <bob@example.com>\nwrote:\n> lunch Friday?",
        {"text": "ok", "quoted": ("lunch Friday?",)},
    ),
    (
        "chinese attribution",
        "可以\n\n在 2026年9月21日 周一 09:00，王五 <wang@example.com> 写道：\n> 周五下午三点碰一下？",
        {"text": "可以", "quoted": ("周五下午三点碰一下？",), "third_party": True},
    ),
    (
        "telegram reply quote",
        '<untrusted_channel_message channel="telegram" from="Ann">> party Saturday 8pm\n加上这个'
        "</untrusted_channel_message>",
        {"text": "加上这个", "quoted": ("party Saturday 8pm",), "third_party": True},
    ),
    (
        "bare telegram forward: content promoted, third-party",
        "Forwarded from Bob (@bob):\nParty on Saturday 8pm!",
        {"text": "Party on Saturday 8pm!", "third_party": True, "promoted": True},
    ),
    (
        "envelope declaring a forward",
        '<untrusted_channel_message channel="telegram" from="Ann" forwarded_from="Bob">Standup moved to 11'
        "</untrusted_channel_message>",
        {
            "text": "Standup moved to 11",
            "third_party": True,
            "promoted": True,
            "forwarded": "Standup moved to 11",
        },
    ),
    (
        "only quoted content",
        "> meeting tomorrow 10am",
        {"text": "meeting tomorrow 10am", "third_party": True, "promoted": True},
    ),
    (
        "tag only: nothing at all",
        "[Telegram]",
        {"text": "", "third_party": False},
    ),
    (
        "plain web text untouched",
        "明天下午三点和张三开会",
        {"text": "明天下午三点和张三开会", "third_party": False, "quoted": (), "forwarded": None},
    ),
    (
        "angle brackets in ordinary text stay",
        "set x <untrusted_channel_message to 3 > 2",
        {"text": "set x <untrusted_channel_message to 3 > 2", "third_party": False},
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [(raw, exp) for _, raw, exp in CASES], ids=[c[0] for c in CASES]
)
def test_unwrap_table(raw: str, expected: dict[str, object]) -> None:
    result = unwrap(raw)
    for name, value in expected.items():
        assert getattr(result, name) == value, name


def test_promoted_text_is_capped() -> None:
    raw = "---------- Forwarded message ---------\n" + "x" * (MAX_MESSAGE_CHARS + 50)
    result = unwrap(raw)
    assert result.promoted
    assert len(result.text) == MAX_MESSAGE_CHARS


def test_channel_tags_are_reported() -> None:
    result = unwrap(
        '<untrusted_channel_message channel="telegram" from="Ann">[Telegram] hi</untrusted_channel_message>'
    )
    assert result.channel_tags == ("telegram from Ann", "Telegram")


# ---- invariance --------------------------------------------------------------------------------

# Fragments that look like the markers themselves, so the property also meets adversarial text.
FRAGMENTS = [
    "明天下午三点和张三开会",
    "next Wednesday 3pm",
    "On",
    "wrote:",
    "--",
    "-- ",
    ">",
    "> ",
    "[Telegram]",
    "[telegram from x]",
    "<untrusted_channel_message",
    '<untrusted_channel_message channel="telegram">',
    TG_CLOSE,
    "Forwarded from",
    "---------- Forwarded message ---------",
    "Sent from my iPhone",
    "在",
    "写道：",
    "\n",
    "\n\n",
    " ",
    "\t",
    '"',
]
# Bare CR and the exotic line separators are left out: transports turn text into LF or CRLF lines.
ALPHABET = st.characters(codec="utf-8", exclude_characters="\r\x85\u2028\u2029\x0b\x0c\x1c\x1d\x1e")
user_texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(ALPHABET, max_size=12)), max_size=12).map(
    "".join
)
senders = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters=" @()_-."), max_size=20)

Wrapper = Callable[[str], str]


def telegram_envelope(sender: str) -> Wrapper:
    return lambda s: TG_OPEN.format(sender=sender) + s + TG_CLOSE


def telegram_envelope_lines(sender: str) -> Wrapper:
    return lambda s: TG_OPEN.format(sender=sender) + "\n" + s + "\n" + TG_CLOSE + "\n"


def tag_line(sender: str) -> Wrapper:
    return lambda s: f"[telegram from {sender}] {s}" if sender.strip() else f"[Telegram] {s}"


def tag_own_line(_sender: str) -> Wrapper:
    return lambda s: f"[Telegram]\n{s}"


def email_signature(sender: str) -> Wrapper:
    return lambda s: f"{s}\n\n-- \n{sender or 'Alice'}\nACME Corp"


def email_footer(_sender: str) -> Wrapper:
    return lambda s: f"{s}\n\nSent from my iPhone"


def crlf(_sender: str) -> Wrapper:
    # What SMTP and bridges do: bare LF becomes CRLF, an existing CRLF stays.
    return lambda s: re.sub(r"(?<!\r)\n", "\r\n", s)


def padding(_sender: str) -> Wrapper:
    return lambda s: f"  \n{s}\n\t "


# Bridge wrappers go around whatever they are handed; mail wrappers are added by the mail client to
# the body it sends. A composition is therefore mail wrappers inside, bridge wrappers outside: no
# transport appends an e-mail signature after a Telegram envelope's closing tag.
BRIDGE_WRAPPERS = [telegram_envelope, telegram_envelope_lines, tag_line, tag_own_line, crlf, padding]
MAIL_WRAPPERS = [email_signature, email_footer, crlf, padding]
CHANNEL_WRAPPERS = [*BRIDGE_WRAPPERS, email_signature, email_footer]

wrapper_chains = (
    st.tuples(
        st.lists(st.tuples(st.sampled_from(MAIL_WRAPPERS), senders), max_size=2),
        st.lists(st.tuples(st.sampled_from(BRIDGE_WRAPPERS), senders), max_size=3),
    )
    .map(lambda chains: chains[0] + chains[1])
    .filter(bool)
)


def quote_below(sender: str) -> Wrapper:
    return lambda s: (
        f"{s}\n\nOn Mon, 21 Sep 2026 at 09:00, {sender or 'Bob'} <bob@example.com> wrote:\n> lunch?\n> ok"
    )


def quote_above(_sender: str) -> Wrapper:
    return lambda s: f"在 2026年9月21日 09:00，王五 写道：\n> 周五开会\n\n{s}"


def forward_gmail(sender: str) -> Wrapper:
    return lambda s: (
        f"{s}\n\n---------- Forwarded message ---------\nFrom: {sender}\nSubject: x\n\nParty Sat 8pm"
    )


def forward_apple(_sender: str) -> Wrapper:
    return lambda s: f"{s}\n\nBegin forwarded message:\n\nTraining Thu 2pm"


def forward_chinese(_sender: str) -> Wrapper:
    return lambda s: f"{s}\n---------- 转发的消息 ----------\n周五上午十点评审"


THIRD_PARTY_WRAPPERS = [quote_below, quote_above, forward_gmail, forward_apple, forward_chinese]

FAST = settings(
    max_examples=int(os.environ.get("GATEWAY_ENVELOPE_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FAST
@given(
    s=user_texts,
    chain=wrapper_chains,
)
def test_channel_wrappers_never_change_the_users_words(
    s: str, chain: list[tuple[Callable[..., Wrapper], str]]
) -> None:
    wrapped = s
    for make, sender in chain:
        wrapped = make(sender)(wrapped)
    plain, through_channel = unwrap(s), unwrap(wrapped)
    assert through_channel.text == plain.text
    # A channel's own wrapper never makes the user a third party.
    assert through_channel.third_party == plain.third_party
    assert through_channel.promoted == plain.promoted


@FAST
@given(s=user_texts, sender=senders, make=st.sampled_from(THIRD_PARTY_WRAPPERS))
def test_quotes_and_forwards_keep_the_users_words_and_mark_third_party(
    s: str, sender: str, make: Callable[[str], Wrapper]
) -> None:
    plain = unwrap(s)
    assume(plain.text and not plain.promoted)
    wrapped = unwrap(make(sender)(s))
    assert wrapped.text == plain.text
    assert wrapped.third_party
    assert not wrapped.promoted


@FAST
@given(s=user_texts, chain=st.lists(st.sampled_from(BRIDGE_WRAPPERS), min_size=1, max_size=2))
def test_third_party_content_survives_bridge_wrappers(s: str, chain: list[Callable[[str], Wrapper]]) -> None:
    inner = forward_gmail("Bob")(s)
    wrapped = inner
    for make in chain:
        wrapped = make("Ann")(wrapped)
    assert unwrap(wrapped).text == unwrap(inner).text
    assert unwrap(wrapped).third_party


@pytest.mark.parametrize("make", CHANNEL_WRAPPERS, ids=lambda m: m.__name__)
def test_seed_phrase_through_every_channel(make: Callable[[str], Wrapper]) -> None:
    phrase = "construa um fluxo de trabalho que verifique minha agenda e e-mail"
    result = unwrap(make("Ann (@ann)")(phrase))
    assert result.text == phrase
    assert not result.third_party
