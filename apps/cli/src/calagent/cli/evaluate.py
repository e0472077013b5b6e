"""`calagent eval offline|live`: the route eval over the whole system (architecture.md, "Evaluation
layers" 2 and 4).

Both modes start real NATS and PostgreSQL (`provide_servers`: env, testcontainers or the embedded
packages), one in-process stack built like production, and drive every case over HTTP. Offline, the
model is the scripted server, answering each turn from the case's script; live, it is the endpoint in
`OPENAI_BASE_URL`, and only setup turns and simulated outages are answered locally.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy.ext.asyncio import create_async_engine

from calagent.cli.evaluation.cases import Case, CaseError, Mode, default_cases_dir, load_cases
from calagent.cli.evaluation.runner import CaseResult, ModelControl, OfflineControl, Runner
from calagent.cli.evaluation.summary import summarize
from calagent.cli.stack import DEFAULT_NOW, start_stack
from calagent.scriptedmodel import Script, ScriptedModelServer

# Four calendars so a case can prove a sports event lands in its own calendar; the first stays the
# default, as in production.
EVAL_CALENDARS = "工作,家庭,个人,运动"
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _cell(text: str, width: int) -> str:
    out = ""
    for ch in text:
        if _width(out + ch) > width:
            break
        out += ch
    return out + " " * (width - _width(out))


def print_table(results: Sequence[CaseResult], out: TextIO) -> None:
    print(f"{_cell('case', 40)} {_cell('group', 12)} {_cell('result', 18)} reason", file=out)
    for r in results:
        print(f"{_cell(r.id, 40)} {_cell(r.group, 12)} {_cell(r.status, 18)} {r.reason[:160]}", file=out)


def print_pass_hat_k(table: dict[str, dict[str, float]], out: TextIO) -> None:
    """pass^1 … pass^K per group: the chance that K runs of a case all pass (τ-bench)."""
    ks = sorted({int(k) for row in table.values() for k in row})
    print(f"{_cell('group', 14)} " + " ".join(f"{'pass^' + str(k):>8}" for k in ks), file=out)
    for group, row in table.items():
        print(f"{_cell(group, 14)} " + " ".join(f"{row.get(str(k), 0.0):>8.3f}" for k in ks), file=out)


def print_ambiguity(matrix: dict[str, dict[str, int]], out: TextIO) -> None:
    """The ambiguity set's confusion matrix (contract §20): per number of events matching the
    user's words, the conversations that acted on the right one, only asked, or acted on a wrong one."""
    print("ambiguity: matching events × what the conversation did", file=out)
    print(f"{_cell('matches', 10)} {'right':>6} {'asked':>6} {'wrong':>6}", file=out)
    for matches, row in matrix.items():
        print(f"{_cell(matches, 10)} {row['right']:>6} {row['asked']:>6} {row['wrong']:>6}", file=out)


@contextmanager
def _servers() -> Iterator[tuple[str, str]]:
    from calagent.devtools.testing.servers import provide_servers

    with provide_servers() as servers:
        # A database of its own, so a run never meets rows of an earlier run or of a live system.
        yield servers.nats_url, servers.create_database()


async def run_cases(
    cases: Sequence[Case],
    *,
    mode: Mode,
    nats_url: str,
    database_url: str,
    model_base_url: str,
    control_factory: Any,
    concurrency: int = 1,
    settings_overrides: dict[str, Any] | None = None,
    out: TextIO | None = None,
    trials: int = 1,
) -> list[CaseResult]:
    overrides: dict[str, Any] = {"CALAGENT_DEFAULT_CALENDARS": EVAL_CALENDARS, **(settings_overrides or {})}
    stack = await start_stack(
        nats_url=nats_url,
        database_url=database_url,
        model_base_url=model_base_url,
        settings_overrides=overrides,
    )
    engine = create_async_engine(database_url)
    try:
        control: ModelControl = control_factory(stack)
        runner = Runner(stack, engine, control, mode, DEFAULT_NOW, trials=trials)

        def progress(result: CaseResult) -> None:
            if out is not None and result.status not in ("passed", "skipped"):
                print(f"  {result.status}: {result.id}: {result.reason[:200]}", file=out, flush=True)

        return await runner.run(cases, concurrency=concurrency, on_result=progress)
    finally:
        await engine.dispose()
        await stack.stop()


async def run_offline(
    cases: Sequence[Case],
    nats_url: str,
    database_url: str,
    scripted: ScriptedModelServer | None = None,
    trials: int = 1,
) -> list[CaseResult]:
    """Every case through the real stack with the scripted model, one case at a time: the scripted
    server holds one script, set per turn."""
    own = scripted is None
    server = scripted or ScriptedModelServer(Script(rules=[]))
    base_url = server.start()
    try:
        return await run_cases(
            cases,
            mode="offline",
            nats_url=nats_url,
            database_url=database_url,
            model_base_url=base_url,
            control_factory=lambda _stack: OfflineControl(server),
            trials=trials,
        )
    finally:
        if own:
            server.stop()


async def run_live(
    cases: Sequence[Case],
    nats_url: str,
    database_url: str,
    base_url: str,
    api_key: str | None,
    concurrency: int,
    out: TextIO | None = None,
    trials: int = 1,
) -> list[CaseResult]:
    from calagent.cli.evaluation.live import LiveControl, LiveProxy

    proxy = LiveProxy(base_url, api_key)
    proxy_url = proxy.start()
    try:
        return await run_cases(
            cases,
            mode="live",
            nats_url=nats_url,
            database_url=database_url,
            model_base_url=proxy_url,
            control_factory=lambda _stack: LiveControl(proxy),
            concurrency=concurrency,
            # A real model is slower than the scripted one; the stack's test timeouts would cut it off.
            settings_overrides={"CALAGENT_MODEL_TIMEOUT_S": 120.0, "CALAGENT_TURN_TIMEOUT_S": 240.0},
            out=out,
            trials=trials,
        )
    finally:
        proxy.stop()


def write_report(
    results: Sequence[CaseResult], path: str | None, mode: str, seconds: float
) -> dict[str, Any]:
    report = {"mode": mode, "seconds": round(seconds, 3), **summarize(results)}
    if path:
        Path(path).write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return report


def run_eval(
    mode: str,
    report: str | None,
    group: str | None,
    concurrency: int,
    cases_dir: str | None,
    out: TextIO | None = None,
    trials: int = 1,
) -> int:
    out = out or sys.stdout
    if mode not in ("offline", "live"):
        print(f"unknown eval mode {mode!r}", file=sys.stderr)
        return EXIT_USAGE
    base_url = os.environ.get("OPENAI_BASE_URL")
    if mode == "live" and not base_url:
        print(
            "calagent eval live needs a real model: set OPENAI_BASE_URL (and OPENAI_API_KEY, CALAGENT_MODEL);"
            " use `calagent eval offline` for the scripted route eval",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        cases = load_cases(cases_dir or default_cases_dir(), group)
    except CaseError as exc:
        print(f"invalid cases: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not cases:
        print(f"no cases{f' in group {group!r}' if group else ''}", file=sys.stderr)
        return EXIT_USAGE

    started = time.perf_counter()
    with _servers() as (nats_url, database_url):
        if mode == "offline":
            results = asyncio.run(run_offline(cases, nats_url, database_url, trials=trials))
        else:
            assert base_url is not None
            results = asyncio.run(
                run_live(
                    cases,
                    nats_url,
                    database_url,
                    base_url,
                    os.environ.get("OPENAI_API_KEY"),
                    concurrency,
                    out,
                    trials,
                )
            )
    seconds = time.perf_counter() - started
    summary = write_report(results, report, mode, seconds)
    print_table(results, out)
    print(
        f"{mode}: {summary['cases']} cases in {seconds:.1f}s — known_issue {summary['known_issue']}, "
        f"flaky {summary['flaky']}, stale_known_issue {summary['stale_known_issue']}, "
        f"unclassified {summary['unclassified']}, skipped {summary['skipped']}",
        file=out,
    )
    if "pass_hat_k" in summary:
        print_pass_hat_k(summary["pass_hat_k"], out)
    if "ambiguity" in summary:
        print_ambiguity(summary["ambiguity"], out)
    print(f"{summary['passed']} passed, {summary['failed']} failed", file=out, flush=True)
    return EXIT_GATE_FAILED if summary["unclassified"] or summary["stale_known_issue"] else 0
