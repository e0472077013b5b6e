"""What the recorder needs from storage; the SQL repository and the test fake both provide it."""

from __future__ import annotations

from datetime import date, datetime
from typing import Protocol

from calagent.contracts.evalrec import Timeline
from calagent.contracts.turns import TurnRecord
from calagent.evalrec.domain.report import TurnFacts
from calagent.evalrec.domain.usage import UsageFact


class TurnRepository(Protocol):
    async def save_turn(self, record: TurnRecord, recorded_at: datetime) -> bool: ...

    async def timeline(self, turn_id: str, user_id: str | None = None) -> Timeline | None: ...

    async def recent_turns(self, max_turns: int) -> list[TurnFacts]: ...

    async def usage(self, since: date, user_id: str | None) -> list[UsageFact]: ...
