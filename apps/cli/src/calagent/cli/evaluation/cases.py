"""The case format (one YAML file per group under `tests/eval/cases/`).

A case says what the user typed, turn by turn, and what must be true afterwards: which tools ran
(names and arguments after symbol resolution), the outcome, the post-hoc intent, the facts in the
database. `model` / `script` say what the scripted model answers in the offline eval; the live eval
ignores them and judges what the configured model really did.

A case is data, never code: a typo in a key fails loudly at load time (`extra="forbid"`), so an
expectation cannot silently stop being checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from calagent.contracts.settings import DEFAULT_ZONE
from calagent.scriptedmodel import Quirks, Response, Rule, Script

Mode = Literal["offline", "live"]

# Provider styles a case can be spoken in by the scripted model (`styles:`): the habits of real
# endpoints (contract §17). A case with styles runs once per style, under the same expectations,
# so every style must reach the clean style's outcome.
STYLES: dict[str, Quirks] = {
    "clean": Quirks(),
    "hermes_text": Quirks(tool_call_style="tool_call_tag"),
    "fenced_json": Quirks(tool_call_style="fenced_json"),
    "almost_json": Quirks(almost_json=True),
    "no_call_ids": Quirks(omit_call_ids=True),
    "natural_dates": Quirks(natural_dates=True),
    "no_usage": Quirks(omit_usage=True),
    "local_server": Quirks(tool_call_style="tool_call_tag", almost_json=True, omit_usage=True),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EventSpec(_Strict):
    """An event the case starts with, created through the stack like any other."""

    title: str
    date: str
    time: str | None = None
    end_time: str | None = None
    duration_minutes: int | None = None
    all_day: bool | None = None
    calendar: str | None = None
    # A series: held as a plan like any repeating create, and confirmed by setup.
    recurrence: str | None = None

    def arguments(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class ExpectedEvent(_Strict):
    """One event that must exist. `start` is `SYMBOL [HH:MM]` in the case's zone (e.g. `D+1 15:00`,
    `2026-09-27 14:00`, `D+5`), resolved by the same resolver the time service uses."""

    title: str | None = None
    start: str | None = None
    calendar: str | None = None
    all_day: bool | None = None


class EventsAfter(_Strict):
    count: int | None = None
    include: list[ExpectedEvent] = Field(default_factory=list)
    exclude_titles: list[str] = Field(default_factory=list)


class Ambiguity(_Strict):
    """A case of the ambiguity set (contract §20): how many events match the user's words, and the
    ones the right change alters (its occurrences, for a series change from one on). After every
    turn the calendar is compared with the one setup left: nothing changed is `asked`, exactly the
    meant ones changed is `right`, anything else `wrong` — which fails the case."""

    matches: int = Field(ge=0, le=3)
    meant: list[ExpectedEvent] = Field(default_factory=list)


class Expect(_Strict):
    # Names of the tool calls that ran (errors, refusals and skipped calls left out, so a model that
    # corrects itself is judged by what it finally did); `merge_stub` is the code fast path.
    tools: list[str] | None = None
    # Every call's result, in order, errors included: `["error:invalid_arguments", "created"]`.
    tool_results: list[str] | None = None
    # Per tool, a subset of its arguments (the last successful call of that tool), compared after
    # resolution: dates and range ends by the day/instant they name, free text by containment.
    arguments: dict[str, dict[str, Any]] | None = None
    outcome: str | list[str] | None = None
    intent: str | list[str] | None = None
    model_calls: int | None = None
    events_after: EventsAfter | None = None
    # null: no active stub after the turn; omitted: not checked.
    stub_status_after: str | None = None
    flags: list[str] | None = None
    flags_absent: list[str] | None = None
    reply_contains: list[str] | None = None
    reply_excludes: list[str] | None = None
    # The answer is identical to the previous turn's (a retried client_message_id).
    same_as_previous: bool | None = None
    # The active stub's candidate days after the turn (ISO dates).
    candidates: list[str] | None = None
    # How many events the active stub asks the user to choose among after the turn (contract §20;
    # 0: it asks no such thing).
    event_candidates: int | None = None
    # Offline only: text that must (not) reach the model in this turn's requests, e.g. an old
    # session segment that must stay out of the prompt.
    prompt_includes: list[str] | None = None
    prompt_excludes: list[str] | None = None

    def merged(self, override: Expect | None) -> Expect:
        if override is None:
            return self
        values = self.model_dump(exclude_unset=True)
        values.update(override.model_dump(exclude_unset=True))
        return Expect.model_validate(values)

    def given(self, name: str) -> bool:
        return name in self.model_fields_set


class Step(_Strict):
    """One scripted model response, in order within the turn: text, one tool call, several tool
    calls in one response, or an HTTP error."""

    text: str | None = None
    tool: str | None = None
    args: dict[str, Any] | str = Field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None
    error: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Step:
        kinds = [self.text is not None, self.tool is not None, self.tools is not None, self.error is not None]
        if sum(kinds) != 1:
            raise ValueError("a model step is exactly one of text, tool, tools or error")
        return self

    def rule(self) -> Rule:
        respond: dict[str, Any]
        if self.text is not None:
            respond = {"text": self.text}
        elif self.tool is not None:
            respond = {"tool_calls": [{"name": self.tool, "arguments": self.args}]}
        elif self.tools is not None:
            respond = {"tool_calls": self.tools}
        else:
            respond = {"error": self.error}
        # `times: 1` in order: the n-th model call of the turn gets the n-th step.
        return Rule.model_validate({"respond": respond, "times": 1})


class Turn(_Strict):
    user: str
    channel: str | None = None
    client_message_id: str | None = None
    conversation_id: str | None = None
    use_active_command: bool = False
    # Send the same request this many times at once (idempotency under concurrent retries).
    concurrent: int = Field(default=1, ge=1, le=10)
    advance_minutes: int | None = None
    model_down: bool = False
    model: list[Step] | None = None
    script: Script | None = None
    default_text: str = "好的。"
    # The provider style the scripted model speaks in (set per expansion of a case's `styles`).
    quirks: Quirks = Field(default_factory=Quirks)
    expect: Expect = Field(default_factory=Expect)
    offline_expect: Expect | None = None
    live_expect: Expect | None = None

    def scripted(self) -> Script:
        """The offline model for this turn: explicit rules first, then the ordered steps."""
        rules: list[Rule] = list(self.script.rules) if self.script is not None else []
        rules += [step.rule() for step in self.model or []]
        default = self.script.default if self.script is not None else Response(text=self.default_text)
        return Script(rules=rules, default=default, quirks=self.quirks)

    def expectation(self, mode: Mode) -> Expect:
        return self.expect.merged(self.offline_expect if mode == "offline" else self.live_expect)


def _both_modes() -> list[Mode]:
    return ["offline", "live"]


class Case(_Strict):
    id: str
    group: str
    description: str = ""
    now: str | None = None
    tz: str = DEFAULT_ZONE
    safety: bool = False
    known_issue: str | None = None
    read_only: bool = False
    modes: list[Mode] = Field(default_factory=_both_modes)
    setup: list[EventSpec] = Field(default_factory=list)
    turns: list[Turn] = Field(min_length=1)
    # Left by `calagent report --cases` to trace a case back to the turn it came from.
    source_turn_id: str | None = None
    reasons: list[str] = Field(default_factory=list)
    styles: list[str] = Field(default_factory=list)
    ambiguity: Ambiguity | None = None

    @field_validator("styles")
    @classmethod
    def _known_styles(cls, value: list[str]) -> list[str]:
        unknown = [s for s in value if s not in STYLES]
        if unknown:
            raise ValueError(f"unknown styles {unknown}; known: {sorted(STYLES)}")
        return value

    def in_styles(self) -> list[Case]:
        """One case per provider style (`<id>@<style>`), or the case itself when it names none."""
        if not self.styles:
            return [self]
        return [
            self.model_copy(
                update={
                    "id": f"{self.id}@{style}",
                    "styles": [],
                    "turns": [t.model_copy(update={"quirks": STYLES[style]}) for t in self.turns],
                }
            )
            for style in self.styles
        ]

    @field_validator("now")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is not None:
            from datetime import datetime

            parsed = datetime.fromisoformat(value)
            if parsed.tzinfo is None:
                raise ValueError("now needs a UTC offset")
        return value

    @property
    def exclusive(self) -> bool:
        """Moves the shared frozen clock, so it cannot run beside other cases."""
        return self.now is not None or any(t.advance_minutes for t in self.turns)


class CaseError(ValueError):
    pass


def _find_todo(value: Any, where: str) -> None:
    if isinstance(value, str) and value.strip().upper().startswith("TODO"):
        raise CaseError(f"{where}: still TODO")
    if isinstance(value, dict):
        for k, v in value.items():
            _find_todo(v, f"{where}.{k}")
    if isinstance(value, list):
        for i, v in enumerate(value):
            _find_todo(v, f"{where}[{i}]")


def parse_cases(text: str, source: str, default_group: str) -> list[Case]:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise CaseError(f"{source}: not valid YAML: {exc}") from exc
    raw = data.get("cases") if isinstance(data, dict) else data
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise CaseError(f"{source}: expected a list under `cases`")
    group = data.get("group", default_group) if isinstance(data, dict) else default_group
    cases: list[Case] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise CaseError(f"{source}[{index}]: a case is a mapping")
        where = f"{source}:{item.get('id', index)}"
        _find_todo(item, where)
        item = {"group": group, **item}
        # A skeleton from `calagent report --cases` leaves `now: ""` when the turn time is unknown.
        if item.get("now") in ("", None):
            item.pop("now", None)
        try:
            cases += Case.model_validate(item).in_styles()
        except ValidationError as exc:
            raise CaseError(f"{where}: {exc}") from exc
    return cases


def load_cases(directory: str | Path, group: str | None = None) -> list[Case]:
    root = Path(directory)
    if not root.is_dir():
        raise CaseError(f"no case directory {root}")
    cases: list[Case] = []
    for path in sorted([*root.glob("*.yaml"), *root.glob("*.yml")]):
        cases += parse_cases(path.read_text(encoding="utf-8"), path.name, path.stem)
    ids = [c.id for c in cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise CaseError(f"duplicate case ids: {', '.join(duplicates)}")
    if group is not None:
        cases = [c for c in cases if c.group == group]
    return cases


def default_cases_dir() -> Path:
    """`tests/eval/cases` of the checkout: from the working directory up, then from this file up."""
    starts = [Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents]
    for start in starts:
        candidate = start / "tests" / "eval" / "cases"
        if candidate.is_dir():
            return candidate
    raise CaseError("cannot find tests/eval/cases; pass --cases-dir")
