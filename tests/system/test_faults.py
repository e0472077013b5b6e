"""The fault suite's smoke, kept in `make test`: one SIGKILL of each part of a running system under
load, and nothing lost. `make faults` runs the same driver with hundreds of faults."""

from __future__ import annotations

import pytest

from calagent.cli.faults import SERVICE_TARGETS, run_faults

pytestmark = pytest.mark.e2e


def test_killing_each_part_under_load_loses_and_duplicates_nothing() -> None:
    report = run_faults(kills=len(SERVICE_TARGETS), clients=3, targets=SERVICE_TARGETS, supervisor_every=0)
    summary = report.as_dict()
    assert summary["faults_injected"] == len(SERVICE_TARGETS), summary
    assert set(report.faults) == set(SERVICE_TARGETS)
    assert report.turns_sent > 0
    assert (report.lost, report.duplicated, report.unanswered, report.rejected) == (0, 0, 0, 0), summary
    assert report.unrecovered == 0, summary
    assert report.answered == report.turns_sent
