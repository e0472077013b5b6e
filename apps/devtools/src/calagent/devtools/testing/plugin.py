"""pytest plugin loaded by the project's `addopts`: session-wide real servers, per-module databases."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from calagent.devtools.testing.servers import Servers, provide_servers


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    with provide_servers() as provided:
        yield provided


@pytest.fixture(scope="session")
def nats_url(servers: Servers) -> str:
    return servers.nats_url


@pytest.fixture(scope="module")
def database_url(servers: Servers) -> str:
    """An empty database of its own for each test module."""
    return servers.create_database()
