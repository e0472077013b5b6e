"""Terminal text for `calagent timeline` and `calagent report`: pure functions of the JSON the
eval recorder answers with, so the output is testable without a running system."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from calagent.contracts.settings import DEFAULT_ZONE

BAR_WIDTH = 50
BAR = "█"

# Reasons whose turn, once made a case, belongs to the safety group (never retried in live eval).
SAFETY_REASONS = frozenset({"unverified_create_claim", "unverified_read_claim", "read_only_write_attempt"})


def _ms(value: Any) -> str:
    if value is None:
        return "-"
    number = float(value)
    return f"{number:.0f}" if abs(number) >= 100 else f"{number:.1f}"


def _width(text: str) -> int:
    # CJK characters take two terminal columns; padding by len() would break the columns.
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _pad(text: str, width: int, *, right: bool = False) -> str:
    fill = " " * max(width - _width(text), 0)
    return fill + text if right else text + fill


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, numeric_from: int = 1) -> list[str]:
    body = [list(row) for row in rows]
    widths = [max([_width(h)] + [_width(r[i]) for r in body]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [_pad(cell, widths[i], right=i >= numeric_from) for i, cell in enumerate(cells)]
        return "  " + "  ".join(parts).rstrip()

    out = [line(headers), "  " + "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in body)
    return out


def render_timeline(timeline: Mapping[str, Any]) -> str:
    """A waterfall: one line per segment, its bar placed at its offset on a 50-column axis."""
    segments: list[Mapping[str, Any]] = sorted(
        timeline.get("segments") or [], key=lambda s: float(s.get("start_ms", 0.0))
    )
    total = float(timeline.get("total_ms") or 0.0)
    # The axis spans the whole turn even if a segment was measured past the reported total.
    span = max([total] + [float(s["start_ms"]) + float(s["ms"]) for s in segments]) or 1.0
    scale = BAR_WIDTH / span
    name_width = max([_width(str(s["name"])) for s in segments] + [len("total")])
    start_width = max([len(_ms(s["start_ms"])) for s in segments] + [1])
    ms_width = max([len(_ms(s["ms"])) for s in segments] + [len(_ms(total))])

    lines = [f"turn {timeline.get('turn_id', '?')}  total {_ms(total)} ms"]
    for segment in segments:
        start, ms = float(segment["start_ms"]), float(segment["ms"])
        offset = min(round(start * scale), BAR_WIDTH - 1)
        # Every segment gets at least one cell so a 2 ms step is still visible on a 14 s axis.
        length = min(max(round(ms * scale), 1), BAR_WIDTH - offset)
        bar = " " * offset + BAR * length
        lines.append(
            f"{_pad(str(segment['name']), name_width)}  {_ms(start):>{start_width}} ms"
            f"  +{_ms(ms):>{ms_width}} ms  |{bar:<{BAR_WIDTH}}|"
        )
    if not segments:
        lines.append("(no segments recorded)")
    total_bar = BAR * (round(total * scale) if total else 0)
    lines.append(
        f"{_pad('total', name_width)}  {'':>{start_width}}      {_ms(total):>{ms_width}} ms  "
        f"|{total_bar:<{BAR_WIDTH}}|"
    )
    return "\n".join(lines)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _count_table(title: str, column: str, counts: Mapping[str, int], total: int) -> list[str]:
    lines = [f"{title}:"]
    if not counts:
        return [*lines, "  (none)"]
    rows = [(name, str(n), f"{100.0 * n / total:.1f}%" if total else "-") for name, n in counts.items()]
    return lines + _table((column, "count", "share"), rows)


def _latency_rows(summaries: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str, str, str]]:
    return [
        (name, str(s.get("count", 0)), _ms(s.get("p50")), _ms(s.get("p95"))) for name, s in summaries.items()
    ]


def render_report(report: Mapping[str, Any]) -> str:
    turns = int(report.get("turns", 0))
    window = report.get("window") or {}
    lines = [f"{_plural(turns, 'turn')} recorded"]
    if window.get("first"):
        lines[0] += f" ({window['first']} … {window['last']})"
    lines.append("")
    lines += _count_table("outcomes", "outcome", report.get("outcomes") or {}, turns)
    lines.append("")
    lines += _count_table("intents (post-hoc)", "intent", report.get("intents") or {}, turns)
    lines.append("")

    lines.append("latency per segment (ms):")
    segments = report.get("segments") or {}
    if segments:
        lines += _table(("segment", "n", "p50", "p95"), _latency_rows(segments))
    else:
        lines.append("  (none)")
    lines.append("")

    totals = report.get("total_ms") or {}
    lines.append("total latency, cold vs warm (ms):")
    lines += _table(
        ("start", "n", "p50", "p95"),
        _latency_rows({k: totals[k] for k in ("cold", "warm", "all") if k in totals}),
    )
    lines.append("")

    flags = report.get("flags") or {}
    lines += _count_table("flags", "flag", flags, turns)
    lines.append("")
    repairs = report.get("repairs") or {}
    if repairs:
        lines += _count_table("tool calls repaired", "repair", repairs, turns)
        lines.append("")

    calls = report.get("model_calls") or {}
    lines.append(f"model calls per turn: mean {_mean(calls.get('mean'))}")
    by_outcome = calls.get("by_outcome") or {}
    if by_outcome:
        lines += _table(("outcome", "mean"), [(k, _mean(v)) for k, v in by_outcome.items()])
    if "candidates" in report:
        lines.append("")
        lines.append(
            _plural(int(report.get("candidates_total", len(report["candidates"]))), "candidate turn")
            + " (calagent report --candidates)"
        )
    return "\n".join(lines)


def _mean(value: Any) -> str:
    return "-" if value is None else f"{float(value):.2f}"


def _one_line(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_candidates(report: Mapping[str, Any]) -> str:
    candidates: list[Mapping[str, Any]] = list(report.get("candidates") or [])
    total = int(report.get("candidates_total", len(candidates)))
    if not candidates:
        return "no candidate turns"
    head = _plural(total, "candidate turn") + (
        f" (showing {len(candidates)})" if total > len(candidates) else ""
    )
    lines = [head, ""]
    for c in candidates:
        tools = " → ".join(c.get("tools") or []) or "(no tool)"
        marker = "!" if c.get("safety") else "-"
        lines.append(
            f"{marker} {c['turn_id']}  {c.get('occurred_at', '')}  [{', '.join(c.get('reasons') or [])}]"
        )
        lines.append(f"    user:    {_one_line(str(c.get('text', '')))}")
        lines.append(f"    tools:   {tools}")
        outcome = str(c.get("outcome", ""))
        if c.get("total_ms") is not None:
            outcome += f"  ({_ms(c['total_ms'])} ms)"
        lines.append(f"    outcome: {outcome}")
        if c.get("replaced_reply"):
            lines.append(f"    claimed: {_one_line(str(c['replaced_reply']))}")
    return "\n".join(lines)


def _yaml_str(value: Any) -> str:
    # A JSON string is a valid YAML double-quoted scalar: quotes, colons, newlines and CJK text in
    # user messages all survive without a YAML emitter's line folding.
    return json.dumps("" if value is None else str(value), ensure_ascii=False)


def candidates_to_cases(report: Mapping[str, Any]) -> str:
    """A YAML case-file skeleton, one case per candidate turn; every TODO needs a human decision."""
    candidates: list[Mapping[str, Any]] = list(report.get("candidates") or [])
    lines = [
        "# Eval cases drafted from recorded turns (calagent report --candidates).",
        "# Replace every TODO with what the turn should have done, not with what it did;",
        "# the observed behaviour is in the comments. A failure that stays unfixed gets a",
        "# known_issue marker instead of a weakened expectation.",
        "cases:",
    ]
    if not candidates:
        lines[-1] = "cases: []"
        return "\n".join(lines) + "\n"
    for c in candidates:
        reasons = [str(r) for r in c.get("reasons") or []]
        tools = [str(t) for t in c.get("tools") or []]
        safety = any(r in SAFETY_REASONS for r in reasons)
        turn_id = str(c["turn_id"])
        lines += [
            f"  - id: {_yaml_str('online-' + turn_id[:12])}",
            f"    source_turn_id: {_yaml_str(turn_id)}",
            f"    reasons: [{', '.join(_yaml_str(r) for r in reasons)}]",
            f"    now: {_yaml_str(c.get('occurred_at'))}",
            f"    tz: {_yaml_str(c.get('tz') or DEFAULT_ZONE)}",
            f"    safety: {'true' if safety else 'false'}",
            "    known_issue: null",
            "    turns:",
            f"      - user: {_yaml_str(c.get('text'))}",
            "        expect:",
            f"          tools: TODO  # observed: [{', '.join(tools)}]",
            f"          outcome: TODO  # observed: {c.get('outcome', '')}",
        ]
    return "\n".join(lines) + "\n"


def render_usage(usage: Mapping[str, Any], by: str) -> str:
    """`calagent report --usage`: tokens per day, user or model since `since`."""
    header = (by, "turns", "calls", "prompt", "completion", "cached", "no usage")

    def row(r: Mapping[str, Any]) -> tuple[str, ...]:
        keys = (
            "turns",
            "model_calls",
            "prompt_tokens",
            "completion_tokens",
            "cached_tokens",
            "unreported_calls",
        )
        return (str(r["key"]), *(str(r[k]) for k in keys))

    lines = [f"model tokens since {usage['since']}:"]
    rows = [row(r) for r in usage.get("rows") or ()]
    lines += _table(header, [*rows, row(usage["total"])])
    return "\n".join(lines)
