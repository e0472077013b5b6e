"""An eval run summed up: counts per status and group, τ-bench's pass^k over repeated trials, and
the ambiguity set's confusion matrix (contract §20)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from calagent.cli.evaluation.checks import VERDICTS
from calagent.cli.evaluation.runner import FAILING, PASSING, STATUSES, CaseResult


def summarize(results: Sequence[CaseResult]) -> dict[str, Any]:
    counts = {status: sum(1 for r in results if r.status == status) for status in STATUSES}
    by_group: dict[str, dict[str, int]] = {}
    for r in results:
        group = by_group.setdefault(r.group, dict.fromkeys(("failed", *STATUSES), 0))
        if r.status != "passed":
            group[r.status] += 1
        if r.status in PASSING:
            group["passed"] += 1
        elif r.status in FAILING:
            group["failed"] += 1
    return {
        "cases": len(results),
        "passed": sum(1 for r in results if r.status in PASSING),
        "failed": sum(1 for r in results if r.status in FAILING),
        "known_issue": counts["known_issue"],
        "flaky": counts["flaky"],
        "stale_known_issue": counts["stale_known_issue"],
        "unclassified": counts["unclassified"],
        "skipped": counts["skipped"],
        "by_group": dict(sorted(by_group.items())),
        **({"pass_hat_k": pass_hat_k_by_group(results)} if any(r.trials for r in results) else {}),
        **({"ambiguity": ambiguity_matrix(results)} if any(r.ambiguity for r in results) else {}),
        "results": [r.to_json() for r in results],
    }


def pass_hat_k(trials: Sequence[Sequence[bool]], k: int) -> float:
    """τ-bench's pass^k: the chance that k runs drawn from a case's n all pass, C(c, k) / C(n, k)
    with c passes, averaged over the cases."""
    scores = [math.comb(sum(t), k) / math.comb(len(t), k) for t in trials if len(t) >= k]
    return sum(scores) / len(scores) if scores else 0.0


def pass_hat_k_by_group(results: Sequence[CaseResult]) -> dict[str, dict[str, float]]:
    """pass^1 … pass^K per group (and `all`), over the cases that ran K trials."""
    groups: dict[str, list[list[bool]]] = {}
    for r in results:
        if r.trials:
            groups.setdefault(r.group, []).append(r.trials)
            groups.setdefault("all", []).append(r.trials)
    k_max = max((len(t) for ts in groups.values() for t in ts), default=0)
    return {
        group: {str(k): round(pass_hat_k(ts, k), 4) for k in range(1, k_max + 1)}
        for group, ts in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0]))
    }


def ambiguity_matrix(results: Sequence[CaseResult]) -> dict[str, dict[str, int]]:
    """The ambiguity set as a confusion matrix (contract §20): per number of matching events, how
    many conversations acted on the right one, only asked, or acted on a wrong one."""
    matrix: dict[str, dict[str, int]] = {}
    for r in results:
        if r.ambiguity is None:
            continue
        row = matrix.setdefault(str(r.ambiguity["matches"]), dict.fromkeys(VERDICTS, 0))
        row[r.ambiguity["verdict"]] += 1
    return dict(sorted(matrix.items()))
