"""The reply parser against dates as people type them, labelled by someone who saw only the
contract (never the grammar): accuracy per language, and — what matters most — no confident
wrong answer. A reply the parser cannot read must come back `{}` (the model asks), never as a
guessed date."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from calagent.timeparse.domain.replies import parsed_reply

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).parent / "corpus" / "dates_independent.jsonl"
MIN_ACCURACY = 0.95


def _rows() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 200, "the independent corpus is missing or truncated"
    return rows


def _score() -> tuple[dict[str, tuple[int, int]], list[tuple[str, dict[str, Any], dict[str, Any]]]]:
    per_lang: dict[str, tuple[int, int]] = {}
    wrong: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for row in _rows():
        got = parsed_reply(row["text"], now=datetime.fromisoformat(row["now"]), tz=row["tz"])
        patch = got.patch.model_dump(exclude_none=True)
        right, total = per_lang.get(row["lang"], (0, 0))
        per_lang[row["lang"]] = (right + (patch == row["expect"]), total + 1)
        if patch and patch != row["expect"]:
            wrong.append((row["text"], row["expect"], patch))
    return per_lang, wrong


def test_accuracy_per_language_on_the_independent_corpus() -> None:
    per_lang, _ = _score()
    print()
    for lang, (right, total) in sorted(per_lang.items()):
        print(f"typed dates, independent corpus, {lang}: {right}/{total} = {right / total:.1%}")
    assert set(per_lang) == {"zh", "en"}
    for lang, (right, total) in per_lang.items():
        assert right / total >= MIN_ACCURACY, lang


def test_no_confident_wrong_answer() -> None:
    _, wrong = _score()
    assert wrong == []
