"""The exit check: a free-text reply is compared with the turn's facts before anyone sees it.

What counts as a claim is decided by `domain/claims/` (an assertion that the calendar changed,
or of what it holds); whether the claim may stand is decided here, by facts only: a change claim
needs a write that commands committed in this turn, a contents claim needs a read that ran. A
false claim is replaced, never appended to, and the archive keeps only the replacement.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from calagent.agent.domain import fixed_replies
from calagent.agent.domain.claims import find_claims
from calagent.agent.domain.repair import TEXT_CALL_MARKERS
from calagent.agent.state import Finished, TurnState


def exit_check(state: TurnState, text: str) -> Finished:
    with state.timeline.segment("exit_check"):
        claims = find_claims(text)
        if claims.write and not state.persisted:
            state.flag("unverified_create_claim")
            state.replaced_reply = text
            return Finished("claim_replaced", fixed_replies.replaced_create_claim(state.lang))
        if claims.read and not state.read_ran:
            state.flag("unverified_read_claim")
            state.replaced_reply = text
            return Finished("claim_replaced", fixed_replies.replaced_read_claim(state.lang))
    reply = text.strip() or ("好的。" if state.lang == "zh" else "OK.")
    return Finished("answered", reply)


class ClaimGuardedStream:
    """Streams the model's text to the client while keeping a fabricated claim off the wire.

    The exit check replaces a false claim after the response ends; without this guard the client
    would already have seen it in `reply.delta` events. The last few characters are held back
    (a claim needs a handful of them to be recognised), and once the text seen so far holds a
    claim nothing more is streamed: `turn.done` carries the authoritative reply.
    """

    HOLD_BACK = 12

    def __init__(self, emit: Callable[[str], Awaitable[None]]) -> None:
        self.emit = emit
        self.reset()

    def reset(self) -> None:
        self.text = ""
        self.sent = 0
        self.stopped = False

    async def feed(self, delta: str) -> None:
        self.text += delta
        if self.stopped:
            return
        if find_claims(self.text).any or any(m in self.text for m in TEXT_CALL_MARKERS):
            # A claim, or a tool call written into the text (repaired by the loop, never shown).
            self.stopped = True
            return
        safe = len(self.text) - self.HOLD_BACK
        if safe > self.sent:
            chunk = self.text[self.sent : safe]
            self.sent = safe
            await self.emit(chunk)
