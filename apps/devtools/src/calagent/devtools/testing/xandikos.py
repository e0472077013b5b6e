"""A second CalDAV server for the tests (Xandikos, from pip), beside Radicale: a round trip that
holds on two implementations holds on the protocol, not on one server's habits.

Xandikos serves one principal and no login over plain HTTP (any user name and password are let
in), so a test that wants a calendar of its own starts a server of its own in a fresh directory.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

from calagent.devtools.processes import ChildServer, free_port, spawn_child, wait_for_port

log = logging.getLogger("calagent.testing")

PRINCIPAL = "/user/"
# What `--defaults` makes: the principal's calendar home and one calendar in it.
CALENDAR = "/user/calendars/calendar/"


class EmbeddedXandikos(ChildServer):
    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{PRINCIPAL}"

    @property
    def calendar_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALENDAR}"

    def start(self, timeout: float = 30.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        executable = shutil.which("xandikos", path=str(Path(sys.executable).parent))
        command = [executable] if executable else [sys.executable, "-m", "xandikos"]
        self.proc = spawn_child(
            [
                *command,
                "serve",
                "--defaults",
                "--no-detect-systemd",
                "-d",
                str(self.data_dir / "collections"),
                "--state-dir",
                str(self.data_dir / "state"),
                "-l",
                "127.0.0.1",
                "-p",
                str(self.port),
            ],
            self.data_dir / "xandikos.log",
        )
        wait_for_port(self.port, timeout, self.proc)
        log.info("xandikos listening on %s (data in %s)", self.url, self.data_dir)
        return self.url
