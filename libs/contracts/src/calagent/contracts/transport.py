"""Channel envelopes: separate the user's own words from what a transport wrapped around them.

A message that reaches the gateway through Telegram, e-mail or a bridge carries things that are
not the user speaking: the channel's own wrapper (`<untrusted_channel_message …>` tags, `[Telegram]`
tag lines), an e-mail signature and client footer, lines quoted from an earlier message and whole
forwarded blocks. A router or a code-side check that reads the raw text sees the wrapper instead of
the request (seed 003: a Telegram envelope made a router classify the tag line), so the gateway
strips all of it with `unwrap`, once, and every later decision reads `text` only. The rule lives
here, in one place, because the time service applies the same reading to any text it is handed
(`parse_reply` of a wrapped reply equals that of the bare reply, whoever calls it).

Two rules follow from architecture invariants 6 and 7:

* The user's own message through a channel *is* the user. For every channel wrapper `w`,
  `unwrap(w(s)).text == unwrap(s).text` and `third_party` is unchanged: a Telegram tag never makes a
  message third-party. Unwrapping is therefore the same on every channel (the channel is metadata,
  never a switch here), so web, Telegram and e-mail text decide alike.
* Quoted lines and forwarded blocks are someone else's words. They are kept (`quoted`,
  `forwarded`) so the agent can read them, and `third_party` is set whenever either is present; the
  agent then holds any write for confirmation instead of executing it.

A wrapper names its sender (`from="…"`, `[Telegram from …]`). The sender is the user when it is one
of the user's own names (`own`: the user id, the token's `aliases`, and the self-references of
`SELF_NAMES` such as `@me`); a wrapper from anyone else carries someone else's words, exactly like
a forward. What counts as third-party content, whatever its shape: `>`/`＞`/`»`/`›` quotes with
their attribution lines, WeChat's reply-quote (「…」 over a dashed rule), forwarded blocks (Gmail
and Outlook separators, Outlook's `____` header block, `From:/Sent:/To:/Subject:` headers,
`Fwd:` lines, "Forwarded message:", "Begin forwarded message", "Forwarded from …", 转发的消息 / 已转发邮件 / 原始邮件 / 转发自 …, [聊天记录] and "…的聊天记录"
chat-history forwards), fenced code blocks (pasted material), and a wrapper from another sender.

When nothing of the user's own remains but third-party content does (a bare forward), that content
becomes `text` (its first `MAX_MESSAGE_CHARS` characters) so the agent has something to read, with
`third_party=True` and `promoted=True`: it is never mistaken for the user's own instruction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from calagent.contracts.turns import MAX_MESSAGE_CHARS

# ---- wrappers peeled off the whole message ------------------------------------------------------

# Attributes must be well-formed (`name="value"`): a loose `[^>]*` would let a stray `<untrusted…`
# in the user's own text swallow the closing tag of a real wrapper around it.
_ENVELOPE_OPEN = re.compile(r'<untrusted_channel_message((?:\s+[\w:.-]+\s*=\s*"[^"]*")*)\s*>')
_ENVELOPE_CLOSE = "</untrusted_channel_message>"
_ATTRIBUTE = re.compile(r'([\w:.-]+)\s*=\s*"([^"]*)"')
_FORWARD_ATTRIBUTES = frozenset({"forwarded_from", "forward_from", "forwarded"})

# Self-references a bridge uses for the account owner (`from="@me"`): always the user.
SELF_NAMES: frozenset[str] = frozenset({"me", "self", "myself", "我", "我自己"})
_HANDLE = re.compile(r"@([\w.-]+)")

_CHANNEL_NAMES = r"telegram|e-?mail|web|api|sms|wechat|weixin|whatsapp|signal|slack|微信"
_TAG_LINE = re.compile(rf"\[(?:{_CHANNEL_NAMES})(?:\s+from\s+([^\]\n]*))?\]", re.IGNORECASE)

# ---- line-level markers --------------------------------------------------------------------------

_FORWARD_MARKERS = (
    # "---------- Forwarded message ---------", "-----Original Message-----", "Forwarded message:"
    re.compile(r"^[-_=*\s]*(?:forwarded|original) message[-_=*\s:]*$", re.IGNORECASE),
    re.compile(r"^begin forwarded message\s*:?$", re.IGNORECASE),
    re.compile(r"^\[?forwarded from\b[^\n]*$", re.IGNORECASE),
    re.compile(r"^[-\s]*(?:已?转发的?(?:消息|邮件)|原始邮件)[-\s:：]*$"),
    # "转发自 王五" — but not "转发自己的…", the user's own sentence.
    re.compile(r"^转发自(?!己).*$"),
    # WeChat's merged chat-history forward, as a "[聊天记录]" tag (a title line: `_CHAT_TITLE`).
    re.compile(r"^\[聊天记录\].*$"),
)
# A forward that starts with a line which is itself forwarded content ("Fwd: Offsite Friday",
# Outlook's "From: Bob" header): the block starts *at* that line, not after it.
_FWD_LINE = re.compile(r"^(?:fwd?|转发)\s*[:：]\s*\S.*$", re.IGNORECASE)
_HEADER_FROM = re.compile(r"^(?:from|发件人|寄件者)\s*[:：]", re.IGNORECASE)
_HEADER_OTHER = re.compile(
    r"^(?:sent|date|to|cc|subject|发送时间|时间|日期|收件人|抄送|主题)\s*[:：]", re.IGNORECASE
)
# Outlook's separator above its header block: a line of underscores.
_UNDERSCORES = re.compile(r"^_{5,}$")
# WeChat's title over a merged chat history ("张三和李四的聊天记录"); only with the history under it,
# since "帮我找一下我和张三的聊天记录" alone is the user's own request.
_CHAT_TITLE = re.compile(r"^.{1,40}的聊天记录\s*[:：]?$")
_FENCE = re.compile(r"^(?:```|~~~)")
# `>` and what other clients quote with: full-width `＞`, `»`, `›`.
_QUOTE_MARKS = ">＞»›"
# WeChat's reply-quote as it is copied or bridged: the quoted message in 「…」 (over one or more
# lines) and a dashed rule under it; only with the rule, since 「…」 is also ordinary punctuation.
_BRACKET_OPEN, _BRACKET_CLOSE = "「", "」"
_DASHED_RULE = re.compile(r"^(?:-\s*){5,}$")
_ATTRIBUTION = (
    re.compile(r"^on\b.*\bwrote\s*:$", re.IGNORECASE),
    re.compile(r"^在.*写道\s*[:：]$"),
)
_ATTRIBUTION_START = re.compile(r"^on\b", re.IGNORECASE)
_ATTRIBUTION_END = re.compile(r"\bwrote\s*:$", re.IGNORECASE)
# RFC 3676 says "-- " (with the space); many clients trim it, so both count.
_SIGNATURE = re.compile(r"^--\s*$")
_FOOTERS = (
    re.compile(r"^sent from my \S.*$", re.IGNORECASE),
    re.compile(r"^get outlook for \S.*$", re.IGNORECASE),
    re.compile(r"^发自我的\S.*$"),
)


@dataclass(frozen=True)
class Unwrapped:
    text: str
    """The user's own words (or, when `promoted`, the third-party content standing in for them)."""
    quoted: tuple[str, ...] = ()
    forwarded: str | None = None
    third_party: bool = False
    promoted: bool = False
    """True when `text` is third-party content because the user wrote nothing of their own."""
    channel_tags: tuple[str, ...] = field(default=())
    """What the peeled wrappers said about the sender (e.g. `telegram from Alice`): metadata only."""
    signature: str | None = None


def _normalise_newlines(raw: str) -> str:
    return raw.replace("\r\n", "\n").replace("\r", "\n")


def own_names(user_id: str, aliases: Sequence[str] = ()) -> frozenset[str]:
    """The names a wrapper may give the user: the user id, the token's aliases, the self-references."""
    return frozenset(_normal_name(n) for n in (user_id, *aliases) if n.strip()) | SELF_NAMES


def _normal_name(name: str) -> str:
    return name.strip().lstrip("@").strip().casefold()


def is_own_sender(sender: str | None, own: frozenset[str] | None) -> bool:
    """Whether a wrapper's sender is the user: no sender named, the whole name, its `@handle`, or
    the display name in front of `(@handle)` is one of the user's own names. `own=None`: the
    caller does not know the user's names (the time service), so no sender is judged."""
    if own is None or sender is None or not sender.strip():
        return True
    names = {_normal_name(sender), _normal_name(sender.split("(", 1)[0])}
    names.update(_normal_name(h) for h in _HANDLE.findall(sender))
    return bool(names & own)


def _peel(text: str, own: frozenset[str] | None) -> tuple[str, list[str], str | None]:
    """Remove channel wrappers around the whole message until none is left.

    Returns the inner text, the sender descriptions found, and the content of a wrapper that
    itself declares a forward or names another sender (its inner text is someone else's).
    """
    tags: list[str] = []
    while True:
        text = text.strip()
        opening = _ENVELOPE_OPEN.match(text)
        if opening and text.endswith(_ENVELOPE_CLOSE):
            attrs = dict(_ATTRIBUTE.findall(opening.group(1)))
            inner = text[opening.end() : len(text) - len(_ENVELOPE_CLOSE)]
            channel = attrs.get("channel", "channel")
            sender = attrs.get("from")
            tags.append(f"{channel} from {sender}" if sender else channel)
            if _FORWARD_ATTRIBUTES & attrs.keys() or not is_own_sender(sender, own):
                return "", tags, inner.strip()
            text = inner
            continue
        tag = _TAG_LINE.match(text)
        if tag:
            tags.append(tag.group(0)[1:-1])
            rest = text[tag.end() :]
            if not is_own_sender(tag.group(1), own):
                return "", tags, rest.strip()
            text = rest
            continue
        return text, tags, None


def _forward_start(lines: Sequence[str]) -> tuple[int, bool] | None:
    """Where a forwarded block that is not introduced by a marker line starts, and whether that
    line belongs to it: a `Fwd:` line, an Outlook header block (`From:` followed by `Sent:`,
    `To:`, `Subject:` … lines), the line of underscores above one, or a chat-history title with
    the history under it."""
    for i, line in enumerate(lines):
        stripped = line.strip()
        if _FWD_LINE.match(stripped):
            return i, True
        following = [n.strip() for n in lines[i + 1 : i + 4] if n.strip()]
        if _UNDERSCORES.match(stripped) and following and _HEADER_FROM.match(following[0]):
            return i, False
        if _HEADER_FROM.match(stripped) and following and _HEADER_OTHER.match(following[0]):
            return i, True
        if _CHAT_TITLE.match(stripped) and following:
            return i, True
    return None


def _is_forward_marker(line: str) -> bool:
    stripped = line.strip()
    return any(p.match(stripped) for p in _FORWARD_MARKERS)


def _quote_content(line: str) -> str | None:
    """The content of a quoted line (`> …`, `＞ …`, `» …`), or None when the line is not quoted."""
    stripped = line.lstrip()
    if not stripped or stripped[0] not in _QUOTE_MARKS:
        return None
    return stripped.lstrip(_QUOTE_MARKS + " \t").strip()


def _is_quoted(line: str) -> bool:
    return _quote_content(line) is not None


def _bracket_quote_end(lines: Sequence[str], i: int) -> int | None:
    """The index of the dashed rule closing a 「…」 reply-quote that starts at line i, or None."""
    if not lines[i].strip().startswith(_BRACKET_OPEN):
        return None
    for j in range(i, len(lines) - 1):
        if lines[j].strip().endswith(_BRACKET_CLOSE):
            return j + 1 if _DASHED_RULE.match(lines[j + 1].strip()) else None
    return None


def _split_quotes(lines: Sequence[str]) -> tuple[list[str], list[str]]:
    """Take quoted lines, reply-quotes, fenced blocks and attribution lines (`On … wrote:`) out of
    the user's lines. A fence never closed runs to the end: pasted material does not turn back
    into the user's words because its closing fence was lost."""
    own: list[str] = []
    quoted: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        rule = _bracket_quote_end(lines, i)
        if rule is not None:
            block = _tidy(lines[i:rule]).removeprefix(_BRACKET_OPEN).removesuffix(_BRACKET_CLOSE).strip()
            if block:
                quoted.append(block)
            i = rule + 1
            continue
        if _FENCE.match(stripped):
            close = next((j for j in range(i + 1, len(lines)) if _FENCE.match(lines[j].strip())), len(lines))
            block = _tidy(lines[i + 1 : close])
            if block:
                quoted.append(block)
            i = close + 1
            continue
        content = _quote_content(line)
        if content is not None:
            if content:
                quoted.append(content)
            i += 1
            continue
        if any(p.match(stripped) for p in _ATTRIBUTION):
            i += 1
            continue
        # Mail clients wrap a long attribution over two lines: "On Mon, … Bob <b@x>" / "wrote:".
        if (
            _ATTRIBUTION_START.match(stripped)
            and i + 2 < len(lines)
            and _ATTRIBUTION_END.search(lines[i + 1].strip())
            and _is_quoted(lines[i + 2])
        ):
            i += 2
            continue
        own.append(line)
        i += 1
    return own, quoted


def _tidy(lines: Sequence[str]) -> str:
    """Trailing spaces off every line, runs of blank lines collapsed, ends trimmed."""
    out: list[str] = []
    for line in lines:
        line = line.rstrip()
        if not line.strip() and (not out or not out[-1]):
            continue
        out.append(line if line.strip() else "")
    return "\n".join(out).strip()


def _drop_signature(lines: Sequence[str]) -> tuple[list[str], str | None]:
    """Cut at the first signature separator and drop client footers ("Sent from my iPhone")."""
    kept = list(lines)
    signature: str | None = None
    cut = next((i for i, line in enumerate(kept) if _SIGNATURE.match(line.strip())), None)
    if cut is not None:
        signature = _tidy(kept[cut + 1 :]) or None
        kept = kept[:cut]
    return [line for line in kept if not any(p.match(line.strip()) for p in _FOOTERS)], signature


MAX_PASSES = 8


def _forwarded_blocks(lines: Sequence[str], markers: Sequence[int], keep_first: bool = False) -> list[str]:
    """The forwarded content after each marker; a forward nested in a forward keeps its marker.

    A signature or client footer that trails a block is the sender's mail client talking, not
    forwarded content, and a marker followed by nothing else forwards nothing. `keep_first`: the
    first marker line is itself content (a `Fwd:` subject, an Outlook `From:` header).
    """
    blocks: list[str] = []
    for k, start in enumerate(markers):
        end = markers[k + 1] if k + 1 < len(markers) else len(lines)
        first = start if (k == 0 and keep_first) else start + 1
        content = _tidy(_drop_signature(lines[first:end])[0])
        if content:
            blocks.append(f"{lines[start].strip()}\n{content}" if k else content)
    return blocks


def _split_forwards(lines: list[str]) -> tuple[list[str], list[str]]:
    """The user's lines before the first forward, and the forwarded blocks from there on."""
    markers = [i for i, line in enumerate(lines) if _is_forward_marker(line)]
    implicit = _forward_start(lines[: markers[0]] if markers else lines)
    if implicit is not None:
        start, keep = implicit
        return lines[:start], _forwarded_blocks(lines, [start, *markers], keep_first=keep)
    if markers:
        return lines[: markers[0]], _forwarded_blocks(lines, markers)
    return lines, []


def unwrap(raw: str, own: frozenset[str] | None = SELF_NAMES) -> Unwrapped:
    """Split a raw channel message into the user's own words and third-party content (pure).

    `own` are the names under which a wrapper may present the user (see `own_names`); a wrapper
    from anyone else is someone else's message. With `own=None` every wrapper's sender counts as
    the user: for a reader that only needs the words, not whose they are. Passes repeat while they still remove something:
    a mail client's signature after a bridge's closing tag hides the envelope from the first pass
    and exposes it to the second.
    """
    text = _normalise_newlines(raw)
    tags: list[str] = []
    quoted: list[str] = []
    forwarded: str | None = None
    signature: str | None = None
    for _ in range(MAX_PASSES):
        before = _tidy(text.split("\n"))
        peeled, found_tags, wrapper_forward = _peel(text, own)
        tags.extend(found_tags)
        lines, blocks = _split_forwards(peeled.split("\n"))
        if wrapper_forward:
            blocks.insert(0, wrapper_forward)
        if blocks:
            forwarded = "\n\n".join([forwarded, *blocks] if forwarded else blocks)
        elif wrapper_forward is not None and forwarded is None:
            # A wrapper from someone else around nothing: still not the user speaking.
            forwarded = ""
        own_lines, found_quotes = _split_quotes(lines)
        quoted.extend(found_quotes)
        own_lines, found_signature = _drop_signature(own_lines)
        signature = signature or found_signature
        text = _tidy(own_lines)
        if text == before:
            break

    third_party = forwarded is not None or bool(quoted)
    promoted = False
    if not text and third_party:
        text = (forwarded if forwarded else "\n".join(quoted))[:MAX_MESSAGE_CHARS].strip()
        promoted = True
    return Unwrapped(
        text=text,
        quoted=tuple(quoted),
        forwarded=forwarded,
        third_party=third_party,
        promoted=promoted,
        channel_tags=tuple(tags),
        signature=signature,
    )
