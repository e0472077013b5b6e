"""What an e-mail address is, as people write one (contacts, attendees, a user's settings)."""

from __future__ import annotations

import re
from typing import Final

EMAIL_MAX: Final = 254
# One @, no spaces, a dot in the domain. Anything else is a name.
_ADDRESS = re.compile(r"^[^@\s<>()\[\],;:\"]+@[^@\s<>()\[\],;:\"]+\.[^@\s<>()\[\],;:\".]+$")


def is_address(value: str) -> bool:
    return _ADDRESS.match(value.strip().removeprefix("mailto:")) is not None
