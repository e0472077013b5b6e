"""The claim detector against the labelled corpora (services/agent/tests/claims_corpus/*.jsonl).

Over the union of the authored corpus and the one written independently from the definition alone:
recall on claims >= 97 % and false alarms on honest replies <= 1 %, per language and overall. The
independent corpus must be present (its absence fails, it is never skipped) and must supply at least
half of the at least 400 replies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from calagent.agent.domain.claims_bench import (
    FALSE_ALARM_TARGET,
    RECALL_TARGET,
    CorpusRow,
    dedupe,
    evaluate,
    load_corpus,
)

pytestmark = pytest.mark.unit

CORPUS_DIR = Path(__file__).parent / "claims_corpus"
AUTHORED = CORPUS_DIR / "authored.jsonl"
INDEPENDENT = CORPUS_DIR / "independent.jsonl"


def test_both_corpora_are_present() -> None:
    """Never skipped: without the held-out corpus the figures prove nothing."""
    assert AUTHORED.is_file(), f"missing {AUTHORED}"
    assert INDEPENDENT.is_file(), f"missing {INDEPENDENT}: the held-out corpus is required"


@pytest.fixture(scope="module")
def rows() -> list[CorpusRow]:
    assert AUTHORED.is_file(), f"missing {AUTHORED}"
    assert INDEPENDENT.is_file(), f"missing {INDEPENDENT}: the held-out corpus is required"
    return dedupe(load_corpus([AUTHORED, INDEPENDENT]))


def test_corpus_size_and_independence(rows: list[CorpusRow]) -> None:
    assert len(rows) >= 400
    independent = [r for r in rows if r.source == "independent"]
    assert 2 * len(independent) >= len(rows), f"{len(independent)} of {len(rows)} independent"
    for source in ("authored", "independent"):
        for lang in ("zh", "en"):
            part = [r for r in rows if r.source == source and r.lang == lang]
            assert any(r.is_claim for r in part) and any(not r.is_claim for r in part), (source, lang)


def test_corpus_sources_are_labelled() -> None:
    assert {r.source for r in load_corpus([AUTHORED])} == {"authored"}
    assert {r.source for r in load_corpus([INDEPENDENT])} == {"independent"}


@pytest.mark.parametrize("key", ["zh", "en", "all"])
def test_recall_and_false_alarms(rows: list[CorpusRow], key: str) -> None:
    report = evaluate(rows)
    figures = report.figures[key]
    misses = [o.row.text for o in report.misses if key in ("all", o.row.lang)]
    alarms = [o.row.text for o in report.false_alarms if key in ("all", o.row.lang)]
    assert figures.recall >= RECALL_TARGET, (figures.as_dict(), misses)
    assert figures.false_alarm_rate <= FALSE_ALARM_TARGET, (figures.as_dict(), alarms)
