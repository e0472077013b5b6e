"""Transport wrappers are not the user's words: quotes, channel tags and forwarded blocks.

The gateway does the primary stripping; the short-reply parser strips again so that
`parse_reply(wrapper(s)) == parse_reply(s)` holds whoever calls it.
"""

from __future__ import annotations

import re

__all__ = ["strip_transport"]

_FORWARD_START = re.compile(
    r"^\s*(?:-{2,}\s*(?:forwarded message|original message|转发的?邮件|原始邮件|转发消息)\s*-{2,}"
    r"|(?:fwd?|转发)\s*[:：]|begin forwarded message:?)",
    re.IGNORECASE,
)
_CHANNEL_TAG = re.compile(r"</?\s*untrusted_channel_message\b[^>]*>", re.IGNORECASE)
_CHANNEL_PREFIX = re.compile(
    r"^\s*\[(?:telegram|wechat|weixin|微信|email|e-mail|邮件|slack|whatsapp|signal|sms|短信|web)\]\s*",
    re.IGNORECASE,
)
_REPLY_HEADER = re.compile(
    r"^\s*(?:on\b.{0,200}\bwrote:|在.{0,200}(?:写道|wrote)\s*[:：])\s*$", re.IGNORECASE
)


def strip_transport(text: str) -> str:
    """The user's own words of a message: without quotes, channel tags and forwarded blocks.

    Line based and deliberately simple: a line starting with `>` is a quote; an
    `<untrusted_channel_message ...>` tag (not its content) and a leading `[Telegram]`-style tag are
    envelope; from a `Fwd:` / `---------- Forwarded message ----------` line to the end is someone
    else's text; an "On ... wrote:" header line belongs to the quote below it.
    """
    text = _CHANNEL_TAG.sub("\n", text)
    kept: list[str] = []
    for line in text.splitlines():
        if _FORWARD_START.match(line):
            break
        if line.lstrip().startswith((">", "＞")) or _REPLY_HEADER.match(line):
            continue
        kept.append(_CHANNEL_PREFIX.sub("", line))
    return "\n".join(kept).strip()
