"""The system with connected calendars switched on, as the CalDAV tests start it: a data folder and
a credentials key of its own, deliveries woken at commit, and the test servers' loopback addresses
allowed (the CalDAV guard refuses them unless told)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from cryptography.fernet import Fernet

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.radicale import EmbeddedRadicale
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

ALLOW_NETWORKS = "CALAGENT_CALDAV_ALLOW_NETWORKS"


@contextmanager
def radicale_server(
    *,
    host: str = "127.0.0.1",
    rights: str | None = None,
    prefix: str = "calagent-radicale-",
    sharing: bool = False,
) -> Iterator[EmbeddedRadicale]:
    """A Radicale with no users yet (tests add their own), in a folder that goes with it;
    `sharing`: its users may share calendars with each other (`share_calendar`)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        server = EmbeddedRadicale(Path(tmp), {}, rights=rights, host=host, sharing=sharing)
        server.start()
        yield server
        server.stop()


@asynccontextmanager
async def caldav_stack(
    servers: Servers,
    database_url: str,
    scripted: ScriptedModelServer,
    *,
    allow_networks: str,
    export_allow_networks: bool = False,
    settings_overrides: Mapping[str, object] | None = None,
) -> AsyncIterator[Stack]:
    """`allow_networks` goes into the stack's settings; `export_allow_networks` also puts it into
    this process's environment while the stack runs, for the parts a test builds in-process from
    the environment."""
    exported = {ALLOW_NETWORKS: allow_networks} if export_allow_networks else {}
    saved = {k: os.environ.get(k) for k in exported}
    os.environ.update(exported)
    try:
        with tempfile.TemporaryDirectory(prefix="calagent-data-") as data_dir:
            system = await start_stack(
                nats_url=servers.nats_url,
                nats_url_for=servers.nats_url_for,
                database_url=database_url,
                model_base_url=scripted.base_url,
                settings_overrides={
                    "CALAGENT_DATA_DIR": data_dir,
                    "CALAGENT_CREDENTIALS_KEY": Fernet.generate_key().decode(),
                    # Deliveries are woken at commit; the sweep only retries. Inbound sync is asked
                    # for by the tests that need it, so a test decides when the server is read.
                    "CALAGENT_CALDAV_SWEEP_S": 0.2,
                    "CALAGENT_CALDAV_SYNC_S": 3600,
                    ALLOW_NETWORKS: allow_networks,
                    **(settings_overrides or {}),
                },
            )
            yield system
            await system.stop()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
