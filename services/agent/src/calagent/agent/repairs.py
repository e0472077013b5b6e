"""What the runtime repairs in a model's response before running it, each repair recorded: calls
written into the text, almost-JSON arguments, missing ids, and natural dates in symbol fields."""

from __future__ import annotations

import json
from collections.abc import Collection

from pydantic import ValidationError

from calagent.agent.adapters.model import ModelResponse, ModelToolCall
from calagent.agent.domain.repair import calls_in_text, loads_lenient
from calagent.agent.ports import TimePort
from calagent.agent.state import TurnState
from calagent.contracts.tools import ToolArgs
from calagent.runtime.bus import BusRequestError

# Fields whose schema asks for a date or range symbol: a natural date written there is resolved by
# the time service when it gives exactly one answer (contract §17).
SYMBOL_FIELDS = frozenset({"date", "end_date", "start", "end"})


def repaired_calls(
    state: TurnState, response: ModelResponse, tool_names: Collection[str]
) -> tuple[list[ModelToolCall], str]:
    """The response's tool calls as the runtime runs them, each repair recorded: calls written
    into the text, almost-JSON arguments, missing ids."""
    calls, text = list(response.tool_calls), response.text
    if not calls and text:
        found, rest = calls_in_text(text, tool_names)
        if found:
            state.repaired("text_tool_call")
            if any(c.almost_json for c in found):
                state.repaired("almost_json")
            calls = [ModelToolCall(id="", name=c.name, arguments=c.arguments) for c in found]
            text = rest
    out: list[ModelToolCall] = []
    for index, call in enumerate(calls):
        arguments = call.arguments
        parsed = loads_lenient(arguments)
        if parsed is not None and parsed[1]:
            state.repaired("almost_json")
            arguments = json.dumps(parsed[0], ensure_ascii=False)
        call_id = call.id
        if not call_id:
            if response.tool_calls:  # a call written into the text never had an id
                state.repaired("missing_call_id")
            # Unique within the turn: the model sees each result under its own call's id.
            call_id = f"call_{state.model_calls}_{index}"
        out.append(ModelToolCall(id=call_id, name=call.name, arguments=arguments))
    return out, text


async def natural_dates(
    state: TurnState, time: TimePort, model: type[ToolArgs], call: ModelToolCall, exc: ValidationError
) -> ToolArgs | None:
    """The arguments with each natural date in a symbol field replaced by the time service's
    symbol, when every such field has exactly one reading and nothing else was wrong."""
    try:
        data = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    fields: list[str] = []
    for error in exc.errors():
        loc = error["loc"]
        field = loc[0] if len(loc) == 1 else None
        value = data.get(field) if isinstance(field, str) else None
        if (
            error["type"] != "string_pattern_mismatch"
            or field not in SYMBOL_FIELDS
            or not isinstance(value, str)
        ):
            return None
        assert isinstance(field, str)
        try:
            parsed = await time.parse_reply(value, state.env.occurred_at, state.env.tz)
        except BusRequestError:
            return None  # no reading today: the model gets the structured error instead
        patch = parsed.patch.model_dump(exclude_none=True)
        symbol = patch.get("date")
        # One reading or none: a weekend is two days, a bare weekday or a time is not a date.
        if (
            not parsed.complete
            or set(patch) != {"date"}
            or not isinstance(symbol, str)
            or symbol.startswith("WE")
        ):
            return None
        data[field] = symbol
        fields.append(field)
    try:
        args = model.model_validate(data)
    except ValidationError:
        return None
    for field in fields:
        state.repaired(f"natural_date:{field}")
    return args
