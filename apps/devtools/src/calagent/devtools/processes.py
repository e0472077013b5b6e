"""Servers we run as child processes, and the helpers they share: ports, private files, and one
way each to start, wait for and stop such a server.

A child is started in its own session (a Ctrl-C in the terminal reaches its supervisor, which stops
the services before the servers), and a parent-death signal stops it even when its parent is killed
outright, so nothing is left behind when `calagent up` or a test session ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import psutil

PR_SET_PDEATHSIG = 1


def parent_death_signal(sig: int) -> Callable[[], None]:
    """A `preexec_fn` that has the kernel send `sig` to the child when its parent dies, even by
    SIGKILL (Linux `prctl(PR_SET_PDEATHSIG)`). Runs after `subprocess` switched user, which would
    otherwise clear the setting."""

    def arm() -> None:
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, sig)

    return arm


def open_private_log(path: Path) -> IO[bytes]:
    """A log opened for appending, readable by its owner only (also when an older run left it 0644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def process_of(pid: int, *markers: str) -> psutil.Process | None:
    """The live (not zombie) process `pid` when its command line holds every marker, else None."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        argv = " ".join(proc.cmdline())
    except (psutil.Error, ValueError):
        return None
    return proc if all(marker in argv for marker in markers) else None


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE  # exited; reaping is its parent's business
    except psutil.Error:
        return True


def stop_process(proc: psutil.Process, sig: int, timeout: float = 20.0) -> None:
    """Signal a process that is not our child and wait until it exits (SIGKILL after `timeout`)."""
    with contextlib.suppress(psutil.Error):
        proc.send_signal(sig)
    deadline = time.monotonic() + timeout
    killed = False
    while not _gone(proc):
        if time.monotonic() > deadline:
            if killed:
                raise RuntimeError(f"pid {proc.pid} did not exit even after SIGKILL")
            with contextlib.suppress(psutil.Error):
                proc.kill()
            killed = True
            deadline = time.monotonic() + 5
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stable_port(marker: Path) -> int:
    """The port recorded in `marker` when it is free, else a fresh one (recorded): a server keeps
    its address across restarts of one data dir, so whatever was told it (clients, cluster peers)
    finds it again."""
    if marker.exists():
        with contextlib.suppress(ValueError):
            port = int(marker.read_text())
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) != 0:
                    return port
    port = free_port()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(port))
    return port


def wait_for_port(
    port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None, host: str = "127.0.0.1"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with status {proc.returncode} before listening on {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.2)
            if sock.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on {host}:{port} within {timeout}s")


def stop_child(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
    """Signal our child and wait until it exits (SIGKILL after `timeout`)."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def spawn_child(
    argv: Sequence[str],
    log_path: Path,
    *,
    death_signal: int | None = None,
    user: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start a server in its own session, its output appended to a private log; returns at once.
    With `death_signal`, the kernel sends it that signal when we die, even by SIGKILL."""
    with open_private_log(log_path) as logfile:
        return subprocess.Popen(
            list(argv),
            stdout=logfile,
            stderr=subprocess.STDOUT,
            user=user,
            start_new_session=True,
            preexec_fn=None if death_signal is None else parent_death_signal(death_signal),
        )


class ChildServer:
    """A server run as our child process: `proc` while it runs, stopped by `stop_signal`."""

    # What makes the server shut down cleanly, and how long that may take before SIGKILL.
    stop_signal: int = signal.SIGTERM
    stop_timeout: float = 15.0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            stop_child(self.proc, self.stop_signal, self.stop_timeout)
            self.proc = None
