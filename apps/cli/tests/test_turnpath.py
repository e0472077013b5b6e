"""The path counter's classes: every message the bus routes for a turn falls in a stable class."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg

from calagent.cli.turnpath import PathCount, subject_class

pytestmark = pytest.mark.unit


def msg(subject: str, reply: str = "") -> Msg:
    return Msg(_client=None, subject=subject, reply=reply)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("_INBOX.abc.1", "reply"),
        ("$JS.ACK.CALAGENT_TURNS.agent.1.5.5.1700000000.0", "jetstream ack"),
        ("$JS.API.CONSUMER.MSG.NEXT.CALAGENT_TURNS.agent", "jetstream api consumer"),
        ("$KV.calagent_gateway_quotas.u1", "kv calagent_gateway_quotas"),
        ("calagent.turn.events.0123abcd", "calagent.turn.events"),
        ("calagent.turn.requested", "calagent.turn.requested"),
        ("calagent.caldav.outbox.5f3a", "calagent.caldav.outbox"),
        ("calagent.command.execute", "calagent.command.execute"),
    ],
)
def test_subjects_fall_in_stable_classes(subject: str, expected: str) -> None:
    assert subject_class(msg(subject)) == expected


def test_per_turn_figures_divide_by_the_turns_and_drop_the_rare() -> None:
    count = PathCount(turns=4)
    count.messages.update({"calagent.command.execute": 4, "reply": 12, "$JS.EVENT.ADVISORY": 0})
    count.requests = 8
    assert count.messages_per_turn == 4.0
    assert count.round_trips_per_turn == 2.0
    assert count.by_class() == {"calagent.command.execute": 1.0, "reply": 3.0}
