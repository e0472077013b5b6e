"""Which calendar an event goes to: the model picks a name, code checks it against the user's list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


def pick_calendar(requested: str | None, calendars: Sequence[str]) -> tuple[str, str | None]:
    """(calendar used, the requested name when it was not in the list and the default was used).

    Omitting the field is not a vote for the default, and is not reported as a fallback either.
    """
    default = calendars[0]
    if requested is None or not requested.strip():
        return default, None
    wanted = requested.strip()
    if wanted in calendars:
        return wanted, None
    folded = {name.casefold(): name for name in calendars}
    if wanted.casefold() in folded:
        return folded[wanted.casefold()], None
    return default, requested


@dataclass(frozen=True)
class NewCalendars:
    """The calendars a new user starts with, named in the language of the request that makes
    them: one rule for every path that may be a user's first (a read, a write, a connection)."""

    fallback: tuple[str, ...]
    by_lang: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def named_for(self, lang: str | None) -> tuple[str, ...]:
        return self.by_lang.get(lang or "", self.fallback)

    def is_default_name(self, name: str) -> bool:
        """Whether a name is one a new user may have started with, in any language."""
        return name in self.fallback or any(name in names for names in self.by_lang.values())
