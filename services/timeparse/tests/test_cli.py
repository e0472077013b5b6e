"""`calagent resolve` / `calagent parse-reply`: exact JSON lines and exit codes of contract §6-7."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from calagent.timeparse import cli
from calagent.timeparse.cli import parse_reply_main, resolve_main

pytestmark = pytest.mark.unit

NOW = "2026-09-24T10:00:00+08:00"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CALAGENT_NOW", "CALAGENT_DEFAULT_TZ", "CALAGENT_HOLIDAY_COUNTRY"):
        monkeypatch.delenv(name, raising=False)


def _run(capsys: pytest.CaptureFixture[str], main: object, argv: list[str]) -> tuple[int, str]:
    assert callable(main)
    code = main(argv)
    out = capsys.readouterr().out
    assert out.endswith("\n")
    assert out.count("\n") == 1, "exactly one JSON line"
    return code, out.rstrip("\n")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--date", "W3+1", "--time", "15:00", "--now", NOW, "--tz", "Asia/Shanghai"],
            '{"start":"2026-09-30T15:00:00+08:00"}',
        ),
        (
            ["--date", "WE", "--now", NOW, "--tz", "Asia/Shanghai"],
            '{"candidates":["2026-09-26","2026-09-27"]}',
        ),
        (["--date", "W3+1", "--now", NOW, "--tz", "Asia/Shanghai"], '{"date":"2026-09-30"}'),
        (
            ["--date", "D+1", "--time", "14:00", "--end-time", "15:00", "--now", NOW],
            '{"start":"2026-09-25T14:00:00+08:00","end":"2026-09-25T15:00:00+08:00"}',
        ),
        (["--date", "--02-29", "--now", NOW], '{"date":"2028-02-29"}'),
        (["--date=--10-01", "--now", NOW], '{"date":"2026-10-01"}'),
        (["--date", "H:national_day", "--now", NOW], '{"date":"2026-10-01"}'),
        (
            [
                "--date",
                "D+1",
                "--time",
                "02:30",
                "--now",
                "2026-03-07T12:00:00-05:00",
                "--tz",
                "America/New_York",
            ],
            '{"start":"2026-03-08T03:30:00-04:00"}',
        ),
    ],
)
def test_resolve_prints_the_contract_json(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert _run(capsys, resolve_main, argv) == (0, expected)


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--date", "W8+1", "--now", NOW], "invalid_symbol"),
        (["--date", "天", "--now", NOW], "invalid_symbol"),
        (["--date", "next wed", "--now", NOW], "invalid_symbol"),
        (["--date", "2026-02-30", "--now", NOW], "invalid_symbol"),
        (["--date", "D+99999", "--now", NOW], "invalid_symbol"),
        (["--date", "D", "--time", "25:00", "--now", NOW], "invalid_time"),
        (["--date", "D", "--time", "9:5", "--now", NOW], "invalid_time"),
        (["--date", "H:nope", "--now", NOW], "unknown_holiday"),
        (["--date", "D", "--now", NOW, "--tz", "Mars/Base"], "invalid_zone"),
        (["--date", "D", "--now", "yesterday"], "invalid_symbol"),
        (["--now", NOW], "invalid_symbol"),
        (["--date", "D", "--bogus"], "invalid_symbol"),
    ],
)
def test_resolve_errors_print_a_json_error_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: str
) -> None:
    status, line = _run(capsys, resolve_main, argv)
    assert status == 2
    payload = json.loads(line)
    assert list(payload) == ["error"]
    assert payload["error"]["code"] == code
    assert payload["error"]["message"]


def test_resolve_error_line_is_compact_and_keeps_unicode(capsys: pytest.CaptureFixture[str]) -> None:
    _, line = _run(capsys, resolve_main, ["--date", "天", "--now", NOW])
    assert line.startswith('{"error":{"code":"invalid_symbol","message":"')
    assert "天" in line
    assert ", " not in line.split('"message"')[0]


def test_resolve_defaults_come_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALAGENT_NOW", "2026-09-23T16:30:00Z")  # already the 24th in Shanghai
    assert _run(capsys, resolve_main, ["--date", "D"]) == (0, '{"date":"2026-09-24"}')
    monkeypatch.setenv("CALAGENT_DEFAULT_TZ", "America/New_York")
    assert _run(capsys, resolve_main, ["--date", "D"]) == (0, '{"date":"2026-09-23"}')
    assert _run(capsys, resolve_main, ["--date", "D", "--tz", "Asia/Tokyo"]) == (0, '{"date":"2026-09-24"}')
    monkeypatch.setenv("CALAGENT_HOLIDAY_COUNTRY", "US")
    assert _run(capsys, resolve_main, ["--date", "H:thanksgiving"]) == (0, '{"date":"2026-11-26"}')


def test_resolve_defaults_to_shanghai_and_cn(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, resolve_main, ["--date", "D", "--time", "09:00", "--now", NOW]) == (
        0,
        '{"start":"2026-09-24T09:00:00+08:00"}',
    )
    assert _run(capsys, resolve_main, ["--date", "H:spring_festival", "--now", NOW]) == (
        0,
        '{"date":"2027-02-06"}',
    )


def test_without_now_the_cli_reads_the_clock_through_one_function(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "wall_clock_now", lambda: datetime.fromisoformat("2026-12-31T17:00:00+00:00"))
    assert _run(capsys, resolve_main, ["--date", "D"]) == (0, '{"date":"2027-01-01"}')


def test_naive_now_is_local_wall_time(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--date", "D", "--now", "2026-09-24T23:30:00", "--tz", "America/New_York"]
    assert _run(capsys, resolve_main, argv) == (0, '{"date":"2026-09-24"}')


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("周日下午2点", '{"weekday":7,"time":"14:00"}'),
        ("明天上午十点半", '{"date":"D+1","time":"10:30"}'),
        ("下午两点", '{"time":"14:00"}'),
        ("next Wednesday 3pm", '{"date":"W3+1","time":"15:00"}'),
        ("不用换，直接创建", "{}"),
        ("下午2点到4点", '{"time":"14:00","end_time":"16:00"}'),
        ("下周三上午10点到12点", '{"date":"W3+1","time":"10:00","end_time":"12:00"}'),
        # An hour 1-6 without a period word: its a.m. reading, not a time; no `complete` key here.
        ("3点一刻", '{"ambiguous_time":"03:15"}'),
        ("3点到4点", '{"ambiguous_time":"03:00","ambiguous_end_time":"04:00"}'),
        ("删除明天下午四点的会", '{"date":"D+1","time":"16:00"}'),
        ("大前天", '{"date":"D-3"}'),
    ],
)
def test_parse_reply_prints_the_contract_json(
    capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    assert _run(capsys, parse_reply_main, [text]) == (0, expected)
    assert _run(capsys, parse_reply_main, [text, "--now", NOW, "--tz", "Asia/Shanghai"]) == (0, expected)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["12号", "--now", NOW, "--tz", "Asia/Shanghai"], '{"date":"2026-10-12"}'),
        (["下个月5号下午2点", "--now", NOW], '{"date":"2026-10-05","time":"14:00"}'),
        (["月底", "--now", "2028-02-10T09:00:00", "--tz", "Europe/London"], '{"date":"2028-02-29"}'),
        (["the 12th", "--now", NOW, "--tz", "Asia/Shanghai"], '{"date":"2026-10-12"}'),
        (["end of next month", "--now", NOW], '{"date":"2026-10-31"}'),
        # 20:00 on 31 December in New York is already 1 January in Shanghai.
        (["1号", "--now", "2026-12-31T20:00:00-05:00", "--tz", "America/New_York"], '{"date":"2027-01-01"}'),
        (["31号", "--now", "2026-12-31T20:00:00-05:00", "--tz", "America/New_York"], '{"date":"2026-12-31"}'),
        (["31号", "--now", "2026-12-31T20:00:00-05:00", "--tz", "Asia/Shanghai"], '{"date":"2027-01-31"}'),
        (["--now", NOW, "--tz", "Asia/Shanghai", "12号"], '{"date":"2026-10-12"}'),
        (["下旬", "--now", NOW], "{}"),
        (["每周三下午3点", "--now", NOW], "{}"),
        (["half past 3 pm", "--now", NOW], '{"time":"15:30"}'),
    ],
)
def test_parse_reply_reads_days_of_the_month_for_now_and_tz(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert _run(capsys, parse_reply_main, argv) == (0, expected)


def test_parse_reply_days_of_the_month_follow_the_environment_and_the_clock(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "wall_clock_now", lambda: datetime.fromisoformat("2026-01-31T02:00:00+00:00"))
    assert _run(capsys, parse_reply_main, ["月底"]) == (0, '{"date":"2026-01-31"}')
    monkeypatch.setenv("CALAGENT_NOW", "2026-09-23T16:30:00Z")  # already the 24th in Shanghai
    assert _run(capsys, parse_reply_main, ["24号"]) == (0, '{"date":"2026-09-24"}')
    monkeypatch.setenv("CALAGENT_DEFAULT_TZ", "America/New_York")  # still the 23rd there
    assert _run(capsys, parse_reply_main, ["24号"]) == (0, '{"date":"2026-09-24"}')
    assert _run(capsys, parse_reply_main, ["23号"]) == (0, '{"date":"2026-09-23"}')


def test_calagent_parse_reply_passes_now_and_tz_through_the_top_level_cli(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from calagent.cli.main import main

    assert main(["parse-reply", "12号下午3点", "--now", NOW, "--tz", "Asia/Shanghai"]) == 0
    assert capsys.readouterr().out == '{"date":"2026-10-12","time":"15:00"}\n'
    assert main(["parse-reply", "12号", "--now", NOW, "--tz", "Nowhere/Land"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "invalid_zone"


def test_parse_reply_rejects_a_bad_now(capsys: pytest.CaptureFixture[str]) -> None:
    status, line = _run(capsys, parse_reply_main, ["12号", "--now", "yesterday"])
    assert status == 2
    assert json.loads(line)["error"]["code"] == "invalid_symbol"


def test_parse_reply_rejects_a_bad_zone(capsys: pytest.CaptureFixture[str]) -> None:
    status, line = _run(capsys, parse_reply_main, ["周日", "--tz", "Nowhere/Land"])
    assert status == 2
    assert json.loads(line)["error"]["code"] == "invalid_zone"


def test_parse_reply_needs_text(capsys: pytest.CaptureFixture[str]) -> None:
    status, line = _run(capsys, parse_reply_main, [])
    assert status == 2
    assert "error" in json.loads(line)


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert resolve_main(["--help"]) == 0
    assert "--date" in capsys.readouterr().out
    assert parse_reply_main(["-h"]) == 0
