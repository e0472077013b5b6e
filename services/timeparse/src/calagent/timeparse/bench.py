"""Throughput and accuracy of the time service, next to dateparser on the same phrases.

`run_benchmark()` measures:

* `resolve_ops_per_s`: `resolve(ResolveRequest)` over a mix of symbols (prebuilt requests), and
  `resolve_with_validation_ops_per_s` including the pydantic validation of each request;
* `parse_reply_ops_per_s`: `parse_reply` over short replies;
* `pipeline_ops_per_s` / `pipeline_accuracy`: phrase -> `parse_reply` -> `resolve` -> instant, on
  PHRASES (Chinese and English, each with its expected local time);
* `dateparser_ops_per_s` / `dateparser_accuracy`: dateparser on the same PHRASES with the same `now`
  and zone (NaN when dateparser is not installed: it is a test dependency only).

Every rate is the median of several timed rounds. Nothing here reads the clock except the
`perf_counter` used for timing.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from datetime import datetime
from time import perf_counter
from typing import Any

from calagent.contracts.text import HAN
from calagent.contracts.time import ResolveRequest
from calagent.timeparse.domain.replies import parse_reply
from calagent.timeparse.domain.symbols import resolve, resolve_symbol

__all__ = ["BENCH_NOW", "BENCH_TZ", "PHRASES", "SYMBOL_MIX", "pipeline", "run_benchmark"]

BENCH_TZ = "Asia/Shanghai"
BENCH_NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")  # a Thursday

# (phrase, expected local wall time at BENCH_NOW in BENCH_TZ)
PHRASES: tuple[tuple[str, str], ...] = (
    ("tomorrow 3pm", "2026-09-25T15:00"),
    ("next Wednesday 3pm", "2026-09-30T15:00"),
    ("today 14:00", "2026-09-24T14:00"),
    ("September 30 10:00", "2026-09-30T10:00"),
    ("Sept 30 3pm", "2026-09-30T15:00"),
    ("30 Sep 2026 9am", "2026-09-30T09:00"),
    ("2026-09-30 15:00", "2026-09-30T15:00"),
    ("day after tomorrow 9am", "2026-09-26T09:00"),
    ("tomorrow at noon", "2026-09-25T12:00"),
    ("tonight at 8pm", "2026-09-24T20:00"),
    ("this Friday 10am", "2026-09-25T10:00"),
    ("next Monday 9:30am", "2026-09-28T09:30"),
    ("October 1 8pm", "2026-10-01T20:00"),
    ("tomorrow 12am", "2026-09-25T00:00"),
    ("in 3 days at 5pm", "2026-09-27T17:00"),
    ("明天下午3点", "2026-09-25T15:00"),
    ("明天上午十点半", "2026-09-25T10:30"),
    ("后天上午9点", "2026-09-26T09:00"),
    ("大后天晚上8点", "2026-09-27T20:00"),
    ("下周三下午3点", "2026-09-30T15:00"),
    ("这周五上午10点", "2026-09-25T10:00"),
    ("9月30日下午3点", "2026-09-30T15:00"),
    ("10月1号上午9点", "2026-10-01T09:00"),
    ("2026年10月5日14:00", "2026-10-05T14:00"),
    ("今天晚上八点", "2026-09-24T20:00"),
    ("下周一上午9点半", "2026-09-28T09:30"),
    ("今天14:30", "2026-09-24T14:30"),
    ("明天中午12点", "2026-09-25T12:00"),
    ("2026-10-02 09:00", "2026-10-02T09:00"),
    ("明天下午两点一刻", "2026-09-25T14:15"),
)

SYMBOL_MIX: tuple[tuple[str, str | None], ...] = (
    ("D", None),
    ("D+1", "15:00"),
    ("D-3", "09:30"),
    ("W3+1", "15:00"),
    ("W7", None),
    ("W1-1", "08:00"),
    ("WE+1", None),
    ("2026-09-30", "10:00"),
    ("--02-29", None),
    ("--10-01", "09:00"),
    ("H:national_day", None),
    ("H:spring_festival:2027", "10:00"),
    ("D+400", "23:59"),
    ("W8+1", None),
    ("D", "25:00"),
)


def pipeline(phrase: str, now: datetime = BENCH_NOW, tz: str = BENCH_TZ) -> str | None:
    """phrase -> local wall time `YYYY-MM-DDTHH:MM`, or None when not understood."""
    patch = parse_reply(phrase)
    if patch.time is None:
        return None
    symbol = patch.date if patch.date is not None else (f"W{patch.weekday}+0" if patch.weekday else "D")
    result = resolve_symbol(symbol, patch.time, None, now, tz)
    if result.start is None:
        return None
    return result.start.strftime("%Y-%m-%dT%H:%M")


def _rate(fn: Callable[[Any], object], items: Sequence[Any], seconds: float, rounds: int = 5) -> float:
    """Median items/second over `rounds` rounds of about `seconds / rounds` each."""
    budget = seconds / rounds
    rates: list[float] = []
    for _ in range(rounds):
        done = 0
        started = perf_counter()
        elapsed = 0.0
        while elapsed < budget:
            for item in items:
                fn(item)
            done += len(items)
            elapsed = perf_counter() - started
        rates.append(done / elapsed)
    return statistics.median(rates)


def _is_chinese(phrase: str) -> bool:
    return HAN.search(phrase) is not None


def _accuracy(answers: Sequence[str | None], chinese: bool | None = None) -> float:
    pairs = [
        (want, got)
        for (phrase, want), got in zip(PHRASES, answers, strict=True)
        if chinese is None or _is_chinese(phrase) == chinese
    ]
    return sum(1 for want, got in pairs if got == want) / len(pairs)


def _validate_and_resolve(fields: tuple[str, str | None]) -> object:
    return resolve(ResolveRequest(date=fields[0], time=fields[1], now=BENCH_NOW, tz=BENCH_TZ))


def _dateparser_parser() -> Callable[[str], str | None] | None:
    try:
        from dateparser.date import DateDataParser
    except ImportError:
        return None
    parser = DateDataParser(
        languages=["zh", "en"],
        settings={
            "TIMEZONE": BENCH_TZ,
            "TO_TIMEZONE": BENCH_TZ,
            "RETURN_AS_TIMEZONE_AWARE": False,
            "RELATIVE_BASE": BENCH_NOW.replace(tzinfo=None),
            "PREFER_DATES_FROM": "future",
        },
    )

    def parse(phrase: str) -> str | None:
        found = parser.get_date_data(phrase).date_obj
        return None if found is None else found.strftime("%Y-%m-%dT%H:%M")

    return parse


def run_benchmark(seconds: float = 0.5) -> dict[str, float]:
    """Ops/second (medians) and accuracies; dateparser figures are NaN when it is not installed."""
    requests = [ResolveRequest(date=d, time=t, now=BENCH_NOW, tz=BENCH_TZ) for d, t in SYMBOL_MIX]
    replies = [phrase for phrase, _ in PHRASES]
    for request in requests:  # warm the holiday cache: steady state is what a service sees
        resolve(request)

    ours = [pipeline(p) for p in replies]
    out: dict[str, float] = {
        "resolve_ops_per_s": _rate(resolve, requests, seconds),
        "resolve_with_validation_ops_per_s": _rate(_validate_and_resolve, SYMBOL_MIX, seconds),
        "parse_reply_ops_per_s": _rate(parse_reply, replies, seconds),
        "pipeline_ops_per_s": _rate(pipeline, replies, seconds),
        "pipeline_accuracy": _accuracy(ours),
        "pipeline_accuracy_en": _accuracy(ours, chinese=False),
        "pipeline_accuracy_zh": _accuracy(ours, chinese=True),
        "phrases": float(len(PHRASES)),
    }
    dateparser_parse = _dateparser_parser()
    if dateparser_parse is None:
        for key in ("ops_per_s", "accuracy", "accuracy_en", "accuracy_zh"):
            out[f"dateparser_{key}"] = float("nan")
        out.update(dateparser_installed=0.0, speedup_vs_dateparser=float("nan"))
        return out
    answers = [dateparser_parse(p) for p in replies]  # also the warm-up (language data loads lazily)
    rate = _rate(dateparser_parse, replies, seconds, rounds=3)
    out.update(dateparser_installed=1.0, dateparser_ops_per_s=rate, dateparser_accuracy=_accuracy(answers))
    out["dateparser_accuracy_en"] = _accuracy(answers, chinese=False)
    out["dateparser_accuracy_zh"] = _accuracy(answers, chinese=True)
    out["speedup_vs_dateparser"] = out["pipeline_ops_per_s"] / rate
    return out
