"""Settings refuse what would fail later, at every request, instead of at start."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from calagent.runtime.settings import DEV_AUTH_SECRET, Settings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("secret", ["", "   "])
def test_a_blank_auth_secret_is_refused_at_start(secret: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALAGENT_AUTH_SECRET", secret)
    with pytest.raises(ValidationError, match="CALAGENT_AUTH_SECRET"):
        Settings()


def test_an_unset_secret_is_the_development_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CALAGENT_AUTH_SECRET", raising=False)
    assert Settings().auth_secret == DEV_AUTH_SECRET
