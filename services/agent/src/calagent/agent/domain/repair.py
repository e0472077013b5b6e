"""Tool calls as real models write them (contract §17), repaired only when the repair is
unambiguous; pure functions, the loop records every repair it applies.

- a call written into the text: `<tool_call>{"name": …, "arguments": {…}}</tool_call>` or a fenced
  JSON block whose object names one of the offered tools;
- arguments that are almost JSON: single-quoted strings, trailing commas, Python's
  `True`/`False`/`None`;
- a call without an id.

A natural date in a symbol field is repaired in the loop, by asking the time service (it is I/O).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

_TAGGED = re.compile(r"<tool_call>\s*(?P<body>.*?)\s*</tool_call>", re.DOTALL)
_FENCED = re.compile(r"```[ \t]*(?:json|tool_call|tool)?[ \t]*\n(?P<body>.*?)\n?[ \t]*```", re.DOTALL)
# What starts a call written into the text: streaming stops showing text once one appears.
TEXT_CALL_MARKERS = ("<tool_call", "```")
_PYTHON_WORDS = {"True": "true", "False": "false", "None": "null"}


@dataclass(frozen=True)
class TextCall:
    name: str
    arguments: str  # JSON text of an object
    almost_json: bool = False  # the block needed the almost-JSON repairs to be read


def loads_lenient(raw: str) -> tuple[dict[str, Any], bool] | None:
    """The JSON object in `raw` and whether it needed repairing; None when it is not one even
    after the repairs (then the call's error goes back to the model)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        pass
    else:
        return (value, False) if isinstance(value, dict) else None
    fixed = _relaxed_to_json(raw)
    if fixed is None:
        return None
    try:
        value = json.loads(fixed)
    except ValueError:
        return None
    return (value, True) if isinstance(value, dict) else None


def _relaxed_to_json(raw: str) -> str | None:
    """Single-quoted strings become double-quoted, a comma before `}` or `]` goes, bare
    `True`/`False`/`None` become JSON's words; everything inside strings is left alone."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch in "\"'":
            quote, j, chars = ch, i + 1, []
            while j < n and raw[j] != quote:
                if raw[j] == "\\" and j + 1 < n:
                    nxt = raw[j + 1]
                    # \' means a quote inside a single-quoted string; other escapes keep their JSON form.
                    chars.append("'" if nxt == "'" else raw[j : j + 2])
                    j += 2
                    continue
                chars.append('\\"' if raw[j] == '"' else raw[j])
                j += 1
            if j >= n:
                return None  # an unterminated string: not repairable without guessing
            out.append('"' + "".join(chars) + '"')
            i = j + 1
            continue
        if ch == ",":
            k = i + 1
            while k < n and raw[k].isspace():
                k += 1
            if k < n and raw[k] in "}]":
                i += 1
                continue
        if ch.isalpha():
            k = i
            while k < n and (raw[k].isalnum() or raw[k] == "_"):
                k += 1
            word = raw[i:k]
            out.append(_PYTHON_WORDS.get(word, word))
            i = k
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _call_from_block(body: str, tool_names: Collection[str]) -> TextCall | None:
    parsed = loads_lenient(body)
    if parsed is None:
        return None
    obj, repaired = parsed
    if isinstance(obj.get("function"), dict):  # {"type": "function", "function": {...}}
        obj = obj["function"]
    name = obj.get("name")
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        inner = loads_lenient(arguments)
        if inner is None:
            return None
        arguments, inner_repaired = inner
        repaired = repaired or inner_repaired
    if not isinstance(name, str) or name not in tool_names or not isinstance(arguments, dict):
        return None
    return TextCall(name, json.dumps(arguments, ensure_ascii=False), repaired)


def calls_in_text(text: str, tool_names: Collection[str]) -> tuple[list[TextCall], str]:
    """Tool calls written into `text`, in order, and the text without them. A block that does not
    parse or names no offered tool is not a call: it stays in the text."""
    found: list[tuple[int, int, TextCall]] = []
    for pattern in (_TAGGED, _FENCED):
        for match in pattern.finditer(text):
            if any(start <= match.start() < end for start, end, _ in found):
                continue
            call = _call_from_block(match.group("body"), tool_names)
            if call is not None:
                found.append((match.start(), match.end(), call))
    if not found:
        return [], text
    found.sort(key=lambda item: item[0])
    rest, last = [], 0
    for start, end, _ in found:
        rest.append(text[last:start])
        last = end
    rest.append(text[last:])
    return [call for _, _, call in found], "".join(rest).strip()
