"""The pure rules that apply a held change (`payloads.HeldChange`): the event after the change as
the stub holds it, what the user asked to change, and how a series and its overrides take it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from calagent.commands.domain.model import Event
from calagent.commands.domain.payloads import OWN_FIELDS, AskedField, ChangeAfter
from calagent.commands.domain.series import MovedRule, move_rule, remaining_rule, wall, zone_of
from calagent.contracts.tools import Scope, UpdateSchedule


def exdates_before(exdates: tuple[datetime, ...], moment: datetime) -> tuple[datetime, ...]:
    return tuple(d for d in exdates if d < moment)


# The fields an update names directly; time parts and the organizer follow from them.
UPDATE_FIELDS: tuple[AskedField, ...] = (
    "title",
    "calendar",
    "reminder_minutes",
    "location",
    "notes",
    "attendees",
)


def asked_in(update: UpdateSchedule, current: Event) -> set[AskedField]:
    """What the user asked to change: only these reach a series' master and the occurrences that
    inherit them; anything else an occurrence shows stays where it is."""
    asked = {name for name in UPDATE_FIELDS if getattr(update, name) is not None}
    if "attendees" in asked:
        asked.add("organizer")  # the organizer is set with the people it invites
    if update.all_day is not None and update.all_day != current.all_day:
        asked |= {"all_day", "date", "time", "duration"}
    if update.date:
        asked.add("date")
    if update.time:
        asked.add("time")
    if update.end_time or update.duration_minutes or update.end_date:
        asked.add("duration")
    return asked


# The fields a change found between two versions of one event compares (people are left out: a
# sync conflict offers the user's edit of the event, never of whom it invites).
COMPARED_FIELDS: tuple[AskedField, ...] = ("title", "reminder_minutes", "location", "notes", "url")
TIME_PARTS: tuple[AskedField, ...] = ("date", "time", "duration")


def asked_between(base: Event | None, mine: Event, theirs: Event) -> set[AskedField]:
    """What an edit made of `base` to give `mine`: the fields it changed, and all its time parts
    when it moved or resized the event (the one edit is kept as one). Without a base (an object
    never delivered), what `mine` has that `theirs` has not — a field `mine` leaves empty is
    nothing it asked for."""
    if base is None:
        base = theirs.evolve(**{name: None for name in COMPARED_FIELDS if getattr(mine, name) in (None, "")})
    asked: set[AskedField] = {name for name in COMPARED_FIELDS if getattr(mine, name) != getattr(base, name)}
    if mine.all_day != base.all_day:
        asked.add("all_day")
    if (mine.start, mine.end, mine.all_day) != (base.start, base.end, base.all_day):
        asked.update(TIME_PARTS)
    return asked


def change_onto(theirs: Event, mine: Event, asked: set[AskedField]) -> ChangeAfter:
    """`mine`'s edit as a change of `theirs` (the other side's version): what was asked from
    `mine`, everything else as `theirs` has it — field by field, never the whole of `mine`."""
    moved = bool(asked & set(TIME_PARTS))
    picked = theirs.evolve(
        **{name: getattr(mine, name) for name in (*COMPARED_FIELDS, "all_day") if name in asked},
        **({"start": mine.start, "end": mine.end} if moved else {}),
    )
    return ChangeAfter.of(picked, asked)


def row_values(row: Event, after: ChangeAfter) -> dict[str, Any]:
    """One row's fields after a change (an event, or an occurrence that is a row of its own):
    what was asked, set on the row as it is now. A chat change is bound to the version it was
    made on, so the rest equals the row anyway; a change offered from outside (a sync conflict)
    lands on the server's version, keeping whatever the other side changed since."""
    asked = asked_of(after)
    values = {name: value for name, value in own_values(after).items() if name in asked}
    if asked & {"all_day", *TIME_PARTS}:
        values.update(start=after.start, end=after.end)
    return values


def asked_of(after: ChangeAfter) -> set[str]:
    # A change held before `asked` was recorded applies everything it shows, as it did then.
    if after.asked is not None:
        return set(after.asked)
    return {*OWN_FIELDS, "date", "time", "duration"}


def own_values(after: ChangeAfter) -> dict[str, Any]:
    """The fields the change sets, each as the stored payload has it (an absent one is kept)."""
    return {name: getattr(after, name) for name in OWN_FIELDS if after.given(name)}


def series_move(
    master: Event, slot: datetime, scope: Scope, after: ChangeAfter
) -> tuple[MovedRule, datetime]:
    """The rule moved by what the user asked, measured from the occurrence's original slot (never
    from a time it was moved to before), and the first slot it applies from."""
    assert master.rrule is not None
    tz = zone_of(master)
    asked = asked_of(after)
    first = master.start.astimezone(UTC)
    origin = first if scope == "all" or slot <= first else slot
    old = wall(slot, tz)
    new = wall(after.start, tz)
    moved_to = datetime.combine(
        new.date() if "date" in asked else old.date(), new.time() if "time" in asked else old.time()
    )
    rule = master.rrule
    if origin != first:
        rule = remaining_rule(rule, master.start, tz, origin)
    return move_rule(rule, origin, tz, moved_to - old), origin


def master_values(master: Event, after: ChangeAfter) -> dict[str, Any]:
    """The master's fields after the change: only what was asked, and its length."""
    asked = asked_of(after)
    values = {name: value for name, value in own_values(after).items() if name in asked}
    duration = master.end - master.start
    if "duration" in asked:
        duration = after.end - after.start
    values["duration"] = duration
    return values


def carry(override: Event, old: Event, new: Event, moved: MovedRule) -> Event:
    """An override after its series changed, field by field: a value equal to what the series gave
    its slot before is inherited and follows the series; a value of its own stays."""
    rid = override.recurrence_id
    assert rid is not None
    old_length, new_length = old.end - old.start, new.end - new.start
    start = moved.slot(rid) if override.start == rid else override.start
    length = new_length if override.end - override.start == old_length else override.end - override.start
    inherited = {
        name: getattr(new, name) for name in OWN_FIELDS if getattr(override, name) == getattr(old, name)
    }
    return override.evolve(start=start, end=start + length, **inherited)
