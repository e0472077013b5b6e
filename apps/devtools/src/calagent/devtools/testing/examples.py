"""How many examples a property test runs: its own count, times `CALAGENT_EXAMPLES_SCALE`.

The scale is 1 unless set: `make test` runs every count as written. `make unit`, the inner loop,
runs a fifth of each (at least one): the same properties, fewer generated cases, so the unit tier
answers in under a minute; the long runs (`make fidelity`) raise a count with their own variable.
"""

from __future__ import annotations

import os


def examples(count: int) -> int:
    scale = float(os.environ.get("CALAGENT_EXAMPLES_SCALE", "1"))
    return max(1, round(count * scale))
