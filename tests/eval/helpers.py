from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

from calagent.cli.evaluate import run_eval


def run_eval_in_thread(
    mode: str,
    report: Path,
    *,
    concurrency: int = 1,
    cases_dir: str | None = None,
    group: str | None = None,
    trials: int = 1,
) -> tuple[int, str, dict[str, Any]]:
    """The CLI's own entry, on a thread of its own so its event loop never meets the test's."""
    out = io.StringIO()
    box: dict[str, int] = {}

    def target() -> None:
        box["code"] = run_eval(mode, str(report), group, concurrency, cases_dir, out=out, trials=trials)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    data: dict[str, Any] = json.loads(report.read_text()) if report.exists() else {}
    return box["code"], out.getvalue(), data
