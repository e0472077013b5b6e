"""The time service's handlers, called directly (the bus around them is tested in libs/runtime)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from calagent.contracts.time import ParsedReply, ParseReplyRequest, ResolveRequest, SlotPatch
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
    reply = await service.on_parse_reply(ParseReplyRequest(text=text))
    assert isinstance(reply, ParsedReply)
    assert reply.patch.model_dump(exclude_none=True) == patch
    assert reply.complete is complete
    # What goes over the wire reads back as the same ParsedReply, and never as a bare SlotPatch.
    wire = reply.model_dump_json()
    assert ParsedReply.model_validate_json(wire) == reply
    with pytest.raises(ValueError, match="extra"):
        SlotPatch.model_validate_json(wire)


async def test_parse_reply_reads_a_day_of_the_month_with_now_and_tz_and_reports_the_marker() -> None:
    service = create_app(load_settings(), FrozenClock(datetime(2026, 9, 24, 2, tzinfo=UTC)))
    now = datetime.fromisoformat("2026-09-24T10:00:00+08:00")
    dated = await service.on_parse_reply(ParseReplyRequest(text="12号下午3点", now=now, tz="Asia/Shanghai"))
    assert dated.patch.model_dump(exclude_none=True) == {"date": "2026-10-12", "time": "15:00"}
    assert dated.complete is True
    assert dated.recurrence_marker is None
    # Without now/tz (an older caller): the same text is not a date, so nothing to merge.
    bare = await service.on_parse_reply(ParseReplyRequest(text="12号下午3点"))
    assert bare.patch.is_empty()
    assert bare.complete is False
    series = await service.on_parse_reply(ParseReplyRequest(text="以后每周三下午3点都开这个会"))
    assert series.recurrence_marker == "每周三"
    assert series.patch.is_empty()
    assert ParsedReply.model_validate_json(series.model_dump_json()) == series


async def test_resolve_reports_the_marker_of_the_words_that_ask_for_the_write() -> None:
    service = create_app(load_settings(), FrozenClock(datetime(2026, 9, 24, 2, tzinfo=UTC)))
    now = datetime.fromisoformat("2026-09-24T10:00:00+08:00")
    symbols = {"date": "W1+1", "time": "10:00", "now": now, "tz": "Asia/Shanghai"}
    weekly = await service.on_resolve(ResolveRequest(**symbols, words="> 明天下午三点\n每周一上午十点开会"))
    assert weekly.recurrence_marker == "每周一"
    assert weekly.start == datetime.fromisoformat("2026-09-28T10:00:00+08:00")
    once = await service.on_resolve(ResolveRequest(**symbols, words="下周一上午十点开会"))
    assert once.recurrence_marker is None
    # A quoted line is not the user's words; without words there is nothing to read.
    quoted = await service.on_resolve(ResolveRequest(**symbols, words="> 每周一开会\n下周一上午十点开会"))
    assert quoted.recurrence_marker is None
    bare = await service.on_resolve(ResolveRequest(**symbols))
    assert bare.recurrence_marker is None
    assert bare.start == weekly.start


def test_parse_reply_request_now_and_tz_are_optional_on_the_wire() -> None:
    assert ParseReplyRequest.model_validate_json('{"text": "12号"}') == ParseReplyRequest(text="12号")
    request = ParseReplyRequest.model_validate_json(
        '{"text": "12号", "now": "2026-09-24T10:00:00+08:00", "tz": "Asia/Shanghai"}'
    )
    assert request.tz == "Asia/Shanghai"
    assert request.now == datetime(2026, 9, 24, 2, tzinfo=UTC)
    # An older ParsedReply without the marker still reads (the field defaults to None).
    old = ParsedReply.model_validate_json('{"patch": {}, "complete": false}')
    assert old.recurrence_marker is None


async def test_the_wired_endpoints_answer_over_the_bus() -> None:

    from calagent.contracts import wire
    from calagent.contracts.time import ResolveRequest
    from calagent.runtime.bus import Bus, BusRequestError

    service = create_app(load_settings(), FrozenClock(datetime(2026, 9, 24, 2, tzinfo=UTC)))
    bus = Bus("nats://unused", service.name)
    service.wire(bus)
    now = datetime.fromisoformat("2026-09-24T10:00:00+08:00")
    async with bus.in_memory() as broker:
        parsed = await bus.request(wire.TIME_PARSE_REPLY, ParseReplyRequest(text="周日下午2点"))
        resolved = await bus.request(
            wire.TIME_RESOLVE, ResolveRequest(date="D+1", time="15:00", now=now, tz="Asia/Shanghai")
        )
        malformed = await broker.request(b'{"text": 42}', wire.TIME_PARSE_REPLY.subject)
        with pytest.raises(BusRequestError) as refused:
            # A request built without validation (no `now`, no `tz`): the server refuses it.
            await bus.request(wire.TIME_RESOLVE, ResolveRequest.model_construct(date="D+1"))  # type: ignore[call-arg]
    assert (parsed.patch.weekday, parsed.patch.time, parsed.complete) == (7, "14:00", True)
    assert resolved.start is not None
    assert resolved.start.isoformat() == "2026-09-25T15:00:00+08:00"
    assert b'"code":"malformed"' in malformed.body
    assert refused.value.code == "malformed"


@pytest.mark.parametrize(
    ("text", "patch", "days", "points"),
    [
        # A date/time phrase and the words that point at one of several things (contract §20).
        ("五点那个", {"ambiguous_time": "05:00"}, (), True),
        ("下午五点的那个", {"time": "17:00"}, (), True),
        ("the 3pm one", {"time": "15:00"}, (), True),
        ("周四那场", {"weekday": 4}, (), True),
        ("明天那个", {"date": "D+1"}, ("2026-09-25",), True),
        ("下周三的那个", {"date": "W3+1"}, ("2026-09-30",), True),
        ("3号那个", {"date": "2026-10-03"}, ("2026-10-03",), True),
        ("周末那个", {"date": "WE+0"}, ("2026-09-26", "2026-09-27"), True),
        # A complete reply points too; other content never does.
        ("周日下午2点", {"weekday": 7, "time": "14:00"}, (), True),
        ("删除明天下午四点的会", {"date": "D+1", "time": "16:00"}, ("2026-09-25",), False),
        ("吃饭那个", {}, (), False),
        ("第二个", {}, (), False),
    ],
)
async def test_parse_reply_says_whether_a_reply_points_at_one_by_its_day_or_time_and_which_days(
    text: str, patch: dict[str, object], days: tuple[str, ...], points: bool
) -> None:
    service = create_app(load_settings(), FrozenClock(datetime(2026, 9, 24, 2, tzinfo=UTC)))
    now = datetime.fromisoformat("2026-09-24T10:00:00+08:00")
    reply = await service.on_parse_reply(ParseReplyRequest(text=text, now=now, tz="Asia/Shanghai"))
    assert reply.patch.model_dump(exclude_none=True) == patch
    assert [d.isoformat() for d in reply.days] == list(days)
    assert reply.points_at_one is points
    # Pointing words complete only a choice, never a reply merged into slots.
    if text.endswith(("那个", "那场", "one")):
        assert reply.complete is False
    assert ParsedReply.model_validate_json(reply.model_dump_json()) == reply


async def test_the_slot_a_mailed_reply_names_is_answered_over_the_bus() -> None:
    """Commands asks which proposed time an attendee's reply names (contract §20): the reply's
    own words, in the attendee's zone or the user's, never its quotation; a zone that does not
    read names nothing."""
    from calagent.contracts import wire
    from calagent.contracts.time import ChooseSlotRequest
    from calagent.runtime.bus import Bus

    service = create_app(load_settings(), FrozenClock(datetime(2026, 9, 24, 2, tzinfo=UTC)))
    bus = Bus("nats://unused", service.name)
    service.wire(bus)
    starts = (
        datetime.fromisoformat("2026-09-28T10:00:00+08:00"),
        datetime.fromisoformat("2026-09-29T15:00:00+08:00"),
    )
    quoted = "\n\nOn Thu, 24 Sep 2026, me wrote:\n> 1. Mon 28 Sep 04:00\n> 2. Tue 29 Sep 09:00\n"
    zones = ("Europe/Berlin", "Asia/Shanghai")
    async with bus.in_memory():
        tuesday = await bus.request(
            wire.TIME_CHOOSE_SLOT,
            ChooseSlotRequest(text="Tuesday works" + quoted, starts=starts, zones=zones),
        )
        berlin = await bus.request(
            wire.TIME_CHOOSE_SLOT, ChooseSlotRequest(text="9am", starts=starts, zones=zones)
        )
        only_quoted = await bus.request(
            wire.TIME_CHOOSE_SLOT, ChooseSlotRequest(text=quoted, starts=starts, zones=zones)
        )
        unreadable_zone = await bus.request(
            wire.TIME_CHOOSE_SLOT, ChooseSlotRequest(text="Tuesday", starts=starts, zones=("Nowhere/City",))
        )
    assert (tuesday.index, berlin.index, only_quoted.index, unreadable_zone.index) == (1, 1, None, None)
