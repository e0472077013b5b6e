"""pytest plugin loaded by the project's `addopts`: session-wide real servers, per-module databases."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from calagent.devtools.testing.examples import examples
from calagent.devtools.testing.servers import Servers, provide_servers

# A property test that names no count of its own runs Hypothesis's 100, scaled like every other.
settings.register_profile("calagent", max_examples=examples(100))
settings.load_profile("calagent")


# A module's one tier, when it names it for all its tests (tests/architecture/test_tiers.py: a test
# has exactly one tier, so no test of such a module is of another).
_MODULE_TIER = re.compile(r"^pytestmark = pytest\.mark\.(\w+)$", re.MULTILINE)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `-m unit` (`make unit`), a test module of another tier is not even imported: its
    tests would all be deselected, and importing them (browsers, servers, the whole system) was a
    third of the unit tier's collection."""
    if config.option.markexpr != "unit" or not collection_path.name.startswith("test_"):
        return None
    if collection_path.suffix != ".py":
        return None
    tier = _MODULE_TIER.search(collection_path.read_text(encoding="utf-8"))
    return True if tier is not None and tier[1] != "unit" else None


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
