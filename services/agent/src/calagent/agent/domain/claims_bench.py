"""How well the exit check finds claims: recall and false alarms on labelled replies, and speed.

The corpora are test data, one JSON object per line:

    {"text": "...", "lang": "zh" | "en", "labels": [] | ["write"] | ["read"] | ["write", "read"],
     "source": "authored" | "independent"}

They live in ``services/agent/tests/claims_corpus/*.jsonl`` of the repository. `default_corpus_dir()`
finds that directory next to this source tree (the packages are installed in development mode from
the repository) or under the current directory; `calagent bench claims --corpus FILE_OR_DIR` points
elsewhere.

* `evaluate(rows)` is pure: it runs the detector on every reply and counts. A claim is *caught* when
  every labelled kind is detected; *any-kind* recall counts a claim found under either kind. A false
  alarm is an honest reply (no labels) in which anything was detected.
* `measure_speed(rows)` times the detector (the only clock use here): cold (memo cleared before each
  reply, the exit check's case) and over every streamed prefix (the streaming guard's case).
* `run_claims_benchmark(paths)` loads, evaluates, times; `format_report` renders it for the CLI.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

from calagent.agent.domain.claims import Claims, find_claims
from calagent.agent.domain.claims.detect import sentence_claims

__all__ = [
    "FALSE_ALARM_TARGET",
    "RECALL_TARGET",
    "BenchReport",
    "CorpusRow",
    "Figures",
    "Speed",
    "dedupe",
    "default_corpus_dir",
    "evaluate",
    "format_report",
    "load_corpus",
    "measure_speed",
    "run_claims_benchmark",
]

RECALL_TARGET = 0.97
FALSE_ALARM_TARGET = 0.01
KINDS = ("write", "read")


@dataclass(frozen=True)
class CorpusRow:
    text: str
    lang: str
    labels: tuple[str, ...]
    source: str

    @property
    def is_claim(self) -> bool:
        return bool(self.labels)


@dataclass
class Figures:
    n: int = 0
    claims: int = 0
    honest: int = 0
    caught: int = 0  # every labelled kind detected
    caught_any: int = 0  # some claim detected
    false_alarms: int = 0

    @property
    def recall(self) -> float:
        return self.caught / self.claims if self.claims else 1.0

    @property
    def any_recall(self) -> float:
        return self.caught_any / self.claims if self.claims else 1.0

    @property
    def false_alarm_rate(self) -> float:
        return self.false_alarms / self.honest if self.honest else 0.0

    @property
    def meets_targets(self) -> bool:
        return self.recall >= RECALL_TARGET and self.false_alarm_rate <= FALSE_ALARM_TARGET

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "claims": self.claims,
            "honest": self.honest,
            "recall": round(self.recall, 4),
            "any_kind_recall": round(self.any_recall, 4),
            "false_alarm_rate": round(self.false_alarm_rate, 4),
            "caught": self.caught,
            "caught_any": self.caught_any,
            "false_alarms": self.false_alarms,
        }


@dataclass(frozen=True)
class Outcome:
    row: CorpusRow
    found: tuple[str, ...]


@dataclass
class BenchReport:
    # keys: "all", "zh", "en", "<source>", "<source>/<lang>"
    figures: dict[str, Figures] = field(default_factory=dict)
    misses: list[Outcome] = field(default_factory=list)  # claims not fully caught
    false_alarms: list[Outcome] = field(default_factory=list)
    speed: Speed | None = None
    # honest replies that some streamed prefix makes look like a claim: the streaming guard would stop
    # sending deltas early (the final reply is unaffected; turn.done carries it)
    early_stops: list[tuple[str, CorpusRow]] = field(default_factory=list)
    duplicates: int = 0  # replies present in more than one corpus, counted once

    @property
    def meets_targets(self) -> bool:
        return all(self.figures[key].meets_targets for key in ("all", "zh", "en") if key in self.figures)

    def as_dict(self) -> dict[str, Any]:
        return {
            "figures": {key: value.as_dict() for key, value in self.figures.items()},
            "misses": [_outcome_dict(o) for o in self.misses],
            "false_alarms": [_outcome_dict(o) for o in self.false_alarms],
            "speed": None if self.speed is None else self.speed.as_dict(),
            "targets": {"recall": RECALL_TARGET, "false_alarm_rate": FALSE_ALARM_TARGET},
            "meets_targets": self.meets_targets,
            "duplicates_counted_once": self.duplicates,
            "honest_streams_stopped_early": [{"prefix": p, "text": r.text} for p, r in self.early_stops],
        }


@dataclass(frozen=True)
class Speed:
    cold_us_mean: float  # per reply, memo cleared first (the exit check)
    cold_us_p95: float
    cold_us_200: float  # per reply of 150-250 characters
    prefix_us_mean: float  # per streamed prefix, evaluated in order (the streaming guard)
    replies: int
    mean_chars: float

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def _outcome_dict(o: Outcome) -> dict[str, Any]:
    return {
        "text": o.row.text,
        "lang": o.row.lang,
        "source": o.row.source,
        "labels": list(o.row.labels),
        "found": list(o.found),
    }


def default_corpus_dir() -> Path | None:
    """`services/agent/tests/claims_corpus` of the repository this code runs from, else of the
    current directory (or one of its parents)."""
    here = Path(__file__).resolve()
    candidates = [here.parents[4] / "tests" / "claims_corpus"] if len(here.parents) > 4 else []
    cwd = Path.cwd().resolve()
    candidates += [d / "services" / "agent" / "tests" / "claims_corpus" for d in (cwd, *cwd.parents)]
    for candidate in candidates:
        if candidate.is_dir() and any(candidate.glob("*.jsonl")):
            return candidate
    return None


def corpus_files(paths: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.jsonl")) if path.is_dir() else [path])
    return files


def load_corpus(paths: Iterable[Path]) -> list[CorpusRow]:
    """Rows of the given .jsonl files (directories stand for their *.jsonl files)."""
    rows: list[CorpusRow] = []
    for file in corpus_files(paths):
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                labels = tuple(obj["labels"])
                if obj["lang"] not in ("zh", "en") or not set(labels) <= set(KINDS):
                    raise ValueError(f"lang {obj['lang']!r}, labels {labels!r}")
                rows.append(CorpusRow(obj["text"], obj["lang"], labels, str(obj.get("source", file.stem))))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{file}:{number}: not a corpus row ({exc})") from exc
    return rows


def _key(text: str) -> str:
    return "".join(text.lower().split()).rstrip("。.!！")


def dedupe(rows: Sequence[CorpusRow]) -> list[CorpusRow]:
    """The union without repeats (the issue's own examples are in both corpora): a reply counts once,
    as its independent copy when there is one."""
    ranked = sorted(rows, key=lambda row: row.source != "independent")
    seen: set[str] = set()
    keep: set[int] = set()
    for row in ranked:
        key = _key(row.text)
        if key not in seen:
            seen.add(key)
            keep.add(id(row))
    return [row for row in rows if id(row) in keep]


def _found(c: Claims) -> tuple[str, ...]:
    return tuple(kind for kind in KINDS if getattr(c, kind))


def evaluate(rows: Sequence[CorpusRow], detect: Callable[[str], Claims] = find_claims) -> BenchReport:
    """Recall on claims and false alarms on honest replies, overall, per language, per source."""
    report = BenchReport()
    for row in rows:
        found = _found(detect(row.text))
        outcome = Outcome(row, found)
        keys = ("all", row.lang, row.source, f"{row.source}/{row.lang}")
        for key in keys:
            figures = report.figures.setdefault(key, Figures())
            figures.n += 1
            if row.is_claim:
                figures.claims += 1
                figures.caught += set(row.labels) <= set(found)
                figures.caught_any += bool(found)
            else:
                figures.honest += 1
                figures.false_alarms += bool(found)
        if row.is_claim and not set(row.labels) <= set(found):
            report.misses.append(outcome)
        elif not row.is_claim and found:
            report.false_alarms.append(outcome)
        elif not row.is_claim:
            prefix = next(
                (row.text[:end] for end in range(1, len(row.text)) if detect(row.text[:end]).any), None
            )
            if prefix is not None:
                report.early_stops.append((prefix, row))
    return report


def measure_speed(rows: Sequence[CorpusRow], rounds: int = 3) -> Speed:
    """Microseconds per reply (cold) and per streamed prefix. Medians of `rounds` passes."""
    clear = sentence_claims.cache_clear
    texts = [row.text for row in rows]
    per_reply: list[float] = []
    cold_rounds: list[float] = []
    for _ in range(rounds):
        timings = []
        for text in texts:
            clear()
            start = perf_counter()
            find_claims(text)
            timings.append((perf_counter() - start) * 1e6)
        cold_rounds.append(statistics.fmean(timings))
        per_reply = timings
    long_texts = [t for t in texts if 150 <= len(t) <= 250] or _long_replies(texts)
    long_rounds = []
    for _ in range(rounds):
        start = perf_counter()
        for text in long_texts:
            clear()
            find_claims(text)
        long_rounds.append((perf_counter() - start) * 1e6 / len(long_texts))
    prefix_rounds = []
    for _ in range(rounds):
        clear()
        calls = 0
        start = perf_counter()
        for text in texts:
            for end in range(1, len(text) + 1):
                find_claims(text[:end])
            calls += len(text)
        prefix_rounds.append((perf_counter() - start) * 1e6 / max(calls, 1))
    per_reply.sort()
    return Speed(
        cold_us_mean=statistics.median(cold_rounds),
        cold_us_p95=per_reply[int(0.95 * (len(per_reply) - 1))] if per_reply else 0.0,
        cold_us_200=statistics.median(long_rounds),
        prefix_us_mean=statistics.median(prefix_rounds),
        replies=len(texts),
        mean_chars=statistics.fmean(len(t) for t in texts) if texts else 0.0,
    )


def _long_replies(texts: Sequence[str]) -> list[str]:
    """Replies of about 200 characters, made by joining corpus replies when none is that long."""
    out, current = [], ""
    for text in texts:
        current = f"{current} {text}".strip()
        if len(current) >= 200:
            out.append(current[:220])
            current = ""
    return out or [" ".join(texts)[:200]]


def run_claims_benchmark(paths: Sequence[Path] | None = None, timing: bool = True) -> BenchReport:
    if not paths:
        found = default_corpus_dir()
        if found is None:
            raise FileNotFoundError(
                "no claim corpus found: expected services/agent/tests/claims_corpus/*.jsonl in the "
                "repository (run from the repository, or pass --corpus FILE_OR_DIR)"
            )
        paths = [found]
    loaded = load_corpus(paths)
    rows = dedupe(loaded)
    report = evaluate(rows)
    report.duplicates = len(loaded) - len(rows)
    if timing:
        report.speed = measure_speed(rows)
    return report


def _pct(value: float) -> str:
    return f"{100 * value:6.2f}%"


def format_report(report: BenchReport, show_lists: bool = True) -> str:
    lines = [
        f"claims detector: recall target >= {_pct(RECALL_TARGET).strip()}, "
        f"false alarms target <= {_pct(FALSE_ALARM_TARGET).strip()}",
        f"{'corpus':22s} {'n':>5s} {'claims':>6s} {'honest':>6s} {'recall':>8s} {'any-kind':>8s} "
        f"{'false alarms':>13s}",
    ]
    sources = sorted({key.split("/")[0] for key in report.figures} - {"all", "zh", "en"})
    order = [f"{s}/{lang}" for s in sources for lang in ("zh", "en")] + sources + ["zh", "en", "all"]
    for key in order:
        f = report.figures.get(key)
        if f is None:
            continue
        label = {"zh": "together/zh", "en": "together/en", "all": "together/all"}.get(key, key)
        lines.append(
            f"{label:22s} {f.n:5d} {f.claims:6d} {f.honest:6d} {_pct(f.recall)} {_pct(f.any_recall)} "
            f"{_pct(f.false_alarm_rate):>9s} ({f.false_alarms})"
        )
    if report.duplicates:
        lines.append(f"({report.duplicates} replies present in more than one corpus are counted once)")
    lines.append(f"meets targets (zh, en, all): {'yes' if report.meets_targets else 'NO'}")
    if report.speed is not None:
        s = report.speed
        lines.append(
            f"speed: {s.cold_us_mean:.1f} us/reply cold (p95 {s.cold_us_p95:.1f}, mean {s.mean_chars:.0f} chars), "
            f"{s.cold_us_200:.1f} us per ~200-char reply cold, {s.prefix_us_mean:.1f} us per streamed prefix"
        )
    honest = report.figures["all"].honest if "all" in report.figures else 0
    lines.append(
        f"streaming: {len(report.early_stops)} of {honest} honest replies have a prefix that looks like a claim "
        "(the stream would stop early; the final reply is unaffected)"
    )
    if show_lists:
        lines.append(f"misses ({len(report.misses)}):")
        lines += [
            f"  [{o.row.source}/{o.row.lang}] want {'+'.join(o.row.labels)}, found {'+'.join(o.found) or '-'}: {o.row.text!r}"
            for o in report.misses
        ]
        lines.append(f"false alarms ({len(report.false_alarms)}):")
        lines += [
            f"  [{o.row.source}/{o.row.lang}] found {'+'.join(o.found)}: {o.row.text!r}"
            for o in report.false_alarms
        ]
    return "\n".join(lines)
