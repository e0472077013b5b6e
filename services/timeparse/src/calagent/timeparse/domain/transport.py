"""Transport wrappers are not the user's words: quotes, channel tags and forwarded blocks.

The gateway does the primary stripping; the short-reply parser strips again so that
`parse_reply(wrapper(s)) == parse_reply(s)` holds whoever calls it. Both read the one rule,
`calagent.contracts.transport.unwrap`.
"""

from __future__ import annotations

from calagent.contracts.transport import unwrap

__all__ = ["strip_transport"]


def strip_transport(text: str) -> str:
    """The user's own words of a message: without quotes, channel tags, signatures and forwarded
    blocks. A message with nothing of the user's own ("> 周日下午2点", a bare forward) has none:
    someone else's words are not a reply to parse."""
    # The time service does not know the user's names; whose a wrapper is was the gateway's call.
    unwrapped = unwrap(text, own=None)
    return "" if unwrapped.promoted else unwrapped.text
