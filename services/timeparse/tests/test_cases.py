"""The labelled case files under cases/: symbols, ranges and short replies, zh and en."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from calagent.contracts.time import RangeRequest, ResolveRequest
from calagent.timeparse.cli import result_json
from calagent.timeparse.domain.replies import analyse_reply, parsed_reply
from calagent.timeparse.domain.symbols import resolve, resolve_range

pytestmark = pytest.mark.unit

CASES = Path(__file__).parent / "cases"


@cache
def _load(name: str) -> Any:
    """A case file, read once however many tests (and parametrizations) read it; never changed."""
    with (CASES / name).open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _strings_only(value: Any, where: str) -> None:
    # Unquoted YAML silently turns 14:00 into 840 and 2026-09-30 into a date: refuse such a file.
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "weekday":
                _strings_only(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _strings_only(item, f"{where}[{i}]")
    else:
        assert isinstance(value, str), f"{where}: {value!r} must be a quoted string"


def _grouped(name: str) -> list[Any]:
    params = []
    for group in _load(name)["groups"]:
        defaults = {k: group[k] for k in ("now", "tz", "country") if k in group}
        for i, case in enumerate(group["cases"]):
            merged = {**defaults, **case}
            _strings_only({k: v for k, v in merged.items() if k != "want"}, f"{group['name']}[{i}]")
            label = " ".join(
                str(case.get(k)) for k in ("date", "time", "end_time", "start", "end") if k in case
            )
            params.append(pytest.param(merged, id=f"{group['name'][:24]}|{label}"))
    return params


def _expected(want: dict[str, Any]) -> dict[str, Any]:
    return {"error": want["error"]} if "error" in want else want


def _actual(got: dict[str, Any]) -> dict[str, Any]:
    return {"error": got["error"]["code"]} if "error" in got else got


@pytest.mark.parametrize("case", _grouped("symbols.yaml"))
def test_symbol_case(case: dict[str, Any]) -> None:
    req = ResolveRequest(
        date=case["date"],
        time=case.get("time"),
        end_time=case.get("end_time"),
        now=datetime.fromisoformat(case["now"]),
        tz=case["tz"],
        holiday_country=case.get("country", "CN"),
    )
    assert _actual(result_json(resolve(req))) == _expected(case["want"])


@pytest.mark.parametrize("case", _grouped("ranges.yaml"))
def test_range_case(case: dict[str, Any]) -> None:
    req = RangeRequest(
        start=case["start"],
        end=case["end"],
        now=datetime.fromisoformat(case["now"]),
        tz=case["tz"],
        holiday_country=case.get("country", "CN"),
    )
    result = resolve_range(req)
    if result.error is not None:
        got: dict[str, Any] = {"error": result.error.code}
    else:
        assert result.start is not None
        assert result.end is not None
        got = {"start": result.start.isoformat(), "end": result.end.isoformat()}
    assert got == _expected(case["want"])


_WHOLE = {"complete": True, "partial": False}


def _reply_params() -> list[Any]:
    cases = _load("replies.yaml")["cases"]
    texts = [case[0] for case in cases]
    assert len(texts) == len(set(texts)), "duplicate reply case"
    params = []
    for case in cases:
        # [text, patch] or [text, patch, complete|partial]: the third labels contract section 8.
        text, want, *whole = case
        assert len(whole) <= 1 and set(whole) <= set(_WHOLE), f"{text}: bad completeness label {whole}"
        params.append(pytest.param(text, want, _WHOLE[whole[0]] if whole else None, id=text[:40]))
    return params


@pytest.mark.parametrize(("text", "want", "complete"), _reply_params())
def test_reply_case(text: str, want: dict[str, Any], complete: bool | None) -> None:
    _strings_only(want, text)
    reply = parsed_reply(text)
    got = reply.patch.model_dump(exclude_none=True)
    assert got == want, f"refused because: {analyse_reply(text).reason}"
    if reply.complete:
        assert got, "a complete reply always carries something to merge"
    if complete is not None:
        assert reply.complete is complete, f"leftover: {analyse_reply(text).leftover!r}"


def _dated_params() -> list[Any]:
    params = []
    for group in _load("replies.yaml")["dated"]:
        now = group.get("now")
        for text, want, *whole in group["cases"]:
            assert len(whole) <= 1 and set(whole) <= set(_WHOLE), f"{text}: bad completeness label {whole}"
            params.append(
                pytest.param(
                    text,
                    datetime.fromisoformat(now) if now else None,
                    group.get("tz"),
                    want,
                    _WHOLE[whole[0]] if whole else None,
                    id=f"{group['name'][:24]}|{text[:30]}",
                )
            )
    return params


@pytest.mark.parametrize(("text", "now", "tz", "want", "complete"), _dated_params())
def test_dated_reply_case(
    text: str, now: datetime | None, tz: str | None, want: dict[str, Any], complete: bool | None
) -> None:
    """Month-day forms need today: the same table through `parsed_reply(text, now, tz)`."""
    _strings_only(want, text)
    reply = parsed_reply(text, now, tz)
    got = reply.patch.model_dump(exclude_none=True)
    assert got == want, f"refused because: {analyse_reply(text, now, tz).reason}"
    if reply.complete:
        assert got, "a complete reply always carries something to merge"
    if complete is not None:
        assert reply.complete is complete, f"leftover: {analyse_reply(text, now, tz).leftover!r}"


@pytest.mark.parametrize(
    ("text", "marker"), [pytest.param(t, m, id=t[:30]) for t, m in _load("replies.yaml")["markers"]]
)
def test_recurrence_marker_case(text: str, marker: str | None) -> None:
    reply = parsed_reply(text)
    assert reply.recurrence_marker == marker
    if marker is not None:
        assert marker in text, "the marker is returned as written"
        assert reply.patch.is_empty(), "a recurrence is never a one-off patch"


def test_enough_replies_are_labelled_complete_or_partial() -> None:
    labels = [case[2] for case in _load("replies.yaml")["cases"] if len(case) > 2]
    assert labels.count("complete") >= 20
    assert labels.count("partial") >= 20


def test_there_are_enough_labelled_cases() -> None:
    symbols = sum(len(g["cases"]) for g in _load("symbols.yaml")["groups"])
    ranges = sum(len(g["cases"]) for g in _load("ranges.yaml")["groups"])
    replies = len(_load("replies.yaml")["cases"])
    dated = sum(len(g["cases"]) for g in _load("replies.yaml")["dated"])
    markers = _load("replies.yaml")["markers"]
    assert dated >= 100
    assert sum(m is not None for _, m in markers) >= 40
    assert sum(m is None for _, m in markers) >= 20
    assert symbols + ranges + replies >= 300
    assert replies >= 150
    assert symbols + ranges >= 150
