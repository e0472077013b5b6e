"""Database plumbing shared by the services that own tables: engines and Alembic migrations.

Every service owns one PostgreSQL schema (named after the service) with its own Alembic version
table inside it, so services can share a server without ever sharing tables.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import MetaData, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def make_engine(database_url: str, *, pool_size: int = 10) -> AsyncEngine:
    # No pre-ping: it costs a round trip on every checkout, i.e. on every unit of work. A connection
    # that died with its server fails its first statement instead; SQLAlchemy then invalidates the
    # pool, the failure surfaces as transient, and the caller retries with the same idempotency key.
    return create_async_engine(database_url, pool_size=pool_size, max_overflow=20, pool_pre_ping=False)


HEALTH_PROBE_TIMEOUT_S = 1.0


async def database_state(engine: AsyncEngine | None, timeout: float = HEALTH_PROBE_TIMEOUT_S) -> str:
    """ "ok" when the database answers a trivial query within `timeout`, else "down": what a health
    probe reports, so `/healthz` does not say ok while every turn is failing on the database."""
    if engine is None:
        return "down"
    try:
        async with asyncio.timeout(timeout), engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception:
        return "down"
    return "ok"


def alembic_config(database_url: str, migrations_dir: Path, schema: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir))
    cfg.attributes["database_url"] = database_url
    cfg.attributes["schema"] = schema
    return cfg


def upgrade(database_url: str, migrations_dir: Path, schema: str) -> None:
    """Bring one service's schema to head (synchronous: call from a thread inside an event loop)."""
    command.upgrade(alembic_config(database_url, migrations_dir, schema), "head")


async def upgrade_async(database_url: str, migrations_dir: Path, schema: str) -> None:
    await asyncio.to_thread(upgrade, database_url, migrations_dir, schema)


def run_env(config: Config, target_metadata: MetaData) -> None:
    """The body of every service's `env.py`: online migrations over asyncpg."""
    database_url: str = config.attributes["database_url"]
    schema: str = config.attributes["schema"]

    def do_run(connection: Connection) -> None:
        from alembic import context

        # Replicas of one service may start together: the advisory lock makes them migrate one
        # after the other, and the later ones find the schema already at head.
        connection.execute(
            text("SELECT pg_advisory_xact_lock(hashtext(:name))"), {"name": f"migrate:{schema}"}
        )
        connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            version_table_schema=schema,
            include_schemas=True,
        )
        with context.begin_transaction():
            context.run_migrations()

    async def run() -> None:
        engine = create_async_engine(database_url)
        try:
            async with engine.begin() as connection:
                await connection.run_sync(do_run)
        finally:
            await engine.dispose()

    asyncio.run(run())
