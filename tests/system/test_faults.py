"""The fault suite's smoke, kept in `make test`: one SIGKILL of each part of a running system under
load, and nothing lost. `make faults` runs the same driver with hundreds of faults."""

from __future__ import annotations

import pytest

from calagent.cli.faults import SERVER_TARGETS, SERVICE_TARGETS, SUPERVISOR, format_report, run_faults

pytestmark = pytest.mark.e2e


def test_killing_each_part_under_load_loses_and_duplicates_nothing() -> None:
    targets = SERVICE_TARGETS + SERVER_TARGETS
    # Each service, nats-server and PostgreSQL once, then the supervisor itself.
    report = run_faults(kills=len(targets) + 1, clients=3, targets=targets, supervisor_every=len(targets) + 1)
    print(format_report(report))
    summary = report.as_dict()
    assert summary["faults_injected"] == len(targets) + 1, summary
    assert set(report.faults) == {*targets, SUPERVISOR}
    assert report.turns_sent > 0
    assert (report.lost, report.duplicated, report.unanswered, report.rejected) == (0, 0, 0, 0), summary
    assert report.unrecovered == 0, summary
    assert report.answered == report.turns_sent
    # The bus fuzz before the kills: refused where it must be, garbage dead-lettered, nothing crashed.
    bus = report.bus
    assert bus is not None
    assert bus.connections_refused == bus.connections_tried == 3
    assert bus.forged_done_refused == bus.forged_done_tried == 4
    assert bus.forged_done_delivered == 0
    assert bus.cross_reads_refused == bus.cross_reads_tried == 3
    assert bus.dead_letters_added > 0
    assert report.crashed_by_fuzz == []
