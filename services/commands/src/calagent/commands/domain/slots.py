"""Slot merging for a clarification: stub slots, then the model's slots, then the short-reply patch.

The patch is applied last because in this narrow "short reply fills a slot" case the parser, once it
extracts something, is more reliable than the model (contract §7, architecture invariant 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from calagent.commands.domain.timeutil import parse_hhmm
from calagent.contracts.commands import StubSlots
from calagent.contracts.time import SlotPatch
from calagent.contracts.tools import PrepareOrCreateSchedule


def slots_from_args(args: PrepareOrCreateSchedule) -> StubSlots:
    """The slots a create names: every field of the tool's arguments the stub keeps, by name."""
    return StubSlots.model_validate(args.model_dump(include=set(StubSlots.model_fields)))


def _minutes(value: str) -> int | None:
    try:
        parsed = parse_hhmm(value)
    except ValueError:
        return None
    return parsed.hour * 60 + parsed.minute


def _with_layer(base: StubSlots, layer: dict[str, object]) -> StubSlots:
    """Lay non-empty `layer` values over `base`.

    A layer that moves the start without naming an end keeps the length the user already gave
    ("改到四点" after 14:00–15:00 means 16:00–17:00, not 16:00 until 15:00 the next day).
    """
    merged = base.model_dump()
    if "time" in layer and "end_time" not in layer and base.time and base.end_time:
        old_start, old_end = _minutes(base.time), _minutes(base.end_time)
        if old_start is not None and old_end is not None:
            merged["duration_minutes"] = (old_end - old_start) % (24 * 60) or 24 * 60
            merged["end_time"] = None
    merged.update(layer)
    return StubSlots.model_validate(merged)


class UnplacedWeekdayError(ValueError):
    """A patch's weekday picks none of the stub's candidates: which day it means is not the
    merge's to guess, and dropping it would write the day the user just declined."""


def merge_slots(
    stub_slots: StubSlots,
    model: StubSlots | None,
    patch: SlotPatch | None,
    candidates: Sequence[date] = (),
) -> StubSlots:
    """stub < model < patch. `patch.weekday` picks one of the stub's candidate days; `patch.date`
    beats it. A weekday with no candidate of that weekday raises `UnplacedWeekdayError`: a day the
    user names is never dropped (contract §14); whoever built the patch places it as a date."""
    merged = stub_slots
    if model is not None:
        merged = _with_layer(merged, model.model_dump(exclude_none=True))
    if patch is not None:
        layer: dict[str, object] = {}
        if patch.date:
            layer["date"] = patch.date
        elif patch.weekday is not None:
            picked = [d for d in candidates if d.isoweekday() == patch.weekday]
            if not picked:
                raise UnplacedWeekdayError(f"no candidate day falls on weekday {patch.weekday}")
            layer["date"] = picked[0].isoformat()
        if patch.time:
            layer["time"] = patch.time
        if patch.end_time:
            layer["end_time"] = patch.end_time
        merged = _with_layer(merged, layer)
    return merged
