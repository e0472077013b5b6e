"""Settings refuse what would fail later, or be forgeable, at start instead of at every request."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from calagent.runtime.settings import AUTH_SECRET_FILE, Settings

pytestmark = pytest.mark.unit

LONG_ENOUGH = "x" * 32


@pytest.fixture(autouse=True)
def _no_secret_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CALAGENT_AUTH_SECRET", raising=False)
    monkeypatch.setenv("CALAGENT_DATA_DIR", str(tmp_path))


@pytest.mark.parametrize("secret", ["", "   ", "short-but-not-empty", "x" * 31])
def test_a_blank_or_short_auth_secret_is_refused_at_start(
    secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALAGENT_AUTH_SECRET", secret)
    with pytest.raises(ValidationError, match=r"CALAGENT_AUTH_SECRET .*at least 32 characters"):
        Settings()


def test_a_secret_of_32_characters_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALAGENT_AUTH_SECRET", LONG_ENOUGH)
    assert Settings().require_auth_secret() == LONG_ENOUGH


def test_an_unset_secret_with_no_secret_file_is_refused_with_how_to_fix_it() -> None:
    settings = Settings()
    assert settings.auth_secret is None
    with pytest.raises(RuntimeError, match=r"CALAGENT_AUTH_SECRET is unset .*calagent up"):
        settings.require_auth_secret()


def test_an_unset_secret_is_read_from_the_data_dir(tmp_path: Path) -> None:
    (tmp_path / AUTH_SECRET_FILE).write_text("y" * 40 + "\n")
    assert Settings().require_auth_secret() == "y" * 40


def test_a_short_secret_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / AUTH_SECRET_FILE).write_text("tiny")
    with pytest.raises(ValidationError, match="at least 32 characters"):
        Settings()


def test_the_environment_wins_over_the_secret_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / AUTH_SECRET_FILE).write_text("y" * 40)
    monkeypatch.setenv("CALAGENT_AUTH_SECRET", LONG_ENOUGH)
    assert Settings().require_auth_secret() == LONG_ENOUGH
