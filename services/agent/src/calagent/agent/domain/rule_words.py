"""An RRULE of the contract's subset, said in words in the user's language.

The user confirms a series from this sentence and the next occurrences, so it must say exactly what
the rule says; a rule part it cannot phrase is shown raw rather than guessed.
"""

from __future__ import annotations

from calagent.contracts.display import WEEKDAYS_EN, WEEKDAYS_ZH, Lang

_DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_UNIT_ZH = {"DAILY": "天", "WEEKLY": "周", "MONTHLY": "个月", "YEARLY": "年"}
_UNIT_EN = {
    "DAILY": ("day", "days"),
    "WEEKLY": ("week", "weeks"),
    "MONTHLY": ("month", "months"),
    "YEARLY": ("year", "years"),
}
_ORDINAL_ZH = {1: "第一个", 2: "第二个", 3: "第三个", 4: "第四个", 5: "第五个", -1: "最后一个"}
_ORDINAL_EN = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", -1: "last"}


def _parts(rule: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in rule.removeprefix("RRULE:").split(";"):
        key, _, value = part.partition("=")
        if key:
            out[key.upper()] = value.upper()
    return out


def _day(code: str, lang: Lang) -> str | None:
    ordinal = code[:-2]
    index = _DAYS.index(code[-2:]) if code[-2:] in _DAYS else -1
    if index < 0:
        return None
    name = (WEEKDAYS_ZH if lang == "zh" else WEEKDAYS_EN)[index]
    if not ordinal:
        return name
    try:
        n = int(ordinal)
    except ValueError:
        return None
    if lang == "zh":
        return f"{_ORDINAL_ZH.get(n, str(n))}{name}"
    return f"the {_ORDINAL_EN.get(n, str(n))} {name}"


def _until(value: str, lang: Lang) -> str:
    y, m, d = value[:4], value[4:6], value[6:8]
    return f"{int(y)}年{int(m)}月{int(d)}日" if lang == "zh" else f"{y}-{m}-{d}"


def describe_rule(rule: str, lang: Lang) -> str:
    parts = _parts(rule)
    freq = parts.get("FREQ", "")
    if freq not in _UNIT_ZH:
        return rule
    interval = int(parts.get("INTERVAL", "1") or "1")
    days = [_day(c, lang) for c in parts["BYDAY"].split(",")] if "BYDAY" in parts else []
    if any(d is None for d in days):
        return rule
    names = [d for d in days if d is not None]
    monthdays = parts.get("BYMONTHDAY", "")
    if lang == "zh":
        text = f"每{interval if interval > 1 else ''}{_UNIT_ZH[freq]}"
        if freq == "DAILY" and interval == 1:
            text = "每天"
        if names:
            workdays = set(parts["BYDAY"].split(",")) == {"MO", "TU", "WE", "TH", "FR"}
            if freq == "WEEKLY" and interval == 1:
                text = "每个工作日" if workdays else "每" + "、".join(names)
            else:
                text += "的工作日" if workdays else "的" + "、".join(names)
        if monthdays:
            text += "的" + "、".join("最后一天" if d == "-1" else f"{d}号" for d in monthdays.split(","))
        if "COUNT" in parts:
            text += f"，共 {int(parts['COUNT'])} 次"
        if "UNTIL" in parts:
            text += f"，到 {_until(parts['UNTIL'], lang)} 为止"
        return text
    one, many = _UNIT_EN[freq]
    text = f"every {one}" if interval == 1 else f"every {interval} {many}"
    if freq == "DAILY" and interval == 1:
        text = "every day"
    if names:
        text += " on " + ", ".join(names)
    if monthdays:
        text += " on day " + ", ".join("last" if d == "-1" else d for d in monthdays.split(","))
    if "COUNT" in parts:
        text += f", {int(parts['COUNT'])} times"
    if "UNTIL" in parts:
        text += f", until {_until(parts['UNTIL'], lang)}"
    return text
