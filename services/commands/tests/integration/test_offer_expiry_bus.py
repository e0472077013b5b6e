"""How long an offer from outside stays answerable is one rule (`PendingCommand.answerable_until`),
not each caller's: an invitation offered at once ends at its event's start, as one that waited
behind the user's own request always did. Real NATS and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from .conftest import NOW, System
from .test_after_write_bus import invited
from .test_commands_bus import merge

pytestmark = pytest.mark.integration


async def test_an_invitation_offered_at_once_is_not_answerable_past_its_events_start(
    system: System, user: str
) -> None:
    starts = NOW + timedelta(hours=3)
    offered = await invited(system, user, starts)
    deadline = await system.scalar("SELECT expires_at FROM commands.stubs WHERE id = :i", i=offered)
    assert deadline == starts  # not the week mail gets to be read in: the meeting is over by then
    system.clock.set(starts + timedelta(minutes=30))
    late = await system.execute(merge(user, offered, confirm=True))
    assert late.status == "expired" and not late.persisted, late
    assert await system.scalar("SELECT count(*) FROM commands.events WHERE user_id = :u", u=user) == 0
