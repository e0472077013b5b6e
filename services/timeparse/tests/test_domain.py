"""Unit tests of the domain helpers and of the rules the module docstrings promise."""

from __future__ import annotations

import ast
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from calagent.contracts.time import RangeRequest, RangeResult, ResolveRequest, ResolveResult, SlotPatch
from calagent.timeparse.domain import replies, symbols
from calagent.timeparse.domain.recurrence import recurrence_marker
from calagent.timeparse.domain.replies import analyse_reply, parse_reply, strip_transport
from calagent.timeparse.domain.symbols import (
    holiday_names,
    local_today,
    resolve,
    resolve_date,
    resolve_range,
    weekday_label,
    zone,
)

pytestmark = pytest.mark.unit

DOMAIN = Path(symbols.__file__).parent
NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")


# --------------------------------------------------------------------------- purity


@pytest.mark.parametrize("path", sorted(DOMAIN.glob("*.py")), ids=lambda p: p.name)
def test_domain_is_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            # datetime.now(), date.today(), time.time(): the clock is always an argument here.
            func = node.func
            is_clock = func.attr in {"now", "today", "utcnow"} and ast.unparse(func.value) in {
                "datetime",
                "date",
            }
            assert not is_clock, f"{path.name} reads the clock: {ast.unparse(node)}"
    assert not imported & {"nats", "faststream", "sqlalchemy", "openai", "dateparser", "os", "time"}


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("day", "zh", "en"),
    [
        (date(2026, 9, 28), "周一", "Mon"),
        (date(2026, 9, 29), "周二", "Tue"),
        (date(2026, 9, 30), "周三", "Wed"),
        (date(2026, 10, 1), "周四", "Thu"),
        (date(2026, 10, 2), "周五", "Fri"),
        (date(2026, 10, 3), "周六", "Sat"),
        (date(2026, 10, 4), "周日", "Sun"),
    ],
)
def test_weekday_label(day: date, zh: str, en: str) -> None:
    assert weekday_label(day, "zh") == zh
    assert weekday_label(day, "zh-CN") == zh
    assert weekday_label(day, "en") == en
    assert weekday_label(day, "en-US") == en
    assert weekday_label(datetime(day.year, day.month, day.day, 23, 59), "zh") == zh


def test_local_today_uses_the_users_zone() -> None:
    utc_evening = datetime(2026, 9, 23, 16, 30, tzinfo=UTC)
    assert local_today(utc_evening, "Asia/Shanghai") == date(2026, 9, 24)
    assert local_today(utc_evening, "America/New_York") == date(2026, 9, 23)
    assert local_today(datetime(2026, 9, 24, 23, 59), "Asia/Shanghai") == date(2026, 9, 24)
    with pytest.raises(ValueError, match="IANA"):
        local_today(utc_evening, "Not/AZone")


def test_zone_rejects_non_zones() -> None:
    assert zone("Asia/Shanghai").key == "Asia/Shanghai"
    for bad in ("", "x" * 100, "../x", "Asia/Nowhere", "/etc/localtime"):
        with pytest.raises(ValueError, match="IANA"):
            zone(bad)


def test_holiday_names_come_from_the_library_with_aliases() -> None:
    names = holiday_names("CN", 2026)
    assert names["national_day"] == date(2026, 10, 1)
    assert names["spring_festival"] == date(2026, 2, 17)
    assert names["chinese_new_year_spring_festival"] == date(2026, 2, 17)
    assert names["qingming"] == names["tomb_sweeping_day"] == date(2026, 4, 5)
    for required in ("new_year", "spring_festival", "qingming", "labor_day", "dragon_boat", "mid_autumn"):
        assert required in names
    assert not any("observed" in name or name.startswith("day_off") for name in names)
    assert holiday_names("XX", 2026) == {}


def test_resolve_date_without_zone() -> None:
    assert resolve_date("W3+1", date(2026, 9, 24)) == symbols.DateResolution((date(2026, 9, 30),))
    problem = resolve_date("W9", date(2026, 9, 24))
    assert isinstance(problem, symbols.SymbolProblem)
    assert problem.code == "invalid_symbol"


# --------------------------------------------------------------------------- wire compatibility


def test_results_survive_the_wire_models() -> None:
    """Results are built with model_construct; they must still be what validation would build."""
    cases = [
        ResolveRequest(date="W3+1", time="15:00", end_time="16:00", now=NOW, tz="Asia/Shanghai"),
        ResolveRequest(date="WE", now=NOW, tz="Asia/Shanghai"),
        ResolveRequest(date="D", now=NOW, tz="Asia/Shanghai"),
        ResolveRequest(date="W9", now=NOW, tz="Asia/Shanghai"),
    ]
    for req in cases:
        result = resolve(req)
        wire = result.model_dump_json()
        # Validation from the wire rebuilds what was constructed: a field model_construct filled
        # with the wrong type (a string for a date, a list for the candidates) differs here.
        assert ResolveResult.model_validate_json(wire) == result
    start = json.loads(resolve(cases[0]).model_dump_json())["start"]
    assert start == "2026-09-30T15:00:00+08:00"
    rng = resolve_range(RangeRequest(start="D", end="D+1", now=NOW, tz="Asia/Shanghai"))
    assert RangeResult.model_validate_json(rng.model_dump_json()) == rng
    patch = parse_reply("周日下午2点到4点")
    assert SlotPatch.model_validate_json(patch.model_dump_json()) == patch
    assert patch.model_dump(exclude_none=True) == {"weekday": 7, "time": "14:00", "end_time": "16:00"}
    assert parse_reply("好的").is_empty()
    assert patch.model_dump(exclude_unset=True) == patch.model_dump(exclude_none=True)


def test_instants_keep_the_users_zone() -> None:
    result = resolve(ResolveRequest(date="D", time="09:00", now=NOW, tz="Europe/Berlin"))
    assert result.start is not None
    assert getattr(result.start.tzinfo, "key", None) == "Europe/Berlin"


def test_now_far_at_the_edge_of_the_calendar_is_an_error_not_a_crash() -> None:
    edge = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    assert resolve(ResolveRequest(date="D+1", now=edge, tz="Asia/Shanghai")).error is not None
    assert resolve(ResolveRequest(date="D", time="10:00", now=edge, tz="Asia/Tokyo")).error is not None
    low = datetime(1, 1, 1, 1, 0, tzinfo=UTC)
    assert resolve(ResolveRequest(date="D-1", now=low, tz="UTC")).error is not None
    assert resolve_range(RangeRequest(start="M+1", end="M+2", now=edge, tz="UTC")).error is not None


# --------------------------------------------------------------------------- short replies


def test_strip_transport_keeps_the_users_words_only() -> None:
    wrapped = (
        '<untrusted_channel_message channel="telegram" from="alice">\n'
        "[Telegram] 周日下午2点\n"
        "> 原来是周一上午9点\n"
        "</untrusted_channel_message>"
    )
    assert strip_transport(wrapped) == "周日下午2点"
    assert strip_transport("ok\n---------- Forwarded message ----------\nMonday 9am") == "ok"
    assert strip_transport("Fwd: Monday 9am") == ""
    assert strip_transport("  > quoted\nmine") == "mine"
    assert strip_transport("在2026年9月21日 周一 09:00，Bob 写道：\n> 周一？\n周日") == "周日"
    # The gateway's rule, read from the same place: WeChat's reply-quote, a mail signature.
    assert (
        strip_transport("「calagent：周六还是周日？」\n- - - - - - - - - - - - - - -\n周日下午2点")
        == "周日下午2点"
    )
    assert strip_transport("周日下午2点\n\n-- \nAlice") == "周日下午2点"
    # Someone else's words alone are not a reply.
    assert strip_transport("> 周日下午2点") == ""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("晚上12点", "time outside its period"),
        ("三点五", "malformed time"),
        ("2月30日", "impossible date"),
        ("每周三", "recurrence"),
        ("晚一点", "shift"),
        ("午夜", "midnight"),
        ("tomorrow at midnight", "midnight beside a date: which day is meant is the question"),
        ("12号", "a day of the month needs now and tz"),
        ("下旬", "vague"),
        ("early next month", "vague"),
        ("周六或周日", "unconsumed date/time, negation or question words"),
        ("周六 周日", "two dates"),
        ("下午2点 下午3点", "two times"),
        ("明天早上下午3点", "two periods"),
        ("下午4点到2点", "range end not after start"),
        ("3点到晚上8点", "ambiguous start, explicit end"),
        ("大明天", "unknown relative day"),
        ("我周日下午要去医院看望我奶奶顺便去超市买菜吧", "long free text"),
        ("x" * 400, "too long"),
        ("", "empty"),
    ],
)
def test_refusals_say_why(text: str, reason: str) -> None:
    assert analyse_reply(text).reason == reason
    assert parse_reply(text).is_empty()


def test_an_ambiguous_hour_is_something_but_not_a_time() -> None:
    patch = parse_reply("3点一刻")
    assert patch.model_dump(exclude_none=True) == {"ambiguous_time": "03:15"}
    assert patch.model_dump(exclude_unset=True) == patch.model_dump(exclude_none=True)
    assert patch.time is None
    assert patch.has_ambiguous_hour()
    assert not patch.is_empty()
    assert not parse_reply("下午3点一刻").has_ambiguous_hour()
    assert not SlotPatch().has_ambiguous_hour()
    assert SlotPatch().is_empty()
    assert not SlotPatch(ambiguous_end_time="04:00").is_empty()


def test_resolve_period_moves_the_ambiguous_hours_into_the_slots() -> None:
    patch = parse_reply("周日3点到4点半")
    assert patch.model_dump(exclude_none=True) == {
        "weekday": 7,
        "ambiguous_time": "03:00",
        "ambiguous_end_time": "04:30",
    }
    pm = patch.resolve_period(pm=True)
    assert pm.model_dump(exclude_none=True) == {"weekday": 7, "time": "15:00", "end_time": "16:30"}
    assert pm.model_dump(exclude_unset=True) == pm.model_dump(exclude_none=True)
    am = patch.resolve_period(pm=False)
    assert am.model_dump(exclude_none=True) == {"weekday": 7, "time": "03:00", "end_time": "04:30"}
    assert not pm.has_ambiguous_hour()
    assert patch.has_ambiguous_hour()  # pure: the original is unchanged
    explicit = parse_reply("明天下午3点")
    assert explicit.resolve_period(pm=False) == explicit
    assert SlotPatch(ambiguous_time="06:59").resolve_period(pm=True).time == "18:59"


@pytest.mark.parametrize(
    "fields",
    [
        {"time": "15:00", "ambiguous_time": "03:00"},
        {"end_time": "16:00", "ambiguous_end_time": "04:00"},
        {"ambiguous_time": "13:00"},
        {"ambiguous_time": "00:30"},
        {"ambiguous_time": "3:15"},
        {"ambiguous_end_time": "12:00"},
    ],
)
def test_a_slot_patch_has_one_reading_per_slot_and_ambiguous_hours_are_am_readings(
    fields: dict[str, str],
) -> None:
    with pytest.raises(ValidationError):
        SlotPatch.model_validate(fields)


def test_a_lone_tian_is_never_a_date() -> None:
    for text in ("天", "天天", "那天", "天啊", "每天", "一天", "天下午3点"):
        assert parse_reply(text).date is None
        assert parse_reply(text).weekday is None


def test_parser_bug_degrades_to_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(text: str) -> replies.ReplyParse:
        raise RuntimeError(text)

    monkeypatch.setattr(replies, "analyse_reply", boom)
    assert parse_reply("周日下午2点").is_empty()


@pytest.mark.parametrize("text", ["今天天气怎么样", "明天天气好吗", "昨天天很冷", "后天天亮就出发"])
def test_a_day_word_before_tian_is_no_daily_marker(text: str) -> None:
    # 今天 + 天气: the 天天 across the two words repeats nothing.
    assert recurrence_marker(text) is None


@pytest.mark.parametrize(
    ("text", "marker"), [("天天跑步", "天天"), ("我天天早上八点跑步", "天天"), ("每天天气预报", "每天")]
)
def test_a_real_tiantian_or_meitian_is_still_a_daily_marker(text: str, marker: str) -> None:
    assert recurrence_marker(text) == marker
