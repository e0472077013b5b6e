"""The `calagent` command (contract §1)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, TypeAlias

from calagent.cli.up import STATE_FILE
from calagent.contracts.wire import Endpoint, Rep, Req
from calagent.runtime.settings import Settings


def _state(settings: Settings) -> dict[str, Any]:
    path = settings.data_dir.resolve() / STATE_FILE
    if path.exists():
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    return {}


def _gateway_url(settings: Settings, explicit: str | None) -> str:
    if explicit:
        return explicit.rstrip("/")
    state = _state(settings)
    if "url" in state:
        return str(state["url"])
    return f"http://127.0.0.1:{settings.http_port}"


def _nats_url(settings: Settings) -> str:
    if settings.nats_url:
        return settings.nats_url
    state = _state(settings)
    if "nats_url" in state:
        return str(state["nats_url"])
    raise SystemExit("no running system found: start `calagent up` or set NATS_URL")


def make_token(settings: Settings, user_id: str, tz: str | None, aliases: tuple[str, ...] = ()) -> str:
    from calagent.gateway.auth import issue_token

    return issue_token(user_id, settings.require_auth_secret(), tz=tz, aliases=aliases)


def make_login_link(settings: Settings, user_id: str, tz: str | None, base_url: str) -> str:
    """A one-time sign-in link for the page, valid ten minutes of the system's clock."""
    from calagent.gateway.auth import issue_login_token
    from calagent.runtime.clock import clock_from_env

    now = clock_from_env(settings.now).now()
    return f"{base_url}/#login={issue_login_token(user_id, settings.require_auth_secret(), now, tz=tz)}"


def cmd_login_link(args: argparse.Namespace) -> int:
    settings = Settings()
    try:
        link = make_login_link(settings, args.user_id, args.tz, _gateway_url(settings, args.url))
    except (RuntimeError, ValueError) as exc:
        print(f"calagent login-link: {exc}", file=sys.stderr)
        return 2
    print(link)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    try:
        token = make_token(Settings(), args.user_id, args.tz, tuple(args.alias))
    except RuntimeError as exc:
        print(f"calagent token: {exc}", file=sys.stderr)
        return 2
    print(token)
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    settings = Settings()
    url = _gateway_url(settings, args.url)
    body: dict[str, Any] = {"message": args.message, "client_message_id": uuid.uuid4().hex}
    if args.conversation:
        body["conversation_id"] = args.conversation
    if args.active_command:
        body["active_command_id"] = args.active_command
    request = urllib.request.Request(  # noqa: S310
        f"{url}/v1/chat",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {make_token(settings, args.user, args.tz)}",
            "Content-Type": "application/json",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.turn_timeout_s + 10) as response:  # noqa: S310
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        print(f"error {exc.code}: {exc.read().decode(errors='replace')}", file=sys.stderr)
        return 1
    except urllib.error.URLError as exc:
        print(f"cannot reach the gateway at {url}: {exc.reason}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(answer, ensure_ascii=False, indent=2))
        return 0
    print(answer["reply"])
    if answer.get("command"):
        command = answer["command"]
        candidates = ", ".join(command.get("candidates") or [])
        print(
            f"[command {command['id']} {command['status']}: {command['title']}{' — ' + candidates if candidates else ''}]"
        )
    print(
        f"[{answer['outcome']} · {answer['intent']} · model calls {answer['model_calls']} · turn {answer['turn_id']}]"
    )
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from calagent.timeparse.cli import resolve_main

    return resolve_main(args.rest)


def cmd_parse_reply(args: argparse.Namespace) -> int:
    from calagent.timeparse.cli import parse_reply_main

    return parse_reply_main(args.rest)


async def _evalrec_request(endpoint: Endpoint[Req, Rep], message: Req) -> Rep:
    from calagent.runtime.bus import Bus

    bus = await Bus.connect(_nats_url(Settings()), "cli")
    try:
        return await bus.request(endpoint, message, timeout=10)
    finally:
        await bus.close()


def cmd_timeline(args: argparse.Namespace) -> int:
    from calagent.cli.render import render_timeline
    from calagent.contracts import wire
    from calagent.contracts.evalrec import TimelineRequest

    result = asyncio.run(_evalrec_request(wire.EVALREC_TIMELINE, TimelineRequest(turn_id=args.turn_id)))
    if result.timeline is None:
        print(f"no recorded turn {args.turn_id}", file=sys.stderr)
        return 1
    print(render_timeline(result.timeline.model_dump(mode="json")))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from calagent.cli.render import candidates_to_cases, render_candidates, render_report, render_usage
    from calagent.contracts import wire
    from calagent.contracts.evalrec import ReportRequest, UsageRequest

    if args.usage:
        usage = asyncio.run(_evalrec_request(wire.EVALREC_USAGE, UsageRequest(days=args.days, by=args.by)))
        if args.json:
            print(usage.model_dump_json(indent=2))
        else:
            print(render_usage(usage.model_dump(mode="json"), args.by))
        return 0

    result = asyncio.run(
        _evalrec_request(wire.EVALREC_REPORT, ReportRequest(candidates=args.candidates or bool(args.cases)))
    )
    if args.json:
        print(json.dumps(result.report, ensure_ascii=False, indent=2))
    elif args.cases:
        Path(args.cases).write_text(candidates_to_cases(result.report))
        print(f"wrote case skeletons to {args.cases}")
    elif args.candidates:
        print(render_candidates(result.report))
    else:
        print(render_report(result.report))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from calagent.cli.doctor import as_json, render, run_doctor
    from calagent.runtime.settings import Settings

    settings = Settings()
    if not settings.openai_base_url:
        print("no model endpoint configured: set OPENAI_BASE_URL (and OPENAI_API_KEY, CALAGENT_MODEL)")
        return 1
    checks, can_call_tools = asyncio.run(
        run_doctor(settings.openai_base_url, settings.openai_api_key or "not-needed", settings.model)
    )
    print(as_json(checks) if args.json else render(checks))
    return 0 if can_call_tools else 1


def cmd_asyncapi(args: argparse.Namespace) -> int:
    from calagent.cli.asyncapi import render

    text = render()
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from calagent.cli.up import run_up

    demo = None
    networks: tuple[str, ...] = ()
    if getattr(args, "caldav_demo", False):
        from calagent.cli.caldavdemo import start_demo
        from calagent.runtime.settings import load_settings

        demo, note = start_demo(load_settings().data_dir)
        # The demo server is on loopback, which the CalDAV guard refuses unless told: its own
        # address (and only that) is allowed, for the services this `up` starts.
        networks = (demo.network,)
        print(note, flush=True)
    try:
        return run_up(args.port, args.scale, args.nats_cluster, networks)
    except ValueError as exc:
        print(f"calagent up: {exc}", file=sys.stderr)
        return 2
    finally:
        if demo is not None:
            demo.stop()


def cmd_eval(args: argparse.Namespace) -> int:
    from calagent.cli.evaluate import run_eval

    if args.trials < 1:
        print("--trials must be at least 1", file=sys.stderr)
        return 2
    return run_eval(args.mode, args.report, args.group, args.concurrency, args.cases_dir, trials=args.trials)


def cmd_bench(args: argparse.Namespace) -> int:
    """`calagent bench` prints the time-service numbers (as before); `calagent bench claims` the exit
    check's recall and false alarms on the labelled replies; `calagent bench all` both. The claim
    corpora are services/agent/tests/claims_corpus/*.jsonl of the repository (found from the source
    tree or the current directory); `--corpus FILE_OR_DIR` (repeatable) reads others."""
    what = getattr(args, "what", "timeparse")
    code = 0
    if what == "turns":
        from calagent.cli.turnbench import run_turn_bench

        return run_turn_bench(args)
    if what == "caldav":
        from calagent.cli.caldavbench import run_caldav_bench

        return run_caldav_bench(args)
    if what == "plan":
        from calagent.cli.planbench import run_plan_bench

        return run_plan_bench(args)
    if what in ("timeparse", "all"):
        from calagent.timeparse.bench import run_benchmark

        for key, value in run_benchmark().items():
            print(f"{key:40s} {value}")
    if what in ("claims", "all"):
        from calagent.agent.domain.claims_bench import format_report, run_claims_benchmark

        corpus = [Path(p) for p in (getattr(args, "corpus", None) or [])]
        try:
            report = run_claims_benchmark(corpus)
        except (FileNotFoundError, ValueError) as exc:
            print(f"calagent bench claims: {exc}", file=sys.stderr)
            return 2
        if getattr(args, "json", False):
            print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        else:
            if what == "all":
                print()
            print(format_report(report))
        code = 0 if report.meets_targets else 1
    return code


def cmd_faults(args: argparse.Namespace) -> int:
    from calagent.cli.faults import run_faults_command

    return run_faults_command(args)


# Long on purpose: one flat declaration per subcommand and flag, read top to bottom like `--help`.
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="calagent", description="calendar chat agent backend")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_running(sub)
    _add_operating(sub)
    _add_measuring(sub)
    asyncapi = sub.add_parser("asyncapi", help="print (or write) the AsyncAPI document of every subject")
    asyncapi.add_argument("--out", default=None, help="write it to this file, e.g. docs/asyncapi.json")
    asyncapi.set_defaults(func=cmd_asyncapi)
    return parser


# What `add_subparsers` returns, each group of subcommands added to it (subscripted for the type
# checker only: argparse's class is not generic at run time).
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_running(sub: Subcommands) -> None:
    """Starting the system and talking to it: up, token, login-link, chat, resolve, parse-reply."""
    up = sub.add_parser("up", help="start the whole system in the foreground")
    up.add_argument("--port", type=int, default=None)
    up.add_argument("--scale", default=None, help="replicas, e.g. agent=2,commands=2")
    up.add_argument(
        "--caldav-demo", action="store_true", help="also start a local CalDAV server with a demo account"
    )
    up.add_argument(
        "--nats-cluster",
        type=int,
        default=1,
        metavar="N",
        help="run N nats-server nodes on this host as one cluster, every stream replicated N ways",
    )
    up.set_defaults(func=cmd_up)

    token = sub.add_parser("token", help="print a bearer token for a user")
    token.add_argument("user_id")
    token.add_argument("--tz", default=None)
    token.add_argument(
        "--alias",
        action="append",
        default=[],
        help="a name channel bridges give this user (e.g. a Telegram handle); repeatable",
    )
    token.set_defaults(func=cmd_token)

    login = sub.add_parser(
        "login-link", help="print a one-time sign-in link for the page (valid for 10 minutes)"
    )
    login.add_argument("user_id")
    login.add_argument("--tz", default=None)
    login.add_argument("--url", default=None, help="the gateway's address (default: the running system's)")
    login.set_defaults(func=cmd_login_link)

    chat = sub.add_parser("chat", help="send one turn to a running gateway")
    chat.add_argument("message")
    chat.add_argument("--user", default=os.environ.get("USER", "demo") or "demo")
    chat.add_argument("--tz", default=None)
    chat.add_argument("--conversation", default=None)
    chat.add_argument("--active-command", default=None)
    chat.add_argument("--url", default=None)
    chat.add_argument("--json", action="store_true")
    chat.set_defaults(func=cmd_chat)

    for name, func in (("resolve", cmd_resolve), ("parse-reply", cmd_parse_reply)):
        p = sub.add_parser(name, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=func)


def _add_operating(sub: Subcommands) -> None:
    """What an operator reads of a running system: timeline, report, doctor, eval."""
    timeline = sub.add_parser("timeline", help="the segmented latency timeline of one turn")
    timeline.add_argument("turn_id")
    timeline.set_defaults(func=cmd_timeline)

    report = sub.add_parser("report", help="summary of recorded turns")
    report.add_argument("--candidates", action="store_true")
    report.add_argument("--cases", default=None, help="write candidate turns as an eval case skeleton file")
    report.add_argument("--json", action="store_true")
    report.add_argument("--usage", action="store_true", help="model tokens per day, user or model")
    report.add_argument("--by", choices=("day", "user", "model"), default="day", help="with --usage")
    report.add_argument("--days", type=int, default=7, help="with --usage: the last N days, today included")
    report.set_defaults(func=cmd_report)

    doctor = sub.add_parser("doctor", help="check what the configured model endpoint can do")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(func=cmd_doctor)

    evaluate = sub.add_parser("eval", help="route eval: offline (scripted model) or live (configured model)")
    evaluate.add_argument("mode", choices=("offline", "live"))
    evaluate.add_argument("--report", default=None)
    evaluate.add_argument("--group", default=None)
    evaluate.add_argument("--concurrency", type=int, default=4)
    evaluate.add_argument("--cases-dir", default=None)
    evaluate.add_argument(
        "--trials",
        type=int,
        default=1,
        help="run each case K times (no retries) and print pass^1 … pass^K per group",
    )
    evaluate.set_defaults(func=cmd_eval)


def _add_measuring(sub: Subcommands) -> None:
    """What prints numbers: bench and faults."""
    bench = sub.add_parser("bench", help="print benchmark numbers")
    bench.add_argument(
        "what",
        nargs="?",
        choices=("timeparse", "claims", "turns", "caldav", "plan", "all"),
        default="timeparse",
        help="timeparse (default): time service; claims: exit-check recall/false alarms; "
        "turns: the cost of a turn on the running system beside its floor; caldav: delivery latency "
        "after commit and inbound sync throughput; plan: placing tasks, greedy against CP-SAT, and "
        "re-plans; all: timeparse and claims",
    )
    bench.add_argument("--n", type=int, default=200, help="turns, caldav: sequential creates measured")
    bench.add_argument(
        "--budget", type=float, default=None, help="plan: solver budget in s (CALAGENT_PLAN_BUDGET_S)"
    )
    bench.add_argument("--inbound", type=int, default=500, help="caldav: events read back by one sync")
    bench.add_argument(
        "--calendars", type=int, default=10, help="caldav: calendars of the first-sync account"
    )
    bench.add_argument(
        "--per-calendar",
        type=int,
        default=500,
        help="caldav: events in each calendar of the first-sync account",
    )
    bench.add_argument("--clients", type=int, default=16, help="turns: concurrent clients for throughput")
    bench.add_argument("--seconds", type=float, default=10.0, help="turns: how long throughput runs")
    bench.add_argument("--in-flight", type=int, default=300, help="turns: concurrent turns at the slow model")
    bench.add_argument("--slow-ms", type=int, default=1500, help="turns: model latency for the in-flight run")
    bench.add_argument("--compare-ms", type=int, default=500, help="turns: model latency against pydantic-ai")
    bench.add_argument("--compare-n", type=int, default=20, help="turns: turns per side against pydantic-ai")
    bench.add_argument(
        "--stats-flush-s",
        type=float,
        default=None,
        help="turns: how long the path count waits for PostgreSQL's statistics (default: past its "
        "idle flush; shorter undercounts the transactions)",
    )
    bench.add_argument(
        "--nats-cluster",
        type=int,
        default=1,
        help="turns: run the bus as N nats-server nodes (streams replicated N ways)",
    )
    bench.add_argument(
        "--corpus",
        action="append",
        default=None,
        help="claims corpus .jsonl file or directory (repeatable); "
        "default: services/agent/tests/claims_corpus of the repository",
    )
    bench.add_argument("--json", action="store_true", help="claims: print the report as JSON")
    bench.set_defaults(func=cmd_bench)

    faults = sub.add_parser(
        "faults", help="kill every part of a running system under load and count what was lost"
    )
    faults.add_argument("--kills", type=int, default=210, help="faults to inject (SIGKILLs)")
    faults.add_argument("--clients", type=int, default=8, help="concurrent clients sending turns")
    faults.add_argument(
        "--gap", type=float, default=0.5, help="seconds between a recovery and the next fault"
    )
    faults.add_argument(
        "--supervisor-every", type=int, default=25, help="every Nth fault kills the supervisor (0: never)"
    )
    faults.add_argument(
        "--nats-cluster",
        type=int,
        default=1,
        metavar="N",
        help="run the bus as N nats-server nodes; each nats-server fault kills one node at random",
    )
    faults.add_argument("--json", action="store_true", help="print the report as JSON")
    faults.set_defaults(func=cmd_faults)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # These two hand their whole argument list to the time service's own parser, whose options
    # (`--date`, `--now`) argparse's REMAINDER would otherwise try to interpret.
    if argv and argv[0] == "resolve":
        return cmd_resolve(argparse.Namespace(rest=argv[1:]))
    if argv and argv[0] == "parse-reply":
        return cmd_parse_reply(argparse.Namespace(rest=argv[1:]))
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
