"""The reply parser against what people write beyond the core forms: English day-part words,
今晨 and 时/分, years in Chinese numerals, and numeric dates whose day/month order depends on the
user's zone. The corpus (corpus/breadth.jsonl) was labelled from the definitions before the grammar
grew to meet it. The invariant is "no confident wrong date": a phrase may come back `{}` (the model
asks), never as a patch other than its label."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from calagent.timeparse.domain.replies import parsed_reply

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).parent / "corpus" / "breadth.jsonl"
# Measured on this corpus; raise it when the grammar learns more, never lower it to pass.
MIN_RIGHT = 0.95


def _rows() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 60, "the breadth corpus is missing or truncated"
    return rows


def _patch(row: dict[str, Any]) -> dict[str, Any]:
    now = datetime.fromisoformat(row["now"]) if row["now"] else None
    return parsed_reply(row["text"], now=now, tz=row["tz"]).patch.model_dump(exclude_none=True)


@pytest.mark.parametrize("row", _rows(), ids=lambda row: f"{row['tz']}|{row['text']}")
def test_no_phrase_gives_a_patch_other_than_its_label(row: dict[str, Any]) -> None:
    got = _patch(row)
    assert got in ({}, row["expect"]), f"{row['text']!r} in {row['tz']}: {got}"


def test_most_of_the_corpus_is_understood() -> None:
    rows = _rows()
    missed = [row["text"] for row in rows if _patch(row) != row["expect"]]
    right = len(rows) - len(missed)
    print(f"\nbreadth corpus: {right}/{len(rows)} = {right / len(rows):.1%}; not understood: {missed}")
    assert right / len(rows) >= MIN_RIGHT
