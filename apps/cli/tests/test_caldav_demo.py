"""`calagent up --caldav-demo`: a local CalDAV server whose printed login works, and stays the same."""

from __future__ import annotations

import re
from pathlib import Path

import caldav
import pytest

from calagent.cli.caldavdemo import start_demo
from calagent.cli.up import Supervisor
from calagent.commands.caldav import remote
from calagent.commands.caldav.addresses import AddressRule, Guard
from calagent.runtime.settings import Settings

pytestmark = pytest.mark.integration


def test_the_printed_demo_login_opens_a_calendar_and_survives_a_restart(tmp_path: Path) -> None:
    server, note = start_demo(tmp_path)
    try:
        match = re.search(r"caldav demo (\S+) user (\S+) password (\S+)", note)
        assert match is not None
        url, user, password = match.groups()
        with caldav.DAVClient(url=url, username=user, password=password) as client:
            names = [c.get_display_name() for c in client.principal().calendars()]
        assert names == ["Demo"]
    finally:
        server.stop()
    again, second = start_demo(tmp_path)
    try:
        # The same login (the port too, unless another process took it meanwhile).
        rematch = re.search(r"caldav demo (\S+) user (\S+) password (\S+)", second)
        assert rematch is not None
        assert rematch.group(2, 3) == (user, password)
        with caldav.DAVClient(url=rematch.group(1), username=user, password=password) as client:
            assert len(client.principal().calendars()) == 1
    finally:
        again.stop()


def test_the_demo_server_is_reachable_through_the_guard_only_with_its_own_address_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _note = start_demo(tmp_path)
    try:
        login = ("demo", (tmp_path / "caldav" / "demo-password").read_text().strip())
        allowed = Guard(AddressRule.from_setting(server.network))
        found = remote.discover(remote.Login(server.user_url("demo"), *login, allowed))
        assert [c.name for c in found] == ["Demo"]
        with pytest.raises(remote.NotAllowed):
            remote.discover(remote.Login(server.user_url("demo"), *login, Guard(AddressRule())))
        # What `up --caldav-demo` gives the services it starts: the operator's networks and the
        # demo server's address.
        monkeypatch.setenv("CALAGENT_CALDAV_ALLOW_NETWORKS", "192.168.1.0/24")
        settings = Settings(CALAGENT_DATA_DIR=tmp_path, CALAGENT_AUTH_SECRET="x" * 40)
        supervisor = Supervisor(settings=settings, port=0, scale={}, caldav_networks=(server.network,))
        env = supervisor._child_env("nats://127.0.0.1:1", "postgresql://127.0.0.1:1/x", None, "x" * 40)
        assert env["CALAGENT_CALDAV_ALLOW_NETWORKS"] == f"192.168.1.0/24,{server.network}"
    finally:
        server.stop()
