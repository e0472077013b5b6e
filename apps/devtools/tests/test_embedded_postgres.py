"""The embedded PostgreSQL: a password for every connection, private files, recovery from `kill -9`."""

from __future__ import annotations

import asyncio
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import psutil
import pytest

from calagent.devtools.postgres import PG_USER, EmbeddedPostgres, _pg_bin
from calagent.devtools.processes import private_dir, wait_for_port

pytestmark = pytest.mark.integration


def _connect(url: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(url, timeout=10)
        try:
            assert await conn.fetchval("select 1") == 1
        finally:
            await conn.close()

    asyncio.run(run())


def _without_password(pg: EmbeddedPostgres) -> str:
    return f"postgresql://{PG_USER}@127.0.0.1:{pg.port}/postgres"


@pytest.fixture
def stopped_after() -> Iterator[list[EmbeddedPostgres]]:
    servers: list[EmbeddedPostgres] = []
    yield servers
    for server in servers:
        server.stop()


def test_every_connection_needs_the_password_and_the_files_are_the_owners(
    tmp_path: Path, stopped_after: list[EmbeddedPostgres]
) -> None:
    pg = EmbeddedPostgres(tmp_path / "pg")
    stopped_after.append(pg)
    pg.start()
    _connect(pg.admin_url)
    with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
        _connect(_without_password(pg))
    with pytest.raises(asyncpg.InvalidPasswordError):
        _connect(pg.admin_url.replace(pg.password, "guessed"))

    assert pg.password_file.stat().st_mode & 0o777 == 0o600
    assert (pg.data_dir / "postgres.log").stat().st_mode & 0o777 == 0o600
    assert pg.pgdata.stat().st_mode & 0o777 == 0o700
    socket_file = pg.pgdata / f".s.PGSQL.{pg.port}"
    assert stat.S_ISSOCK(socket_file.stat().st_mode)
    assert socket_file.stat().st_mode & 0o077 == 0  # no one but the server's user connects locally
    hba = (pg.pgdata / "pg_hba.conf").read_text()
    assert "trust" not in [line.split()[-1] for line in hba.splitlines() if line.strip() and line[0] != "#"]


def _controldata_id(pg: EmbeddedPostgres) -> str:
    out = subprocess.run(
        [_pg_bin("pg_controldata"), "-D", str(pg.pgdata)],
        check=True,
        capture_output=True,
        text=True,
        user=pg.user,
    ).stdout
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if "system identifier" in line)


def test_a_data_dir_that_trusted_every_connection_is_upgraded_in_place(
    tmp_path: Path, stopped_after: list[EmbeddedPostgres]
) -> None:
    # What earlier versions created: trust authentication, no password at all.
    pg = EmbeddedPostgres(tmp_path / "pg")
    private_dir(pg.data_dir)
    if pg.user:
        from calagent.devtools.postgres import _chown_tree, _open_installation, _open_path_to

        _open_path_to(pg.data_dir)
        _chown_tree(pg.data_dir, pg.user)
        _open_installation()
    pg._run(
        [_pg_bin("initdb"), "-D", str(pg.pgdata), "-U", PG_USER, "--auth=trust", "--locale=C", "--no-sync"]
    )
    cluster = _controldata_id(pg)

    stopped_after.append(pg)
    pg.start()
    assert _controldata_id(pg) == cluster  # the same cluster, not a new one
    _connect(pg.url.replace("postgresql+asyncpg://", "postgresql://"))
    with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
        _connect(_without_password(pg))


def test_after_kill_9_stale_lock_files_whose_pid_is_now_someone_else_do_not_block_a_restart(
    tmp_path: Path, stopped_after: list[EmbeddedPostgres]
) -> None:
    pg = EmbeddedPostgres(tmp_path / "pg")
    stopped_after.append(pg)
    pg.start()
    assert pg.proc is not None
    pg.proc.kill()
    pg.proc.wait()
    # The dead server's pid, reused by an unrelated live process: PostgreSQL alone would refuse
    # to start ("lock file already exists"), and so did the earlier check (the pid is alive).
    unrelated = subprocess.Popen(["sleep", "60"])
    try:
        for lock in (pg.pgdata / "postmaster.pid", pg.pgdata / f".s.PGSQL.{pg.port}.lock"):
            assert lock.exists()
            lines = lock.read_text().splitlines()
            lock.write_text("\n".join([str(unrelated.pid), *lines[1:]]) + "\n")

        again = EmbeddedPostgres(tmp_path / "pg", port=pg.port)
        stopped_after.append(again)
        again.start(timeout=10)
        _connect(again.admin_url)
    finally:
        unrelated.kill()
        unrelated.wait()


def test_a_live_server_of_the_same_data_dir_is_never_taken_for_stale(
    tmp_path: Path, stopped_after: list[EmbeddedPostgres]
) -> None:
    pg = EmbeddedPostgres(tmp_path / "pg")
    stopped_after.append(pg)
    pg.start()
    with pytest.raises(RuntimeError, match="already runs"):
        EmbeddedPostgres(tmp_path / "pg").spawn()
    assert pg.proc is not None and psutil.pid_exists(pg.proc.pid)
    wait_for_port(pg.port, 5)
    _connect(pg.admin_url)
