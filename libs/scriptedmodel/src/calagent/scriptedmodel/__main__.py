"""`python -m calagent.scriptedmodel [--port P] [--script FILE]`."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from calagent.scriptedmodel.demo import demo_script
from calagent.scriptedmodel.runner import ScriptedModelServer
from calagent.scriptedmodel.script import Script
from calagent.scriptedmodel.state import DEFAULT_MODEL_NAME


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m calagent.scriptedmodel",
        description="Serve an OpenAI-compatible chat-completions endpoint answered from a rule script.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", help="a YAML or JSON script; default: the built-in demo script")
    parser.add_argument("--model-name", default=DEFAULT_MODEL_NAME, help="the id listed by /v1/models")
    args = parser.parse_args(argv)

    script = Script.from_file(args.script) if args.script else demo_script()
    server = ScriptedModelServer(script, host=args.host, port=args.port, model_name=args.model_name)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        base_url = server.start()
        print(f"scripted model listening {base_url}", flush=True)
        while not stop.wait(0.5):
            if not server.running:
                print("scripted model stopped unexpectedly", file=sys.stderr, flush=True)
                return 1
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
