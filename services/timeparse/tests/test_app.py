"""The time service's handlers, called directly (the bus around them is tested in libs/runtime)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from calagent.contracts.time import ParsedReply, ParseReplyRequest, SlotPatch
from calagent.runtime.clock import FrozenClock
from calagent.runtime.settings import load_settings
from calagent.timeparse.app import create_app

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "patch", "complete"),
    [
        ("周日下午2点", {"weekday": 7, "time": "14:00"}, True),
        ("3点一刻", {"ambiguous_time": "03:15"}, True),
        ("删除明天下午四点的会", {"date": "D+1", "time": "16:00"}, False),
        ("不用换，直接创建", {}, False),
    ],
)
async def test_parse_reply_answers_with_the_patch_and_whether_it_is_the_whole_message(
    text: str, patch: dict[str, object], complete: bool
) -> None:
    service = create_app(load_settings(), FrozenClock(datetime(2026, 9, 24, 2, tzinfo=UTC)))
    reply = await service.on_parse_reply(ParseReplyRequest(text=text), {})
    assert isinstance(reply, ParsedReply)
    assert reply.patch.model_dump(exclude_none=True) == patch
    assert reply.complete is complete
    # What goes over the wire reads back as the same ParsedReply, and never as a bare SlotPatch.
    wire = reply.model_dump_json()
    assert ParsedReply.model_validate_json(wire) == reply
    with pytest.raises(ValueError, match="extra"):
        SlotPatch.model_validate_json(wire)
