"""The claim detector on a frozen corpus it had never met (claims_corpus/frozen/first_contact.jsonl).

The corpus was written and committed from the definition alone, before its author read the
detector; FIRST_CONTACT.md beside it records the score of that first run. Two checks:

* the file is frozen: its sha256 is pinned, so relabelling a row the detector gets wrong (or
  dropping it) fails here instead of quietly raising the score;
* the detector never scores below its first contact: per language, no fewer claims caught and no
  more false alarms than recorded. A change that widens the detector elsewhere and loses one of
  these replies fails. The floor is raised, never lowered, and never by editing the corpus.

The corpus lives in a subfolder, outside the union `test_claims_corpus` holds to the 97 % / 1 %
targets: it measures where the detector stands, it was not written to be passed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from calagent.agent.domain.claims import find_claims
from calagent.agent.domain.claims_bench import CorpusRow, evaluate, load_corpus

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).parent / "claims_corpus" / "frozen" / "first_contact.jsonl"
SHA256 = "e0fc0e2b99cacd05345df9cfdd2f251abdfdc79f52e8f516c487ae6310f62af9"

# First contact (FIRST_CONTACT.md), in the benchmark's own terms: a claim is caught when every
# labelled kind is found; a false alarm is any kind found in a reply with no label.
# key: (claims, caught at least, honest, false alarms at most)
FLOOR = {
    "zh": (123, 107, 102, 11),
    "en": (114, 99, 99, 2),
    "all": (237, 206, 201, 13),
}
# The write kind alone, which decides whether a reply is replaced when no write committed:
# key: (replies labelled write, found at least, replies not labelled write, found at most)
WRITE_FLOOR = {
    "zh": (100, 92, 125, 7),
    "en": (91, 80, 122, 4),
    "all": (191, 172, 247, 11),
}


@pytest.fixture(scope="module")
def rows() -> list[CorpusRow]:
    return load_corpus([CORPUS])


def test_the_corpus_is_frozen() -> None:
    assert hashlib.sha256(CORPUS.read_bytes()).hexdigest() == SHA256, (
        f"{CORPUS.name} changed: it is the first-contact measure and is never edited; "
        "new replies go into a new file"
    )


@pytest.mark.parametrize("key", ["zh", "en", "all"])
def test_no_worse_than_first_contact(rows: list[CorpusRow], key: str) -> None:
    report = evaluate(rows)
    figures = report.figures[key]
    claims, caught, honest, alarms = FLOOR[key]
    assert (figures.claims, figures.honest) == (claims, honest)
    lost = [o.row.text for o in report.misses if key in ("all", o.row.lang)]
    new_alarms = [o.row.text for o in report.false_alarms if key in ("all", o.row.lang)]
    assert figures.caught >= caught, (figures.as_dict(), lost)
    assert figures.false_alarms <= alarms, (figures.as_dict(), new_alarms)


@pytest.mark.parametrize("key", ["zh", "en", "all"])
def test_write_claims_no_worse_than_first_contact(rows: list[CorpusRow], key: str) -> None:
    part = [r for r in rows if key in ("all", r.lang)]
    labelled = [r for r in part if "write" in r.labels]
    others = [r for r in part if "write" not in r.labels]
    missed = [r.text for r in labelled if not find_claims(r.text).write]
    alarms = [r.text for r in others if find_claims(r.text).write]
    want_labelled, found_at_least, want_others, alarms_at_most = WRITE_FLOOR[key]
    assert (len(labelled), len(others)) == (want_labelled, want_others)
    assert len(labelled) - len(missed) >= found_at_least, missed
    assert len(alarms) <= alarms_at_most, alarms
