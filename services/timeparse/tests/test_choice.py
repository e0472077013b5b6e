"""Which proposed time a reply names (contract §20), pure: an ordinal, a weekday, a day, a time —
in the attendee's zone or the user's — read from the reply's own lines only; anything that names
none, several, or says no names nothing."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from calagent.timeparse.domain.choice import choose, own_words

pytestmark = pytest.mark.unit

SHANGHAI = ZoneInfo("Asia/Shanghai")
BERLIN = ZoneInfo("Europe/Berlin")
# Monday 28 Sep 10:00, Tuesday 29 Sep 15:00, Wednesday 30 Sep 15:00 — Shanghai (Berlin: 04:00,
# 09:00, 09:00).
STARTS = (
    datetime(2026, 9, 28, 10, 0, tzinfo=SHANGHAI),
    datetime(2026, 9, 29, 15, 0, tzinfo=SHANGHAI),
    datetime(2026, 9, 30, 15, 0, tzinfo=SHANGHAI),
)
ZONES = (BERLIN, SHANGHAI)
QUOTED = (
    "\n\nOn Thu, 24 Sep 2026 at 10:00, 我 <me@mail.test> wrote:\n"
    "> 1. Mon 28 Sep 04:00 (Europe/Berlin)\n> 2. Tue 29 Sep 09:00\n> 3. Wed 30 Sep 09:00\n"
)


@pytest.mark.parametrize(
    ("reply", "chosen"),
    [
        ("2", 1),
        ("2" + QUOTED, 1),
        ("#3 please", 2),
        ("Option 1 is fine", 0),
        ("第二个", 1),
        ("第3个吧", 2),
        ("the second one", 1),
        ("周二那个", 1),
        ("星期三可以", 2),
        ("Tuesday works", 1),
        ("tue is good" + QUOTED, 1),
        ("29号", 1),
        ("9月30日", 2),
        ("Sep 28 then", 0),
        ("the 30th", 2),
        # A time in either zone: 10:00 is Monday's in Shanghai, 09:00 Tuesday's and Wednesday's
        # in Berlin — with the weekday it is one.
        ("10:00", 0),
        ("上午十点", 0),
        ("Wednesday 9am", 2),
        ("周三下午三点", 2),
        ("2, Tuesday", 1),
    ],
)
def test_a_reply_naming_one_slot_chooses_it(reply: str, chosen: int) -> None:
    assert choose(reply, STARTS, ZONES) == chosen


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "Thanks!",
        # Several, or none of them.
        "9am",
        "下午三点",
        "Tuesday or Wednesday",
        "Thursday works",
        "4",
        # Cues that disagree.
        "2, Wednesday",
        # A refusal, even one naming a slot.
        "none of these work",
        "都不行，周二也不行",
        # Only the quotation names slots.
        QUOTED,
    ],
)
def test_a_reply_naming_no_single_slot_chooses_nothing(reply: str) -> None:
    assert choose(reply, STARTS, ZONES) is None


def test_own_words_stop_at_the_quotation_and_skip_quoted_lines() -> None:
    body = "Tuesday works\n> 1. Mon\n\n-----Original Message-----\nFrom: me\n2. Tue"
    assert own_words(body) == "Tuesday works"
    assert own_words("周二\n\n在 2026年9月24日 写道：\n> 1. 周一") == "周二"
