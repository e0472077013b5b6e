"""`calagent up --caldav-demo`: a local CalDAV server (Radicale) with a demo account, next to the
system, so a person can point Apple Calendar or Thunderbird at it and connect the same account to
the assistant (`POST /v1/accounts/caldav`) to watch both sides sync.

Its data and the demo password live in the data dir (the password file 0600), so the address and
login stay the same from one run to the next.
"""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

from calagent.devtools.radicale import EmbeddedRadicale, make_calendar

DEMO_USER = "demo"
DEMO_PORT = 5232  # Radicale's usual port, when it is free


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def start_demo(data_dir: Path) -> tuple[EmbeddedRadicale, str]:
    """The running server and the lines that tell a person how to use it."""
    root = data_dir.resolve() / "caldav"
    root.mkdir(parents=True, exist_ok=True)
    secret_file = root / "demo-password"
    if not secret_file.exists():
        secret_file.write_text(secrets.token_urlsafe(12))
        secret_file.chmod(0o600)
    password = secret_file.read_text().strip()
    server = EmbeddedRadicale(root, {DEMO_USER: password}, port=DEMO_PORT if _port_free(DEMO_PORT) else None)
    server.start()
    made = root / "calendar-made"
    if not made.exists():
        make_calendar(server.url, DEMO_USER, password, "Demo")
        made.write_text("Demo\n")
    url = server.user_url(DEMO_USER)
    note = (
        f"caldav demo {url} user {DEMO_USER} password {password}\n"
        f"  connect it: POST /v1/accounts/caldav "
        f'{{"url": "{url}", "username": "{DEMO_USER}", "password": "{password}"}}'
    )
    return server, note
