"""How stored values are shown on the wire: events, stubs and logged changes in the user's zone.
One conversion per shape, used by commands and queries alike (the iCalendar text of stored rows
is `ical.render`'s)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from calagent.commands.domain.changelog import LoggedChange, Snapshot, event_of
from calagent.commands.domain.model import Event, Stub, local_uid, resource_of
from calagent.commands.domain.payloads import (
    HeldBooking,
    HeldChange,
    HeldInvitation,
    HeldPlan,
    HeldProposal,
    HeldReplan,
    HeldTaskChange,
)
from calagent.commands.domain.people import normal_address
from calagent.commands.domain.series import InvalidRecurrenceError, next_starts
from calagent.contracts.commands import ChangedRow, EventOut, LoggedChangeOut, StubOut
from calagent.contracts.people import CounterOut, InvitationOut, ProposalOut, ProposedSlot

PLAN_PREVIEW = 3  # occurrences a repeating create shows before it is confirmed


def event_out(event: Event, tz: ZoneInfo) -> EventOut:
    start = event.start.astimezone(tz)
    return EventOut(
        id=event.id,
        title=event.title,
        start=start,
        end=event.end.astimezone(tz),
        all_day=event.all_day,
        calendar=event.calendar,
        completed=event.completed,
        weekday=start.isoweekday(),
        tz=tz.key,
        series_id=event.series_id,
        occurrence_start=event.occurrence_start.astimezone(tz) if event.occurrence_start else None,
        recurrence=event.rrule,
        reminder_minutes=event.reminder_minutes,
        sync_state=event.sync_state,
        uid=event.uid or local_uid(resource_of(event)),
        location=event.location,
        notes=event.notes,
        url=event.url,
        attendees=event.attendees,
        organizer=event.organizer,
        foreign_calendar=event.foreign_calendar,
        outside_text=event.outside_text,
        kind="task_block" if event.task_id is not None else "event",
        task_id=event.task_id,
    )


Shown = TypeVar("Shown", bound=BaseModel)


def organizers_named(shown: BaseModel) -> bool:
    """Whether anything `shown` names an event with an organizer (then `with_organizers` needs
    the user's addresses)."""
    named = False

    def see(event: EventOut) -> EventOut:
        nonlocal named
        named = named or event.organizer is not None
        return event

    _each_event(shown, see)
    return named


def with_organizers(shown: Shown, own: frozenset[str]) -> Shown:
    """`shown` (a result) with every event in it saying whether the user organizes it (`own`: the
    user's addresses, `reads.own_addresses`): said once here, where the addresses are kept, so the
    agent need not ask for them to tell whose words an event is (contract §19)."""

    def mark(event: EventOut) -> EventOut:
        organized = event.organizer is not None and normal_address(event.organizer) in own
        return event.model_copy(update={"organized_by_user": organized}) if event.organizer else event

    marked = _each_event(shown, mark)
    assert isinstance(marked, type(shown))
    return marked


def _each_event(value: object, mark: Callable[[EventOut], EventOut]) -> object:
    """`value` with `mark` applied to every event in it, however deep (a stub's change, the events
    it meets, a notice's event); what holds no event is returned as it is."""
    if isinstance(value, EventOut):
        return mark(value)
    if isinstance(value, BaseModel):
        changed = {}
        for name in type(value).model_fields:
            before = getattr(value, name)
            after = _each_event(before, mark)
            if after is not before:
                changed[name] = after
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, tuple | list):
        items = [_each_event(item, mark) for item in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return tuple(items) if isinstance(value, tuple) else items
    return value


def _logged_event(snapshot: Snapshot | None, tz: ZoneInfo) -> EventOut | None:
    return event_out(event_of(snapshot), tz) if snapshot is not None else None


def change_out(change: LoggedChange, tz: ZoneInfo) -> LoggedChangeOut:
    primary = change.primary
    shown = primary.after or primary.before
    return LoggedChangeOut.model_validate(
        {
            "id": change.id,
            "at": change.at.astimezone(tz),
            "source": change.source,
            "kind": change.kind,
            "event_id": primary.event_id,
            "uid": event_of(shown).uid if shown is not None else None,
            "scope": change.scope,
            "before": _logged_event(primary.before, tz),
            "after": _logged_event(primary.after, tz),
            "turn_id": change.turn_id,
            "undone_by": change.undone_by,
            "undoes": change.undoes,
            "rows": tuple(
                ChangedRow(
                    event_id=r.event_id, before=_logged_event(r.before, tz), after=_logged_event(r.after, tz)
                )
                for r in change.rows
            ),
        }
    )


def _next_occurrences(stub: Stub, tz: ZoneInfo) -> tuple[datetime, ...]:
    if not stub.slots.recurrence or stub.proposed_start is None:
        return ()
    try:
        found = next_starts(stub.slots.recurrence, stub.proposed_start, tz, stub.proposed_start, PLAN_PREVIEW)
    except InvalidRecurrenceError:
        return ()
    return tuple(found)


def stub_out(stub: Stub, conflicts: Sequence[Event], tz: ZoneInfo) -> StubOut:
    payload = stub.payload
    return StubOut(
        id=stub.id,
        status=stub.status,
        title=stub.title,
        slots=stub.slots,
        candidates=stub.candidates,
        conflicts_with=tuple(event_out(ev, tz) for ev in conflicts),
        hold_reason=stub.hold_reason if stub.status == "held" else None,
        proposed_start=stub.proposed_start.astimezone(tz) if stub.proposed_start else None,
        proposed_end=stub.proposed_end.astimezone(tz) if stub.proposed_end else None,
        expires_at=stub.expires_at.astimezone(tz),
        kind=stub.kind,
        change=payload.view if isinstance(payload, HeldChange) else None,
        plan=payload.plan if isinstance(payload, HeldPlan) else None,
        next_occurrences=_next_occurrences(stub, tz),
        attendee_query=stub.attendee_query,
        attendee_candidates=stub.attendee_candidates,
        recipients=stub.recipients,
        invitation=payload.invitation if isinstance(payload, HeldInvitation) else None,
        counter=_counter_in_zone(payload.counter, tz)
        if isinstance(payload, HeldChange) and payload.counter is not None
        else None,
        proposal=_proposal_in_zone(payload.proposal, tz)
        if isinstance(payload, HeldProposal | HeldBooking)
        else None,
        event_candidates=payload.candidates if isinstance(payload, HeldChange) else (),
        replan=payload.replan if isinstance(payload, HeldReplan) else None,
        task_change=payload.change if isinstance(payload, HeldTaskChange) else None,
    )


def _proposal_in_zone(proposal: ProposalOut, tz: ZoneInfo) -> ProposalOut:
    slots = tuple(
        ProposedSlot(start=slot.start.astimezone(tz), end=slot.end.astimezone(tz)) for slot in proposal.slots
    )
    return proposal.model_copy(update={"slots": slots})


def _counter_in_zone(counter: CounterOut, tz: ZoneInfo) -> CounterOut:
    return counter.model_copy(
        update={"start": counter.start.astimezone(tz), "end": counter.end.astimezone(tz)}
    )


def in_zone(invitation: InvitationOut, tz: ZoneInfo) -> InvitationOut:
    """An invitation as its offer shows it: its times in the user's zone."""
    return invitation.model_copy(
        update={"start": invitation.start.astimezone(tz), "end": invitation.end.astimezone(tz)}
    )
