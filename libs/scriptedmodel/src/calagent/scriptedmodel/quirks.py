"""Speaking a script's answers in the style of a real endpoint (see `Quirks` in `script`)."""

from __future__ import annotations

import json
import re
from typing import Any

from calagent.scriptedmodel.script import Quirks

# Argument names whose values are date or range symbols in the agent's tool schemas.
DATE_FIELDS = frozenset({"date", "start", "end"})
_CN_WEEKDAYS = "一二三四五六日"
_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_NEXT_WEEKDAY = re.compile(r"^W([1-7])\+1$")
_DAYS = {"D": "today", "D+1": "tomorrow", "D+2": "the day after tomorrow"}


def natural_date(symbol: str) -> str:
    """A canonical date symbol as a person (or a model ignoring the schema's pattern) writes it."""
    if symbol in _DAYS:
        return _DAYS[symbol]
    iso = _ISO_DATE.match(symbol)
    if iso:
        return f"{iso.group(1)}/{int(iso.group(2))}/{int(iso.group(3))}"
    weekday = _NEXT_WEEKDAY.match(symbol)
    if weekday:
        return f"下周{_CN_WEEKDAYS[int(weekday.group(1)) - 1]}"
    return symbol


def almost_json(arguments: dict[str, Any]) -> str:
    """Python-ish JSON: single-quoted strings and a trailing comma."""

    def value(v: Any) -> str:
        if isinstance(v, str):
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if isinstance(v, dict):
            return almost_json(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + ",]" if v else "[]"
        return json.dumps(v)

    return "{" + ", ".join(f"'{k}': {value(v)}" for k, v in arguments.items()) + ",}"


def styled_arguments(arguments: str, quirks: Quirks) -> str:
    """The arguments string of one call in the quirks' style; verbatim strings that are not a JSON
    object stay as they are."""
    if not (quirks.natural_dates or quirks.almost_json):
        return arguments
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(parsed, dict):
        return arguments
    if quirks.natural_dates:
        parsed = {
            k: natural_date(v) if k in DATE_FIELDS and isinstance(v, str) else v for k, v in parsed.items()
        }
    return almost_json(parsed) if quirks.almost_json else json.dumps(parsed, ensure_ascii=False)


def call_as_text(name: str, arguments: str, quirks: Quirks) -> str:
    """One tool call written into the message text, as templates without a tool parser do."""
    body = f'{{"name": {json.dumps(name)}, "arguments": {arguments}}}'
    if quirks.tool_call_style == "tool_call_tag":
        return f"<tool_call>\n{body}\n</tool_call>"
    return f"```json\n{body}\n```"
