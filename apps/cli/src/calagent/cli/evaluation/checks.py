"""Expectation checks: facts from the answer, the events API and the turn record, never wording.

Dates and ranges are compared after resolution by the time service's own resolver, so `D+1`,
`W5+0` and `2026-09-25` name the same day here exactly as they do in production.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

from calagent.cli.evaluation.cases import Ambiguity, EventsAfter, Expect, ExpectedEvent
from calagent.contracts.time import RangeRequest
from calagent.contracts.tools import WRITE_TOOLS
from calagent.timeparse.domain.symbols import DateResolution, resolve_date, resolve_range

# The fast path's merge writes too; a read-only request must not reach it either.
WRITING = frozenset(WRITE_TOOLS | {"merge_stub"})
TEXT_ARGUMENTS = frozenset({"title", "content", "query"})


def ran(calls: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The calls that actually executed: not refused, not skipped, not sent back as errors."""
    return [c for c in calls if not str(c.get("result", "")).startswith(("error:", "refused:", "skipped"))]


def _today(now: datetime, tz: str) -> date:
    return now.astimezone(ZoneInfo(tz)).date()


def _days(symbol: Any, now: datetime, tz: str) -> tuple[date, ...] | None:
    if not isinstance(symbol, str):
        return None
    resolved = resolve_date(symbol, _today(now, tz))
    return resolved.days if isinstance(resolved, DateResolution) else None


def _range(start: Any, end: Any, now: datetime, tz: str) -> tuple[datetime, datetime] | None:
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    result = resolve_range(RangeRequest(start=start, end=end, now=now, tz=tz))
    if result.start is None or result.end is None:
        return None
    return result.start, result.end


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, str) and isinstance(actual, str) and expected.strip() == actual.strip():
        return True
    return bool(expected == actual)


def compare_arguments(
    tool: str, expected: Mapping[str, Any], actual: Mapping[str, Any], now: datetime, tz: str
) -> list[str]:
    problems: list[str] = []
    if "start" in expected or "end" in expected:
        want = _range(
            expected.get("start", actual.get("start")), expected.get("end", actual.get("end")), now, tz
        )
        got = _range(actual.get("start"), actual.get("end"), now, tz)
        if want is None or got is None or want != got:
            shown = (
                f"[{got[0].isoformat()}, {got[1].isoformat()})"
                if got
                else f"{actual.get('start')}..{actual.get('end')}"
            )
            problems.append(
                f"{tool} range {expected.get('start')}..{expected.get('end')} expected, got {shown}"
            )
    for key, value in expected.items():
        if key in ("start", "end"):
            continue
        got_value = actual.get(key)
        if key == "date":
            want_days, got_days = _days(value, now, tz), _days(got_value, now, tz)
            if want_days is None or want_days != got_days:
                problems.append(f"{tool}.date {value} expected, got {got_value}")
        elif key in TEXT_ARGUMENTS and isinstance(value, str):
            if not isinstance(got_value, str) or value.casefold() not in got_value.casefold():
                problems.append(f"{tool}.{key} containing {value!r} expected, got {got_value!r}")
        elif value is None:
            if got_value is not None:
                problems.append(f"{tool}.{key} omitted expected, got {got_value!r}")
        elif not _same(value, got_value):
            problems.append(f"{tool}.{key}={value!r} expected, got {got_value!r}")
    return problems


def _one_of(expected: str | list[str]) -> list[str]:
    return [expected] if isinstance(expected, str) else list(expected)


def _local(value: str, tz: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(ZoneInfo(tz))


def _event_matches(spec: ExpectedEvent, event: Mapping[str, Any], now: datetime, tz: str) -> bool:
    if spec.title is not None and spec.title.casefold() not in str(event.get("title", "")).casefold():
        return False
    if spec.calendar is not None and event.get("calendar") != spec.calendar:
        return False
    if spec.all_day is not None and bool(event.get("all_day")) != spec.all_day:
        return False
    if spec.start is not None:
        symbol, _, clock = spec.start.partition(" ")
        days = _days(symbol, now, tz)
        if not days:
            return False
        start = _local(str(event["start"]), tz)
        if start.date() != days[0]:
            return False
        if clock and start.strftime("%H:%M") != clock.strip():
            return False
    return True


def check_events(spec: EventsAfter, events: Sequence[Mapping[str, Any]], now: datetime, tz: str) -> list[str]:
    problems: list[str] = []
    shown = ", ".join(
        f"{e.get('title')}@{_local(str(e['start']), tz):%m-%d %H:%M}/{e.get('calendar')}" for e in events
    )
    if spec.count is not None and len(events) != spec.count:
        problems.append(f"{spec.count} events expected, found {len(events)} [{shown}]")
    for want in spec.include:
        if not any(_event_matches(want, e, now, tz) for e in events):
            problems.append(f"no event like {want.model_dump(exclude_none=True)} in [{shown}]")
    for title in spec.exclude_titles:
        if any(title.casefold() in str(e.get("title", "")).casefold() for e in events):
            problems.append(f"an event titled like {title!r} exists")
    return problems


# What a turn did to the events the ambiguity set asks about (contract §20).
Verdict = Literal["right", "asked", "wrong"]
VERDICTS: tuple[Verdict, ...] = ("right", "asked", "wrong")


def _standing(events: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {(str(e.get("title")), str(e["start"])) for e in events}


def ambiguity_verdict(
    spec: Ambiguity,
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    now: datetime,
    tz: str,
) -> Verdict:
    """`asked` when every event setup left stands as it was; `right` when exactly the meant ones do
    not (moved or gone); `wrong` when any other one does not."""
    changed = [e for e in before if (str(e.get("title")), str(e["start"])) not in _standing(after)]
    if not changed:
        return "asked"
    meant = [e for e in before if any(_event_matches(want, e, now, tz) for want in spec.meant)]
    return "right" if _standing(changed) == _standing(meant) else "wrong"


def check_answer(
    expect: Expect, answer: Mapping[str, Any], now: datetime, tz: str, *, mode: str
) -> list[str]:
    """What the answer itself proves: tools, arguments, outcome, intent, model calls, reply facts."""
    problems: list[str] = []
    calls: list[Mapping[str, Any]] = list(answer.get("tool_calls") or [])
    executed = ran(calls)
    names = [str(c.get("name")) for c in executed]
    if expect.tools is not None and names != expect.tools:
        problems.append(f"tools {expect.tools} expected, got {names}")
    if expect.tool_results is not None:
        results = [str(c.get("result")) for c in calls]
        if results != expect.tool_results:
            problems.append(f"tool results {expect.tool_results} expected, got {results}")
    for tool, subset in (expect.arguments or {}).items():
        candidates = [c for c in executed if c.get("name") == tool] or [
            c for c in calls if c.get("name") == tool
        ]
        if not candidates:
            problems.append(f"no {tool} call to check arguments of")
            continue
        problems += compare_arguments(tool, subset, dict(candidates[-1].get("arguments") or {}), now, tz)
    if expect.outcome is not None and answer.get("outcome") not in _one_of(expect.outcome):
        problems.append(f"outcome {expect.outcome} expected, got {answer.get('outcome')}")
    if expect.intent is not None and answer.get("intent") not in _one_of(expect.intent):
        problems.append(f"intent {expect.intent} expected, got {answer.get('intent')}")
    # A real model may need an extra round; only the zero of the fast path is a code fact there.
    if (
        expect.model_calls is not None
        and (mode == "offline" or expect.model_calls == 0)
        and answer.get("model_calls") != expect.model_calls
    ):
        problems.append(f"{expect.model_calls} model calls expected, got {answer.get('model_calls')}")
    reply = str(answer.get("reply", ""))
    for fact in expect.reply_contains or []:
        if fact not in reply:
            problems.append(f"reply lacks {fact!r}: {reply[:120]!r}")
    for fact in expect.reply_excludes or []:
        if fact in reply:
            problems.append(f"reply contains {fact!r}")
    return problems


def write_attempts(answer: Mapping[str, Any]) -> list[str]:
    """Write tools the model called in this turn, executed or not: a near miss counts."""
    return [str(c.get("name")) for c in answer.get("tool_calls") or [] if c.get("name") in WRITING]
