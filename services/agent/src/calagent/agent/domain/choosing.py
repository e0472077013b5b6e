"""Which event a change is about, when several were found for the same words (contract §20).

Choosing is code's, never the model's luck. Two rules, each a pure function of facts:

- **Candidates** (`candidates_for`): a change the model asks for is about the event it names, but
  the `find_events` result it was chosen from may have listed others for the same words — every
  event of a search by title words, or the events of a plain range search titled like the pick.
  Those ids go with the change (the model's pick first); with more than one, commands asks which.
- **The user's pick** (`choose`): a reply to a change asking which names one with zero model calls —
  an ordinal ("第二个", "2", "the second"), its day, weekday or time as the time service reads them
  ("五点那个", "周四那场", "the 3pm one"), or title words only one of them has ("吃饭那个"). A reply
  that reads as a choice but names none or several is asked again; anything else is the model's.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal
from zoneinfo import ZoneInfo

from calagent.contracts.choosing import POINTING_WORDS
from calagent.contracts.commands import MAX_EVENT_CANDIDATES, EventCandidate, EventOut, StubOut
from calagent.contracts.numerals import EN_ORDINALS, number
from calagent.contracts.text import normalise_title
from calagent.contracts.time import ParsedReply, SlotPatch


@dataclass(frozen=True)
class Found:
    """One `find_events` result of the turn: the title words it searched for, the events it listed."""

    text: str | None
    events: tuple[EventOut, ...]


def candidates_for(event_id: str, found: Sequence[Found]) -> tuple[str, ...]:
    """The events the latest find that listed `event_id` listed for the same words, `event_id`
    first; () when no find of the turn listed it (nothing to choose among, as far as code knows)."""
    for result in reversed(found):
        picked = next((e for e in result.events if e.id == event_id), None)
        if picked is None:
            continue
        if result.text and result.text.strip():
            same = result.events  # each one matched the words searched for
        else:
            title = normalise_title(picked.title)
            same = tuple(e for e in result.events if normalise_title(e.title) == title)
        others = tuple(e.id for e in same if e.id != event_id)
        return (event_id, *others)[:MAX_EVENT_CANDIDATES]
    return ()


def asks_which(stub: StubOut) -> bool:
    """A change still asking which event it is about: no confirmation answers it (contract §20)."""
    return len(stub.event_candidates) > 1


# ---- the user's pick ---------------------------------------------------------------------------

# "第二个", "就第2个吧", "2", "#2", "最后一个": the whole message, punctuation aside.
_ZH_ORDINAL = re.compile(
    r"^(?:就|选|要|是)?(?:第(?P<n>[一二两三四五六七八九十]|\d{1,2})|(?P<last>最后))(?:一)?(?:个|场|次|项|条|件)?(?:吧|的|那个)?$"
)
_BARE_NUMBER = re.compile(r"^#?(?P<n>\d{1,2})$")
# English words around an ordinal that say nothing more ("the second one", "option 2", "number 3").
_EN_AROUND = frozenset({"the", "one", "option", "number", "no", "please", "ok", "that", "this", "is", "it"})

Pick = str | Literal["ask_again"] | None


def _ordinal(text: str) -> int | None:
    """1-based (or -1 for the last) when the whole message is an ordinal, else None."""
    folded = unicodedata.normalize("NFKC", text).casefold().strip()
    squeezed = "".join(ch for ch in folded if not ch.isspace() and not _punctuation(ch))
    for pattern in (_ZH_ORDINAL, _BARE_NUMBER):
        match = pattern.match(squeezed)
        if match is None:
            continue
        if match.groupdict().get("last"):
            return -1
        return number(match.group("n"))
    words = [w for w in re.split(r"[\s#.,!?;:]+", folded) if w and w not in _EN_AROUND]
    if len(words) == 1:
        word = words[0]
        if word == "last":
            return -1
        if word in EN_ORDINALS:
            return EN_ORDINALS[word]
        if word.isdigit() and len(word) <= 2:
            return int(word)
    return None


def _punctuation(ch: str) -> bool:
    return unicodedata.category(ch).startswith(("P", "S"))


def _clock(at: str) -> str:
    return at[:5]


def _times(reading: str | None, ambiguous: str | None) -> frozenset[str] | None:
    """The clock times a patch's time names: itself, or both halves of the day of an hour said
    without one ("五点" is 05:00 or 17:00); None when it names none."""
    if reading is not None:
        return frozenset({reading})
    if ambiguous is not None:
        hour, minute = ambiguous.split(":")
        return frozenset({ambiguous, f"{int(hour) + 12:02d}:{minute}"})
    return None


def _fits(candidate: EventCandidate, patch: SlotPatch, days: tuple[date, ...], tz: ZoneInfo) -> bool:
    start = candidate.start.astimezone(tz)
    end = candidate.end.astimezone(tz)
    if days and start.date() not in days:
        return False
    if patch.weekday is not None and start.isoweekday() != patch.weekday:
        return False
    starts = _times(patch.time, patch.ambiguous_time)
    if starts is not None and (candidate.all_day or start.strftime("%H:%M") not in starts):
        return False
    ends = _times(patch.end_time, patch.ambiguous_end_time)
    return ends is None or (not candidate.all_day and end.strftime("%H:%M") in ends)


def _by_time(
    candidates: Sequence[EventCandidate], parsed: ParsedReply | None, tz: ZoneInfo
) -> list[EventCandidate] | None:
    """The candidates a reply's day, weekday or time names (the time service's reading), or None
    when the reply is not only such a phrase (and the words that point at one of several)."""
    if parsed is None or not (parsed.complete or parsed.points_at_one):
        return None
    patch = parsed.patch
    if patch.date is not None and not parsed.days:
        return None  # a day the resolver could not name here: not code's to guess
    return [c for c in candidates if _fits(c, patch, parsed.days, tz)]


_POINTING = re.compile(
    "|".join(
        rf"\b{re.escape(w)}\b" if w.isascii() else re.escape(w)
        for w in sorted(POINTING_WORDS, key=len, reverse=True)
    )
)


def _words(text: str) -> str:
    """Text as a title is compared here: the pointing words, case, spaces and punctuation aside."""
    return normalise_title(_POINTING.sub(" ", text.casefold()))


def _by_title(text: str, candidates: Sequence[EventCandidate]) -> list[EventCandidate] | None:
    """The candidates whose title holds the whole reply (the words that point at one aside, on both
    sides), or None when no title holds it: then the reply is about something else."""
    rest = _words(text)
    if not rest:
        return None
    named = [c for c in candidates if rest in _words(c.title)]
    return named or None


def choose(text: str, stub: StubOut, parsed: ParsedReply | None, tz: str) -> Pick:
    """The event id the user's reply names among the change's candidates; "ask_again" when it reads
    as a choice but names none or several; None when it is not a choice (the model reads it)."""
    candidates = stub.event_candidates
    ordinal = _ordinal(text)
    if ordinal is not None:
        if ordinal == -1:
            return candidates[-1].event_id
        return candidates[ordinal - 1].event_id if 1 <= ordinal <= len(candidates) else "ask_again"
    named = _by_time(candidates, parsed, ZoneInfo(tz))
    if named is None:
        named = _by_title(text, candidates)
    if named is None:
        return None
    return named[0].event_id if len(named) == 1 else "ask_again"
