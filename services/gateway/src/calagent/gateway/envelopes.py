"""Channel envelopes: separate the user's own words from what a transport wrapped around them.

A message that reaches the gateway through Telegram, e-mail or a bridge carries things that are
not the user speaking: the channel's own wrapper (`<untrusted_channel_message …>` tags, `[Telegram]`
tag lines), an e-mail signature and client footer, lines quoted from an earlier message and whole
forwarded blocks. A router or a code-side check that reads the raw text sees the wrapper instead of
the request (seed 003: a Telegram envelope made a router classify the tag line), so the gateway
strips all of it here, once, and every later decision reads `text` only.

Two rules follow from architecture invariants 6 and 7:

* The user's own message through a channel *is* the user. For every channel wrapper `w`,
  `unwrap(w(s)).text == unwrap(s).text` and `third_party` is unchanged: a Telegram tag never makes a
  message third-party. Unwrapping is therefore the same on every channel (the channel is metadata,
  never a switch here), so web, Telegram and e-mail text decide alike.
* Quoted lines and forwarded blocks are someone else's words. They are kept (`quoted`,
  `forwarded`) so the agent can read them, and `third_party` is set whenever either is present; the
  agent then holds any write for confirmation instead of executing it.

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

_CHANNEL_NAMES = r"telegram|e-?mail|web|api|sms|wechat|weixin|whatsapp|signal|slack|微信"
_TAG_LINE = re.compile(rf"\[(?:{_CHANNEL_NAMES})(?:\s+from\s+[^\]\n]*)?\]", re.IGNORECASE)

# ---- line-level markers --------------------------------------------------------------------------

_FORWARD_MARKERS = (
    re.compile(r"^-{2,}\s*forwarded message\s*-{2,}$", re.IGNORECASE),
    re.compile(r"^begin forwarded message\s*:?$", re.IGNORECASE),
    re.compile(r"^\[?forwarded from\b[^\n]*$", re.IGNORECASE),
    re.compile(r"^-{2,}\s*original message\s*-{2,}$", re.IGNORECASE),
    re.compile(r"^[-\s]*(?:转发的?(?:消息|邮件)|原始邮件)[-\s:：]*$"),
)
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


def _peel(text: str) -> tuple[str, list[str], str | None]:
    """Remove channel wrappers around the whole message until none is left.

    Returns the inner text, the sender descriptions found, and the content of an envelope that
    itself declares a forward (its inner text is someone else's, not the user's).
    """
    tags: list[str] = []
    forwarded: str | None = None
    while True:
        text = text.strip()
        opening = _ENVELOPE_OPEN.match(text)
        if opening and text.endswith(_ENVELOPE_CLOSE):
            attrs = dict(_ATTRIBUTE.findall(opening.group(1)))
            inner = text[opening.end() : len(text) - len(_ENVELOPE_CLOSE)]
            channel = attrs.get("channel", "channel")
            sender = attrs.get("from")
            tags.append(f"{channel} from {sender}" if sender else channel)
            if _FORWARD_ATTRIBUTES & attrs.keys():
                forwarded = inner.strip()
                return "", tags, forwarded
            text = inner
            continue
        tag = _TAG_LINE.match(text)
        if tag:
            tags.append(tag.group(0)[1:-1])
            text = text[tag.end() :]
            continue
        return text, tags, forwarded


def _is_forward_marker(line: str) -> bool:
    stripped = line.strip()
    return any(p.match(stripped) for p in _FORWARD_MARKERS)


def _is_quoted(line: str) -> bool:
    return line.lstrip().startswith(">")


def _split_quotes(lines: Sequence[str]) -> tuple[list[str], list[str]]:
    """Take `>` lines and their attribution lines (`On … wrote:`) out of the user's lines."""
    own: list[str] = []
    quoted: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if _is_quoted(line):
            content = stripped.lstrip(">").strip()
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


def _forwarded_blocks(lines: Sequence[str], markers: Sequence[int]) -> list[str]:
    """The forwarded content after each marker; a forward nested in a forward keeps its marker.

    A signature or client footer that trails a block is the sender's mail client talking, not
    forwarded content, and a marker followed by nothing else forwards nothing.
    """
    blocks: list[str] = []
    for k, start in enumerate(markers):
        end = markers[k + 1] if k + 1 < len(markers) else len(lines)
        content = _tidy(_drop_signature(lines[start + 1 : end])[0])
        if content:
            blocks.append(f"{lines[start].strip()}\n{content}" if k else content)
    return blocks


def unwrap(raw: str) -> Unwrapped:
    """Split a raw channel message into the user's own words and third-party content (pure).

    Passes repeat while they still remove something: a mail client's signature after a bridge's
    closing tag hides the envelope from the first pass and exposes it to the second.
    """
    text = _normalise_newlines(raw)
    tags: list[str] = []
    quoted: list[str] = []
    forwarded: str | None = None
    signature: str | None = None
    for _ in range(MAX_PASSES):
        before = _tidy(text.split("\n"))
        peeled, found_tags, envelope_forward = _peel(text)
        tags.extend(found_tags)
        lines = peeled.split("\n")
        blocks = [envelope_forward] if envelope_forward else []
        markers = [i for i, line in enumerate(lines) if _is_forward_marker(line)]
        if markers:
            blocks.extend(_forwarded_blocks(lines, markers))
            lines = lines[: markers[0]]
        if blocks:
            forwarded = "\n\n".join([forwarded, *blocks] if forwarded else blocks)
        own, found_quotes = _split_quotes(lines)
        quoted.extend(found_quotes)
        own, found_signature = _drop_signature(own)
        signature = signature or found_signature
        text = _tidy(own)
        if text == before:
            break

    third_party = forwarded is not None or bool(quoted)
    promoted = False
    if not text and third_party:
        text = (forwarded if forwarded is not None else "\n".join(quoted))[:MAX_MESSAGE_CHARS].strip()
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
