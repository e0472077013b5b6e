"""`calagent resolve`, `calagent parse-reply` and `calagent bench`: the time service from a shell.

This is the only module of the service that may read the wall clock, and only through
`wall_clock_now()` when neither `--now` nor `CALAGENT_NOW` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from typing import Any

from calagent.contracts.settings import DEFAULT_ZONE
from calagent.contracts.time import ResolveResult, SlotPatch
from calagent.timeparse.domain.replies import parse_reply
from calagent.timeparse.domain.symbols import local_today, resolve_symbol, zone

__all__ = [
    "bench_main",
    "parse_reply_main",
    "patch_json",
    "resolve_main",
    "result_json",
    "wall_clock_now",
]

_DEFAULT_COUNTRY = "CN"


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    # argparse would print usage and exit; the CLI contract wants a JSON error and status 2.
    def error(self, message: str) -> Any:
        raise _UsageError(message)


def wall_clock_now() -> datetime:
    """The real time: the CLI's one and only read of the clock."""
    return datetime.now(UTC)


def _dumps(payload: object) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _error_json(code: str, message: str) -> str:
    return _dumps({"error": {"code": code, "message": message}})


def result_json(result: ResolveResult) -> dict[str, Any]:
    """The contract's JSON shape of a resolution: only the keys that carry something."""
    out: dict[str, Any] = {}
    if result.error is not None:
        return {"error": {"code": result.error.code, "message": result.error.message}}
    if result.start is not None:
        out["start"] = result.start.isoformat()
    if result.end is not None:
        out["end"] = result.end.isoformat()
    if result.date is not None:
        out["date"] = result.date.isoformat()
    if result.candidates:
        out["candidates"] = [d.isoformat() for d in result.candidates]
    return out


def patch_json(patch: SlotPatch) -> dict[str, Any]:
    return patch.model_dump(exclude_none=True)


def _now_and_tz(now_text: str | None, tz_text: str | None) -> tuple[datetime, str]:
    tz = tz_text or os.environ.get("CALAGENT_DEFAULT_TZ") or DEFAULT_ZONE
    try:
        tzinfo = zone(tz)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    raw = now_text if now_text is not None else os.environ.get("CALAGENT_NOW")
    if not raw:
        return wall_clock_now(), tz
    try:
        now = datetime.fromisoformat(raw)
    except ValueError:
        raise _UsageError(f"--now {raw!r} is not an ISO 8601 date-time") from None
    # A naive --now is local wall time in the user's zone (the documented rule of the resolver).
    return (now if now.tzinfo is not None else now.replace(tzinfo=tzinfo)), tz


_VALUE_OPTIONS = frozenset({"--date", "--time", "--end-time", "--now", "--tz"})


def _glue_option_values(argv: list[str]) -> list[str]:
    """`--date --02-29` -> `--date=--02-29`: argparse would take the symbol for an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in _VALUE_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def resolve_main(argv: list[str]) -> int:
    """`calagent resolve --date SYM [--time HH:MM] [--end-time HH:MM] [--now ISO] [--tz TZ]`."""
    parser = _Parser(prog="calagent resolve", description="Resolve a canonical date symbol.")
    parser.add_argument(
        "--date", required=True, help="date symbol: D+1, W3+1, WE, 2026-09-30, --10-01, H:name"
    )
    parser.add_argument("--time", help="HH:MM, 24-hour")
    parser.add_argument("--end-time", help="HH:MM, later than --time on the same day")
    parser.add_argument("--now", help="ISO 8601 (default: $CALAGENT_NOW, else the clock)")
    parser.add_argument("--tz", help="IANA zone (default: $CALAGENT_DEFAULT_TZ, else Asia/Shanghai)")
    try:
        args = parser.parse_args(_glue_option_values(argv))
        now, tz = _now_and_tz(args.now, args.tz)
    except _UsageError as exc:
        code = "invalid_zone" if "time zone" in str(exc) else "invalid_symbol"
        print(_error_json(code, str(exc)))
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0) if isinstance(exc.code, int | None) else 2
    country = os.environ.get("CALAGENT_HOLIDAY_COUNTRY") or _DEFAULT_COUNTRY
    result = resolve_symbol(args.date, args.time, args.end_time, now, tz, country)
    print(_dumps(result_json(result)))
    return 2 if result.error is not None else 0


def parse_reply_main(argv: list[str]) -> int:
    """`calagent parse-reply "TEXT" [--now ISO] [--tz TZ]`: the slot patch as JSON.

    Most forms are emitted as symbols and do not depend on the day; a day of the month (12号,
    下个月5号, 月底, the 12th) is printed as `YYYY-MM-DD` for today in the zone. `--now` and `--tz`
    default as for `resolve`: `$CALAGENT_NOW`, else the clock; `$CALAGENT_DEFAULT_TZ`, else
    Asia/Shanghai.
    """
    parser = _Parser(prog="calagent parse-reply", description="Parse a short reply into a slot patch.")
    parser.add_argument("text")
    parser.add_argument("--now", help="ISO 8601 (default: $CALAGENT_NOW, else the clock)")
    parser.add_argument("--tz", help="IANA zone (default: $CALAGENT_DEFAULT_TZ, else Asia/Shanghai)")
    try:
        args = parser.parse_args(argv)
        now, tz = _now_and_tz(args.now, args.tz)
        local_today(now, tz)
    except _UsageError as exc:
        code = "invalid_zone" if "time zone" in str(exc) else "invalid_symbol"
        print(_error_json(code, str(exc)))
        return 2
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int | None) else 2
    # Only the patch, as contract section 7 prints it; `complete` is for the fast path over the bus.
    print(_dumps(patch_json(parse_reply(args.text, now, tz))))
    return 0


def bench_main(argv: list[str]) -> int:
    """`calagent bench`: our resolver and short-reply parser against dateparser, as JSON."""
    from calagent.timeparse.bench import run_benchmark

    parser = _Parser(prog="calagent bench", description="Benchmark the time service.")
    parser.add_argument("--seconds", type=float, default=0.5, help="time budget per measured loop")
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        print(_error_json("invalid_symbol", str(exc)))
        return 2
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int | None) else 2
    numbers = run_benchmark(seconds=args.seconds)
    print(_dumps({k: (None if v != v else round(v, 4)) for k, v in numbers.items()}))  # NaN -> null
    return 0
