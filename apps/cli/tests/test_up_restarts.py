"""The supervisor's restart backoff (`calagent.cli.up.Supervisor.reap`) on real child processes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from calagent.cli.up import FIRST_RESTART_DELAY_S, STABLE_AFTER_S, Child, Supervisor
from calagent.runtime.settings import Settings

pytestmark = pytest.mark.unit


def exited_child(uptime_s: float, restarts: int) -> Child:
    child = Child("svc", argv=[sys.executable, "-c", "pass"])
    child.start()
    assert child.proc is not None
    child.proc.wait(timeout=30)
    child.started_at = time.monotonic() - uptime_s
    child.restarts = restarts
    return child


def supervisor(tmp_path: Path, child: Child) -> Supervisor:
    settings = Settings(CALAGENT_DATA_DIR=tmp_path, CALAGENT_AUTH_SECRET="x" * 40)
    return Supervisor(settings=settings, port=0, scale={}, children=[child])


def test_a_child_killed_after_running_a_while_comes_back_at_the_first_delay(tmp_path: Path) -> None:
    # Killed again and again (a fault drill, an OOM killer): each time it had run for a while, so
    # it is no crash loop and must not wait up to half a minute.
    child = exited_child(uptime_s=STABLE_AFTER_S + 1, restarts=6)
    began = time.monotonic()
    supervisor(tmp_path, child).reap()
    assert child.next_start - began <= FIRST_RESTART_DELAY_S + 0.05


def test_a_child_that_dies_right_after_starting_backs_off(tmp_path: Path) -> None:
    child = exited_child(uptime_s=0.5, restarts=4)
    began = time.monotonic()
    supervisor(tmp_path, child).reap()
    assert child.next_start - began >= FIRST_RESTART_DELAY_S * 2**4 - 0.05
