"""`calagent up --caldav-demo`: a local CalDAV server whose printed login works, and stays the same."""

from __future__ import annotations

import re
from pathlib import Path

import caldav
import pytest

from calagent.cli.caldavdemo import start_demo

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
