"""The stub and outcome vocabulary is declared once (`contracts.commands`, issue 31): every status
set and every wider Literal is built from it, so a new status must be classified, and a misspelt
status in a set is a type error (mypy is part of the build)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import get_args

import pytest
from mypy import api as mypy_api

from calagent.contracts.commands import (
    ACTIVE_STUB_STATUSES,
    COMMAND_OUTCOMES,
    FINAL_STUB_STATUSES,
    OFFER_STUB_STATUSES,
    WRITTEN_STATUSES,
    CommandStatus,
    StubStatus,
    is_command_outcome,
)
from calagent.contracts.turns import Outcome

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
STUB_STATUSES = set(get_args(StubStatus))


def test_every_stub_status_is_either_active_or_final() -> None:
    assert len(STUB_STATUSES) == len(get_args(StubStatus))  # no word declared twice
    assert ACTIVE_STUB_STATUSES | FINAL_STUB_STATUSES == STUB_STATUSES
    assert not ACTIVE_STUB_STATUSES & FINAL_STUB_STATUSES
    assert OFFER_STUB_STATUSES <= ACTIVE_STUB_STATUSES


def test_a_command_answers_a_stub_status_or_an_error_and_each_outcome_is_a_turns() -> None:
    statuses = set(get_args(CommandStatus))
    assert statuses - {"error"} <= STUB_STATUSES
    assert statuses == COMMAND_OUTCOMES | {"expired", "error"}
    assert WRITTEN_STATUSES <= COMMAND_OUTCOMES
    # The outcomes of a turn that are stub statuses are exactly the command's outcomes.
    assert set(get_args(Outcome)) & STUB_STATUSES == COMMAND_OUTCOMES
    assert {s for s in get_args(CommandStatus) if is_command_outcome(s)} == COMMAND_OUTCOMES


CLEAN = """
from calagent.contracts.commands import (ACTIVE_STUB_STATUSES, COMMAND_OUTCOMES, FINAL_STUB_STATUSES, OFFER_STUB_STATUSES, WRITTEN_STATUSES, CommandStatus, StubStatus)
from calagent.contracts.turns import Outcome

# Each set is typed by its vocabulary: a `frozenset[str]` would not be assignable here.
stubs: tuple[frozenset[StubStatus], ...] = (
    ACTIVE_STUB_STATUSES, FINAL_STUB_STATUSES, OFFER_STUB_STATUSES
)
answers: tuple[frozenset[CommandStatus], ...] = (COMMAND_OUTCOMES, WRITTEN_STATUSES)
outcome: Outcome = "needs_attendee"
"""

MISSPELT = """
from calagent.contracts.commands import (CommandStatus, StubStatus)
from calagent.contracts.turns import Outcome

offers: frozenset[StubStatus] = frozenset({"conflict", "helld"})
written: frozenset[CommandStatus] = frozenset({"creatd"})
outcome: Outcome = "needs_attendees"
"""


def test_a_misspelt_status_is_a_type_error_and_every_set_is_typed_by_its_vocabulary(
    tmp_path: Path,
) -> None:
    clean, misspelt = tmp_path / "clean.py", tmp_path / "misspelt.py"
    clean.write_text(textwrap.dedent(CLEAN))
    misspelt.write_text(textwrap.dedent(MISSPELT))
    report, _, _ = mypy_api.run(
        [
            str(clean),
            str(misspelt),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--follow-imports=silent",
            # The project's own cache (`make typecheck` writes it): the contracts are read from it,
            # not checked again, and only the two files here are.
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
        ]
    )
    errors = [line for line in report.splitlines() if ": error:" in line]
    assert not [e for e in errors if e.startswith(str(clean))], report
    assert sorted(int(e.split(":")[1]) for e in errors) == [5, 6, 7], report
