"""`calagent bench plan` measures placement and re-planning on problems drawn from a fixed seed."""

from __future__ import annotations

import argparse

import pytest

from calagent.cli.main import build_parser
from calagent.cli.planbench import measure

pytestmark = pytest.mark.unit


def test_bench_plan_is_a_bench_subcommand() -> None:
    args = build_parser().parse_args(["bench", "plan", "--budget", "0.2"])
    assert isinstance(args, argparse.Namespace)
    assert args.what == "plan" and args.budget == 0.2


def test_a_replan_moves_no_more_blocks_than_greedy_from_scratch() -> None:
    row = measure(10, 1, budget_s=0.3)
    assert row.plan_minutes >= row.greedy_minutes
    assert row.replan_moved <= row.greedy_moved
    assert row.blocks > 0
