"""Properties of the resolver and the short-reply parser, checked with hypothesis."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from calagent.contracts.symbols import DATE_SYMBOL_RE, RANGE_SYMBOL_RE, TIME_RE
from calagent.contracts.time import ParsedReply, RangeRequest, ResolveRequest, SlotPatch
from calagent.devtools.testing.examples import examples
from calagent.timeparse.domain.replies import parse_reply, parsed_reply, strip_transport
from calagent.timeparse.domain.symbols import resolve, resolve_range, resolve_symbol

pytestmark = pytest.mark.unit

ZONES = (
    "Asia/Shanghai",
    "America/New_York",
    "Europe/Berlin",
    "America/Sao_Paulo",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
    "America/St_Johns",
    "UTC",
)
PROFILE = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])

nows = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2090, 12, 31),
    timezones=st.just(UTC),
)
zones = st.sampled_from(ZONES)
times = st.tuples(st.integers(0, 23), st.integers(0, 59)).map(lambda hm: f"{hm[0]:02d}:{hm[1]:02d}")


# 17:00 UTC is already the next day in Shanghai: Sunday evening there is Monday, 30 September is
# 1 October. A resolver that took the UTC date for today is wrong on these instants.
MONDAY_IN_SHANGHAI = datetime(2026, 9, 27, 17, 0, tzinfo=UTC)
OCTOBER_IN_SHANGHAI = datetime(2026, 9, 30, 17, 0, tzinfo=UTC)


def wall_date(now: datetime, tz: str) -> date:
    """The date on a wall clock in `tz` at the instant `now` (always aware here): the standard
    library's answer, not the resolver's own `local_today`, so a wrong "today" in the resolver
    cannot be checked against itself."""
    return now.astimezone(ZoneInfo(tz)).date()


def _date(symbol: str, now: datetime, tz: str) -> date:
    result = resolve(ResolveRequest(date=symbol, now=now, tz=tz))
    assert result.error is None, result.error
    assert result.date is not None
    return result.date


@PROFILE
@given(now=nows, tz=zones, weekday=st.integers(1, 7), k=st.integers(-60, 60))
@example(now=MONDAY_IN_SHANGHAI, tz="Asia/Shanghai", weekday=1, k=0)
def test_w_symbol_lands_on_its_weekday_in_week_k(now: datetime, tz: str, weekday: int, k: int) -> None:
    day = _date(f"W{weekday}{k:+d}", now, tz)
    assert day.isoweekday() == weekday
    today = wall_date(now, tz)
    this_monday = today - timedelta(days=today.weekday())
    assert (day - this_monday).days // 7 == k


@PROFILE
@given(now=nows, tz=zones, n=st.integers(-2000, 2000), clock=times)
def test_d_plus_n_is_n_local_days_from_today(now: datetime, tz: str, n: int, clock: str) -> None:
    today = _date("D", now, tz)
    assert today == wall_date(now, tz)
    assert (_date(f"D{n:+d}", now, tz) - today).days == n
    result = resolve_symbol(f"D{n:+d}", clock, None, now, tz)
    assert result.start is not None
    local = result.start.astimezone(ZoneInfo(tz))
    assert local.date() == today + timedelta(days=n)
    # The wall clock is the requested one unless the time fell into a DST gap (then it moved forward).
    hour, minute = map(int, clock.split(":"))
    asked = local.replace(hour=hour, minute=minute, tzinfo=None)
    moved = local.replace(tzinfo=None) - asked
    assert timedelta(0) <= moved <= timedelta(hours=1)


@PROFILE
@given(now=nows, tz=zones, k=st.integers(-30, 30))
def test_weekend_is_saturday_then_sunday(now: datetime, tz: str, k: int) -> None:
    result = resolve(ResolveRequest(date=f"WE{k:+d}", time="10:00", now=now, tz=tz))
    assert result.start is None
    saturday, sunday = result.candidates
    assert saturday.isoweekday() == 6
    assert sunday == saturday + timedelta(days=1)


@PROFILE
@given(now=nows, tz=zones, month=st.integers(1, 12), day=st.integers(1, 31))
@example(now=OCTOBER_IN_SHANGHAI, tz="Asia/Shanghai", month=9, day=30)
def test_month_day_is_on_or_after_today_and_soon(now: datetime, tz: str, month: int, day: int) -> None:
    try:
        date(2000, month, day)  # a leap year: every real month-day exists in it
    except ValueError:
        assert resolve(ResolveRequest(date=f"--{month:02d}-{day:02d}", now=now, tz=tz)).error is not None
        return
    found = _date(f"--{month:02d}-{day:02d}", now, tz)
    today = wall_date(now, tz)
    assert (found.month, found.day) == (month, day)
    assert found >= today
    limit = 8 * 366 if (month, day) == (2, 29) else 366  # 2096 -> 2104 is the longest leap gap
    assert (found - today).days < limit
    if (month, day) != (2, 29):
        assert found - timedelta(days=366) < today


@PROFILE
@given(now=nows, tz=zones, a=st.integers(-400, 400), b=st.integers(-400, 400), ta=times, tb=times)
def test_ranges_are_ordered_half_open_and_bounded(
    now: datetime, tz: str, a: int, b: int, ta: str, tb: str
) -> None:
    result = resolve_range(RangeRequest(start=f"D{a:+d}T{ta}", end=f"D{b:+d}T{tb}", now=now, tz=tz))
    if result.error is not None:
        assert result.error.code == "invalid_range"
        assert (b, tb) <= (a, ta) or b - a >= 366
        return
    assert result.start is not None
    assert result.end is not None
    assert result.start < result.end
    assert result.end.replace(tzinfo=None) - result.start.replace(tzinfo=None) <= timedelta(days=366)


@PROFILE
@given(now=nows, tz=zones, k=st.integers(-24, 24), span=st.integers(1, 12))
def test_month_ranges_start_on_the_first_at_midnight(now: datetime, tz: str, k: int, span: int) -> None:
    result = resolve_range(RangeRequest(start=f"M{k:+d}", end=f"M{k + span:+d}", now=now, tz=tz))
    assert result.error is None
    assert result.start is not None
    assert result.end is not None
    for edge in (result.start, result.end):
        local = edge.astimezone(ZoneInfo(tz))
        assert local.day == 1
        assert (local.hour, local.minute) in ((0, 0), (1, 0), (0, 30))  # midnight, or just after a gap
    today = wall_date(now, tz)
    assert (result.start.year * 12 + result.start.month) - (today.year * 12 + today.month) == k


@PROFILE
@given(symbol=st.from_regex(DATE_SYMBOL_RE, fullmatch=True), now=nows, tz=zones)
def test_every_contract_shaped_symbol_is_accepted_by_the_grammar(symbol: str, now: datetime, tz: str) -> None:
    result = resolve(ResolveRequest(date=symbol, now=now, tz=tz))
    if result.error is not None:
        assert "is not a date symbol" not in result.error.message


@PROFILE
@given(symbol=st.from_regex(RANGE_SYMBOL_RE, fullmatch=True), now=nows)
def test_every_contract_shaped_range_symbol_is_accepted(symbol: str, now: datetime) -> None:
    result = resolve_range(RangeRequest(start=symbol, end=symbol, now=now, tz="Asia/Shanghai"))
    assert result.error is not None
    assert "is not a range symbol" not in result.error.message


@PROFILE
@given(date_text=st.text(max_size=20), time_text=st.none() | st.text(max_size=8), tz=st.text(max_size=30))
def test_resolve_never_raises(date_text: str, time_text: str | None, tz: str) -> None:
    now = datetime(2026, 9, 24, 10, tzinfo=UTC)
    result = resolve_symbol(date_text, time_text, None, now, tz)
    outcomes = [
        result.start is not None,
        result.date is not None,
        bool(result.candidates),
        result.error is not None,
    ]
    assert sum(outcomes) == 1
    if result.error is None:
        assert re.fullmatch(DATE_SYMBOL_RE, date_text)


@PROFILE
@given(text=st.text(max_size=200))
def test_parse_reply_never_raises_and_emits_valid_patches(text: str) -> None:
    patch = parse_reply(text)
    SlotPatch.model_validate(patch.model_dump())
    _check_patch(patch)


_REPLYISH = st.lists(
    st.sampled_from(
        [
            "周日", "下周三", "明天", "后天", "下午", "晚上", "上午", "两点", "3点",
            "十点半", "一刻", "到", "4点",
            "14:00", "-", "16:00", "天", "next", "Wednesday", "3pm", "at", "noon", "tomorrow", "9月30日",
            "Sept 30", "好的", "吧", "不", "或", "每", "号", "点", " ", "，", "2-4pm", "12am", "凌晨", "半",
            "大", "前天", "3:15", "03:15", "7点", "就", "的会", "删除", "make it", "then", "5点",
        ]
    ),
    max_size=6,
).map("".join)  # fmt: skip


def _check_patch(patch: SlotPatch) -> None:
    if patch.has_ambiguous_hour():
        # An hour without its half of the day: both readings must be valid, resolvable patches.
        assert patch.time is None
        assert patch.end_time is None
        assert patch.ambiguous_time is not None
        SlotPatch.model_validate(patch.model_dump())
        for pm in (False, True):
            resolved = patch.resolve_period(pm)
            assert not resolved.has_ambiguous_hour()
            _check_patch(resolved)
        return
    if patch.time is not None:
        assert re.fullmatch(TIME_RE, patch.time)
    if patch.end_time is not None:
        assert patch.time is not None
        assert re.fullmatch(TIME_RE, patch.end_time)
        assert patch.end_time > patch.time
    if patch.date is not None:
        assert patch.weekday is None
        assert re.fullmatch(DATE_SYMBOL_RE, patch.date)
        result = resolve_symbol(
            patch.date, patch.time, patch.end_time, datetime(2026, 9, 24, 2, tzinfo=UTC), "UTC"
        )
        assert result.error is None, (patch, result.error)


@PROFILE
@given(text=_REPLYISH)
def test_reply_like_text_gives_resolvable_patches(text: str) -> None:
    _check_patch(parse_reply(text))


def _wrappers() -> list[tuple[str, str]]:
    return [
        ('<untrusted_channel_message channel="telegram" from="u1">', "</untrusted_channel_message>"),
        ("[Telegram] ", ""),
        ("> 周一上午9点开会？\n", ""),
        ("", "\n\n> On Monday 9am?"),
        ("", "\n---------- Forwarded message ----------\nFrom: x\n周五下午5点"),
        ("", "\nFwd: Monday 9am"),
        ("On Mon, Sep 21, 2026 at 9:00 AM Bob wrote:\n> Monday 9am?\n", ""),
    ]


@PROFILE
@given(text=_REPLYISH, wrapper=st.sampled_from(_wrappers()))
def test_transport_wrappers_do_not_change_the_patch(text: str, wrapper: tuple[str, str]) -> None:
    assume("\n" not in text)
    before, after = wrapper
    assert parse_reply(before + text + after) == parse_reply(text)
    assert parsed_reply(before + text + after) == parsed_reply(text)  # completeness too


@PROFILE
@given(text=_REPLYISH, extra=st.sampled_from(["开会", "删除", "的会", "张三", "dentist", "please", "🙂"]))
def test_a_complete_reply_carries_a_patch_and_any_other_word_makes_it_partial(text: str, extra: str) -> None:
    reply = parsed_reply(text)
    ParsedReply.model_validate_json(reply.model_dump_json())
    if reply.complete:
        assert not reply.patch.is_empty()
    assert not parsed_reply(text + " " + extra).complete
    assert not parsed_reply(extra + " " + text).complete


@PROFILE
@given(text=st.text(max_size=80))
def test_strip_transport_is_idempotent(text: str) -> None:
    once = strip_transport(text)
    assert strip_transport(once) == once


# --------------------------------------------------------------------------- days of the month


@PROFILE
@given(now=nows, tz=zones, day=st.integers(1, 31), form=st.sampled_from(["{d}号", "{d}日", "the {d}th"]))
@example(now=OCTOBER_IN_SHANGHAI, tz="Asia/Shanghai", day=30, form="{d}号")
def test_a_day_of_the_month_is_the_next_such_day_on_or_after_today(
    now: datetime, tz: str, day: int, form: str
) -> None:
    found = date.fromisoformat(parse_reply(form.format(d=day), now, tz).date or "")
    today = wall_date(now, tz)
    assert found.day == day
    assert found >= today
    # No earlier day on or after today has that day of the month (months without it are skipped).
    assert all((today + timedelta(days=i)).day != day for i in range((found - today).days))
    assert (found - today).days < 62 + 31


@PROFILE
@given(now=nows, tz=zones, k=st.sampled_from([("上个", -1), ("", 0), ("本", 0), ("下个", 1), ("下下个", 2)]))
def test_a_month_end_is_the_last_day_of_that_month(now: datetime, tz: str, k: tuple[str, int]) -> None:
    word, months = k
    found = date.fromisoformat(parse_reply(f"{word}月底", now, tz).date or "")
    today = wall_date(now, tz)
    assert (found.year * 12 + found.month) - (today.year * 12 + today.month) == months
    assert (found + timedelta(days=1)).day == 1


_DATED_REPLYISH = st.lists(
    st.sampled_from(
        [
            "12号", "31号", "十二日", "下个月", "本月", "月底", "5号", "的", "下旬", "the", "12th", "of",
            "next", "month", "end", "on", "3rd", "下午3点", "midnight", "half past", "3pm", "quarter to",
            "周一", "Friday", "每", "号", "两", " ", "，", "吧", "tomorrow", "明天",
        ]
    ),
    max_size=5,
).map("".join)  # fmt: skip


@PROFILE
@given(text=_DATED_REPLYISH, now=nows, tz=zones)
def test_dated_reply_like_text_gives_resolvable_patches(text: str, now: datetime, tz: str) -> None:
    reply = parsed_reply(text, now, tz)
    ParsedReply.model_validate_json(reply.model_dump_json())
    _check_patch(reply.patch)
    if reply.complete:
        assert not reply.patch.is_empty()
    # Without today the month-day forms are refused, never guessed: a full date then comes only
    # from a written year.
    bare = parse_reply(text)
    if bare.date is not None and bare.date[:1].isdigit():
        assert re.search(r"[0-9]{4}", text)


_MARKERISH = st.lists(
    st.sampled_from(
        [
            "每", "周", "三", "每周", "每个", "人", "工作日", "下个", "every", "each", "of", "weekday",
            "repeat", "that", "?", " ", "   ", "\n", "> ", "天天", "自动", "daily", "明天", "3pm", "Every",
        ]
    ),
    max_size=8,
).map("".join)  # fmt: skip


@PROFILE
@given(text=_MARKERISH)
def test_the_recurrence_marker_is_written_in_the_users_words_and_blocks_the_patch(text: str) -> None:
    reply = parsed_reply(text)
    ParsedReply.model_validate_json(reply.model_dump_json())
    if reply.recurrence_marker is not None:
        assert reply.recurrence_marker in strip_transport(text)
        assert reply.patch.is_empty()
        assert not reply.complete


_ZONE_ORDERS = {"Europe/Berlin": "dmy", "Australia/Sydney": "dmy", "America/New_York": "mdy", "UTC": None}


@PROFILE
@given(
    first=st.integers(1, 31),
    second=st.integers(1, 31),
    year=st.one_of(st.none(), st.integers(2000, 2099)),
    dots=st.booleans(),
    tz=st.sampled_from([*_ZONE_ORDERS, None]),
)
def test_a_numeric_date_is_read_in_the_zones_order_or_not_at_all(
    first: int, second: int, year: int | None, dots: bool, tz: str | None
) -> None:
    """3/4 is 4 March in New York and 3 April in Berlin; where the zone does not say and the two
    readings differ, nothing is read."""
    sep = "." if dots and year is not None else "/"
    text = f"{first}{sep}{second}" + (f"{sep}{year}" if year is not None else "")
    got = parse_reply(text, datetime(2026, 9, 24, 10, tzinfo=UTC), tz).model_dump(exclude_none=True)

    def real(month: int, day: int) -> str | None:
        try:
            date(year or 2000, month, day)
        except ValueError:
            return None
        return f"{year:04d}-{month:02d}-{day:02d}" if year is not None else f"--{month:02d}-{day:02d}"

    order = _ZONE_ORDERS.get(tz) if tz is not None else None
    month_first, day_first = real(first, second), real(second, first)
    if order == "dmy":
        want = day_first
    elif order == "mdy":
        want = month_first
    else:
        want = month_first if month_first is not None and day_first in (None, month_first) else None
    assert got == ({"date": want} if want is not None else {}), text
