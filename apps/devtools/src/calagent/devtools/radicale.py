"""A CalDAV server from a pip package (Radicale), for tests and `calagent up --caldav-demo`.

It runs as a child process we own, like the embedded NATS and PostgreSQL: htpasswd accounts
(plain passwords: the server is local and its users are made up), each user may reach only
their own collections, and a stop leaves nothing behind but its data folder.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from calagent.devtools.processes import ChildServer, free_port, spawn_child, wait_for_port

log = logging.getLogger("calagent.radicale")


class EmbeddedRadicale(ChildServer):
    def __init__(
        self,
        data_dir: Path,
        users: dict[str, str],
        port: int | None = None,
        rights: str | None = None,
        host: str = "127.0.0.1",
        sharing: bool = False,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.users = dict(users)
        # Radicale's `from_file` rights (first matching section wins); None: each user owns their
        # own collections and nothing else.
        self.rights = rights
        # Any loopback address (Linux routes all of 127/8 to lo): tests run servers on distinct ones.
        self.host = host
        # Radicale's sharing by map (3.6+): a user's collection shown inside another user's home,
        # the way hosted servers show a calendar shared with you (`share_calendar`).
        self.sharing = sharing
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def network(self) -> str:
        """The one address this server listens on, as a network for an allow-list."""
        return f"{self.host}/32"

    def user_url(self, user: str) -> str:
        return f"{self.url}{user}/"

    def start(self, timeout: float = 20.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        htpasswd = self.data_dir / "users"
        htpasswd.write_text("".join(f"{name}:{password}\n" for name, password in self.users.items()))
        htpasswd.chmod(0o600)
        rights = ["--rights-type", "owner_only"]
        if self.rights is not None:
            rights_file = self.data_dir / "rights"
            rights_file.write_text(self.rights)
            rights = ["--rights-type", "from_file", "--rights-file", str(rights_file)]
        sharing = []
        if self.sharing:
            sharing = [
                "--sharing-type",
                "csv",
                "--sharing-database-path",
                str(self.data_dir / "shares.csv"),
                "--sharing-collection-by-map",
                "true",
                "--sharing-permit-create-map",
                "true",
            ]
        self.proc = spawn_child(
            [
                sys.executable,
                "-m",
                "radicale",
                "--server-hosts",
                f"{self.host}:{self.port}",
                "--storage-filesystem-folder",
                str(self.data_dir / "collections"),
                "--auth-type",
                "htpasswd",
                "--auth-htpasswd-filename",
                str(htpasswd),
                "--auth-htpasswd-encryption",
                "plain",
                # A refused password is answered at once: tests try wrong ones on purpose.
                "--auth-delay",
                "0",
                *rights,
                *sharing,
            ],
            self.data_dir / "radicale.log",
        )
        wait_for_port(self.port, timeout, self.proc, self.host)
        log.info("radicale listening on %s (data in %s)", self.url, self.data_dir)
        return self.url

    def add_user(self, name: str, password: str) -> None:
        """A new login, usable at once (the htpasswd file is read on every login)."""
        self.users[name] = password
        with (self.data_dir / "users").open("a") as handle:
            handle.write(f"{name}:{password}\n")


def make_calendar(
    url: str, user: str, password: str, name: str, color: str | None = None, cal_id: str | None = None
) -> str:
    """Create a calendar collection for `user` (Radicale makes none by itself); its URL."""
    import caldav

    with caldav.DAVClient(url=url, username=user, password=password) as client:
        calendar = client.principal().make_calendar(name=name, cal_id=cal_id)
        if color:
            from caldav.elements import ical

            calendar.set_properties([ical.CalendarColor(color)])
        return str(calendar.url)


def share_calendar(
    url: str, owner: tuple[str, str], calendar_path: str, sharee: tuple[str, str], name: str
) -> str:
    """Share `owner`'s calendar (its path, "/alice/work/") read-only with `sharee`, shown in the
    sharee's home as `name` (a server started with `sharing=True`); the URL the sharee sees it at.
    Both sides agree through Radicale's sharing API: the owner offers, the sharee enables it."""
    import httpx

    mapped = f"/{sharee[0]}/{name}/"
    offer = {
        "PathMapped": calendar_path,
        "PathOrToken": mapped,
        "User": sharee[0],
        "Permissions": "r",
        "Enabled": True,
        "Hidden": False,
    }
    with httpx.Client(base_url=url, timeout=10, headers={"Accept": "application/json"}) as client:
        made = client.post("/.sharing/v1/map/create", auth=owner, json=offer)
        assert made.status_code == 200, made.text
        for action in ("enable", "unhide"):
            taken = client.post(f"/.sharing/v1/map/{action}", auth=sharee, json={"PathOrToken": mapped})
            assert taken.status_code == 200, taken.text
    return f"{url.rstrip('/')}{mapped}"
