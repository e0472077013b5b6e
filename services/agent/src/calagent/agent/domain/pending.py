"""The pending-command rules the agent owns (contract §8), as pure functions of facts.

Two ways a message reaches a pending stub without the model:

- the **timed gate**: the assistant's last message really offered this stub (a held write, a
  conflicting time), the offer is younger than the window, and the user's whole message is one
  bounded confirmation or refusal word. Anything else — a later "好", a "好" after chit-chat,
  "好，但是改到周五" — is ordinary chat for the model.
- the **short-reply fast path**: the time service's grammar plus its filler lexicon consumed the
  whole message, and what it extracted answers the stub as asked.

Both read only the user's own words (unwrapped by the gateway), so a transport envelope cannot
change them: `decide(w(s)) == decide(s)` for every wrapper `w` (invariant 7). A reply-quote of an
earlier message is such an envelope (contract §14): the words under it decide alone. Words that
are not the user's — a quote or forward standing in for a message with nothing of the user's own,
or a message that forwards something — never answer a stub here (`speaks_for_user`). What the
stub itself becomes (continued, superseded, executed) is decided by the commands service.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from calagent.agent.domain.choosing import asks_which
from calagent.contracts.commands import OFFER_STUB_STATUSES, StubOut, StubStatus, waits_beside
from calagent.contracts.people import InvitationAnswer
from calagent.contracts.time import ParsedReply, SlotPatch

Route = Literal["fast_path", "model"]
GateAnswer = Literal["confirm", "refuse"]
# The stubs a short reply's date or time can complete (contract §7).
MERGEABLE_STATUSES: frozenset[StubStatus] = frozenset({"needs_date", "needs_time", "conflict"})

# The bounded answers to an offer. Deliberately tiny: a word that needs context to mean yes
# ("就这样吧", "go ahead and book it") is the model's to read, through `confirm_command`.
CONFIRM_WORDS = frozenset(
    {
        "确认", "确定", "好", "好的", "好啊", "好吧", "可以", "行", "要", "是", "是的", "对", "嗯", "嗯嗯",
        "没问题", "yes", "y", "yep", "yeah", "ok", "okay", "sure", "confirm", "do it", "go ahead",
    }
)  # fmt: skip
REFUSE_WORDS = frozenset(
    {
        "不要", "不要了", "不用", "不用了", "算了", "算了吧", "取消", "不", "不了", "别", "no", "n", "nope", "cancel",
        "never mind", "nevermind", "dont",
    }
)  # fmt: skip


# A bare request to take back what the last receipt did (contract §15). Bounded like the answers
# above: "撤销刚才那个会" names something and is the model's to read.
UNDO_WORDS = frozenset({"撤销", "撤回", "撤销吧", "撤回吧", "undo", "undo it", "undo that"})


# The answers to an invitation received by mail (contract §16), each the whole message: code
# sends the REPLY they name, so a word that needs reading ("我看看") is the model's.
INVITATION_WORDS: dict[str, InvitationAnswer] = {
    "接受": "ACCEPTED", "接受邀请": "ACCEPTED", "accept": "ACCEPTED", "accepted": "ACCEPTED",
    "拒绝": "DECLINED", "拒绝邀请": "DECLINED", "decline": "DECLINED", "declined": "DECLINED",
    "暂定": "TENTATIVE", "待定": "TENTATIVE", "tentative": "TENTATIVE", "maybe": "TENTATIVE",
}  # fmt: skip


# What an offer asks the user (contract §19): an invitation is answered by 接受/暂定/拒绝, anything
# else held (a create, an update or delete, a plan, a conflict) by a confirmation.
OfferKind = Literal["invitation", "change"]


def offer_kind(stub: StubOut) -> OfferKind:
    return "invitation" if stub.kind == "invitation" else "change"


def from_outside(stub: StubOut) -> bool:
    """Whether the stub's text is someone else's (contract §19): described to the model by kind,
    source and id, never by its text. An offer that waits beside the conversation (an invitation, a
    sync conflict), or one held because someone else's words asked for it."""
    return waits_beside(stub.kind, stub.hold_reason) or stub.hold_reason in (
        "third_party_content",
        "invitation_received",
    )


def invitation_words(text: str) -> InvitationAnswer | None:
    """ "接受" → ACCEPTED: the whole message one invitation answer, else None."""
    answers = {INVITATION_WORDS.get(chunk) for chunk in _chunks(text)}
    if len(answers) != 1:
        return None
    return answers.pop()


def invitation_answer(text: str, *, stub: StubOut | None, own_words: bool) -> InvitationAnswer | None:
    """ "接受" → ACCEPTED to the invitation offer waiting for the user; None for anything else,
    or when no invitation is waiting, or when the words are not the user's own."""
    if stub is None or stub.kind != "invitation" or stub.status != "held" or not own_words:
        return None
    return invitation_words(text)


Consent = Literal["confirm"] | InvitationAnswer


def consent_to(text: str, stub: StubOut, *, own_words: bool) -> Consent | None:
    """The user's own words consenting to this offer's kind (contract §19), or None: the message
    opens with one of the bounded words of that kind ("确认，记下来", "接受，谢谢") and holds no
    refusal and no answer of the other kind. "接受" does not confirm a delete, "好" does not accept
    an invitation, a message that does not open with such a word ("今天天气怎么样") consents to
    nothing, and nothing consents to a change still asking which event it is about (§20)."""
    chunks = _chunks(text)
    if not own_words or not chunks or any(c in REFUSE_WORDS for c in chunks):
        return None
    if asks_which(stub):
        # Which event is still the question (contract §20): a yes to it says nothing of which.
        return None
    answers = {INVITATION_WORDS[c] for c in chunks if c in INVITATION_WORDS}
    confirms = any(c in CONFIRM_WORDS for c in chunks)
    if offer_kind(stub) == "invitation":
        if chunks[0] not in INVITATION_WORDS or len(answers) != 1 or confirms:
            return None
        return answers.pop()
    return "confirm" if chunks[0] in CONFIRM_WORDS and not answers else None


@dataclass(frozen=True)
class LastAssistant:
    """What the agent said last in this conversation, and which stub (if any) it offered."""

    at: datetime
    offer_command_id: str | None
    turn_id: str | None = None


def speaks_for_user(*, promoted: bool, forwarded: str | None) -> bool:
    """Whether a message's text (the gateway's unwrapping) is the user's own reply.

    Quoted lines were taken out as transport, so "> 周末去买菜\n周日下午5点" is the user's
    "周日下午5点". Not the user's: text `promoted` from a quote or forward because the user wrote
    nothing of their own ("> 好"), and any message that forwards something, whose words may be
    about the forward rather than the stub (contract §8: a held write runs only on the user's
    own words)."""
    return not promoted and forwarded is None


def _chunks(text: str) -> list[str]:
    """The message cut at punctuation, casefolded, inner whitespace collapsed ("Do  it!" → "do it")."""
    folded = text.casefold().replace("'", "").replace("\u2019", "")  # don't → dont
    marked = "".join("|" if unicodedata.category(ch).startswith("P") else ch for ch in folded)
    return [" ".join(piece.split()) for piece in marked.split("|") if piece.strip()]


def bare_answer(text: str) -> GateAnswer | None:
    """ "好的！" → confirm, "算了。" → refuse, "好，改到周五" → None: the whole message, and nothing
    but words of one polarity, or it is not a bare answer."""
    chunks = _chunks(text)
    if not chunks:
        return None
    words: list[str] = []
    for chunk in chunks:
        if chunk in CONFIRM_WORDS or chunk in REFUSE_WORDS:
            words.append(chunk)
            continue
        # "ok ok", "好的 好的": a repeated word separated by spaces.
        parts = chunk.split(" ")
        if len(parts) > 1 and all(p in CONFIRM_WORDS or p in REFUSE_WORDS for p in parts):
            words.extend(parts)
            continue
        return None
    if all(w in CONFIRM_WORDS for w in words):
        return "confirm"
    if all(w in REFUSE_WORDS for w in words):
        return "refuse"
    return None


def offer_open(
    stub: StubOut, last_assistant: LastAssistant | None, *, now: datetime, window: timedelta
) -> bool:
    """The timed gate's facts: the assistant's last message offered this stub (a held write, a
    conflicting time), and it is younger than the window."""
    if stub.status not in OFFER_STUB_STATUSES:
        return False
    if last_assistant is None or last_assistant.offer_command_id != stub.id:
        return False
    return now - last_assistant.at <= window


def timed_gate(
    text: str,
    *,
    stub: StubOut | None,
    last_assistant: LastAssistant | None,
    now: datetime,
    window: timedelta,
    own_words: bool,
) -> GateAnswer | None:
    """Code answers the offer only when every fact holds; otherwise None (the model decides)."""
    if stub is None or not own_words or not offer_open(stub, last_assistant, now=now, window=window):
        return None
    answer = bare_answer(text)
    if answer == "confirm" and consent_to(text, stub, own_words=own_words) is None:
        # "好" is no answer to an invitation: only 接受/暂定/拒绝 are (contract §19).
        return None
    return answer


def undo_gate(
    text: str, *, last_assistant: LastAssistant | None, now: datetime, window: timedelta, own_words: bool
) -> str | None:
    """The turn whose change a bare "撤销" takes back, or None (the model decides): the user's own
    words, nothing but one undo word, right after an assistant message younger than the window.
    Whether that turn changed anything is the commands service's fact to check."""
    if not own_words or last_assistant is None or last_assistant.turn_id is None:
        return None
    if now - last_assistant.at > window:
        return None
    chunks = _chunks(text)
    if len(chunks) != 1 or chunks[0] not in UNDO_WORDS:
        return None
    return last_assistant.turn_id


def known_period_is_pm(stub: StubOut) -> bool:
    """The afternoon/evening the stub already knows: its slot time, else its proposed start."""
    if stub.slots.time:
        return int(stub.slots.time[:2]) >= 12
    if stub.proposed_start is not None:
        return stub.proposed_start.hour >= 12
    return False


def stub_days(stub: StubOut, tz: str) -> tuple[date, ...]:
    """The day or days the stub is about, as far as it knows them: its candidates, the day of its
    proposed start, or the day its date slot was pinned to; () when it knows none."""
    if stub.candidates:
        return stub.candidates
    if stub.proposed_start is not None:
        return (stub.proposed_start.astimezone(ZoneInfo(tz)).date(),)
    if stub.slots.date:
        try:
            return (date.fromisoformat(stub.slots.date),)
        except ValueError:
            return ()
    return ()


def next_weekday_symbol(weekday: int, today: date) -> str:
    """The next such day on or after today, as the resolver's symbol: `W<d>+0` while this ISO
    week still has it, else `W<d>+1` (on a Thursday "Saturday" is `W6+0`, "Monday" `W1+1`)."""
    return f"W{weekday}+{0 if weekday >= today.isoweekday() else 1}"


def place_weekday(stub: StubOut, weekday: int, *, today: date, tz: str) -> str | None:
    """A weekday that picks none of the stub's candidates, as the date symbol of the day it moves
    the stub to, or None when that day is not certain (the model reads it).

    Certain when everything the stub is about lies in the seven days from today: "Saturday" to a
    stub for tomorrow is the coming Saturday, "周一" to this weekend's stub the Monday after. For a
    stub two weeks out, "周六" could be this Saturday or the one beside that day.
    """
    days = stub_days(stub, tz)
    if not days or not all(today <= day < today + timedelta(days=7) for day in days):
        return None
    return next_weekday_symbol(weekday, today)


def fast_path_patch(
    stub: StubOut | None, parsed: ParsedReply, *, own_words: bool, now: datetime, tz: str
) -> SlotPatch | None:
    """The patch code may merge with zero model calls, or None when the model must decide.

    Only a message the reply grammar consumed whole ("周日下午2点", "就周日吧"), never one with
    other content ("删除明天下午四点的会"), nor a past date (a remark, not an answer); and an hour
    1–6 without 上午/下午/am/pm is never taken as a.m.: it follows the stub's known afternoon, or
    the model reads it. A weekday is never dropped (contract §14): it picks one of the stub's
    candidates, or moves the stub to the day `place_weekday` finds, or goes to the model.
    """
    if stub is None or stub.status not in MERGEABLE_STATUSES or not parsed.complete or not own_words:
        # A forwarded "周日下午2点" is someone else's answer: merging it could complete a write.
        return None
    patch = parsed.patch
    if patch.is_empty():
        return None
    if patch.has_ambiguous_hour():
        if not known_period_is_pm(stub):
            return None
        patch = patch.resolve_period(pm=True)
    candidate_weekdays = frozenset(day.isoweekday() for day in stub.candidates)
    if patch.weekday is not None and patch.date is None and patch.weekday not in candidate_weekdays:
        today = now.astimezone(ZoneInfo(tz)).date()
        symbol = place_weekday(stub, patch.weekday, today=today, tz=tz)
        if symbol is None:
            return None
        # Built from the bound keys only, like `SlotPatch.resolve_period`.
        patch = SlotPatch(**{**patch.model_dump(exclude_none=True, exclude={"weekday"}), "date": symbol})
    if patch.date is not None and patch.date.startswith("D-"):
        return None
    return patch


def write_hold(third_party: bool) -> Literal["third_party_content"] | None:
    """Writes driven by forwarded or quoted content are held, never executed on the first turn."""
    return "third_party_content" if third_party else None
