"""`calagent bench plan` measures placement and re-planning on problems drawn from a fixed seed."""

from __future__ import annotations

import argparse
import random
from time import perf_counter as time_counter

import pytest

from calagent.cli.main import build_parser
from calagent.cli.planbench import measure, meetings, problem_of
from calagent.commands.tasks.domain.placement import greedy, plan, score

pytestmark = pytest.mark.unit


def test_bench_plan_is_a_bench_subcommand() -> None:
    args = build_parser().parse_args(["bench", "plan", "--budget", "0.2"])
    assert isinstance(args, argparse.Namespace)
    assert args.what == "plan" and args.budget == 0.2


def test_a_replan_places_as_much_as_greedy_from_scratch_and_moves_no_more_for_as_much() -> None:
    row = measure(10, 1, budget_s=0.3)
    assert row.plan_minutes >= row.greedy_minutes
    assert row.replan_minutes >= row.greedy_replan_minutes
    # Moving more blocks than greedy is a fair price only for placing more than greedy does.
    assert row.replan_moved <= row.greedy_moved or row.replan_minutes > row.greedy_replan_minutes
    assert row.blocks > 0


def test_a_hundred_tasks_are_placed_within_the_budget_and_the_same_on_a_rerun() -> None:
    # The bench's largest calendar: the solver's limit is the budget (it ran for three budgets).
    rng = random.Random("34-100-2")
    hard = problem_of(rng, 100, 2, meetings(rng, 2))
    began = time_counter()
    first = plan(hard, budget_s=1.0)
    took = time_counter() - began
    assert took < 1.5, took
    assert score(first) >= score(greedy(hard))
    assert plan(hard, budget_s=1.0) == first
