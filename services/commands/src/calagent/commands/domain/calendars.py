"""Which calendar an event goes to: the model picks a name, code checks it against the user's list."""

from __future__ import annotations

from collections.abc import Sequence


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
