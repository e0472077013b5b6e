"""Changing what is already on the calendar: update and delete (always held for the user's word),
series edits with their scope, and automation plans (offers that never run by themselves).

A change is prepared into a stub of kind `change` that carries the event before and after (or the
occurrences that will go); nothing is touched until `confirm` runs it. The target is looked up by
the caller's id only: another user's id is answered exactly like one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from calagent.commands.domain.changes import (
    asked_in,
    series_move,
)
from calagent.commands.domain.model import Event, Stub
from calagent.commands.domain.payloads import ChangeAfter, HeldChange
from calagent.commands.domain.pending import Ask, decide, shown_conflicts
from calagent.commands.domain.people import Unresolved
from calagent.commands.domain.proposals import Proposal
from calagent.commands.domain.series import (
    InexpressibleChangeError,
    expand,
    live_count,
)
from calagent.commands.domain.timeutil import at_local, local_days, parse_hhmm, whole_days
from calagent.commands.pending import Pending
from calagent.commands.people.attendees import AttendeeRules
from calagent.commands.placing import Placing
from calagent.commands.targets import (
    Target,
    delete_target,
    find,
    read_back,
    stored_target,
    update_target,
)
from calagent.commands.txn import Txn, error_result
from calagent.commands.views import event_out, stub_out
from calagent.contracts.commands import (
    ActiveStubStatus,
    ChangeOut,
    CommandResult,
    EventCandidate,
    PrepareChange,
    StubSlots,
)
from calagent.contracts.people import Attendee
from calagent.contracts.tools import Scope, UpdateSchedule

REMOVED_PREVIEW = 5  # starts a series delete lists before "and N more"
NOT_FOUND = "no event with that id"


@dataclass(frozen=True)
class ChangeOffer:
    """What confirming a change would do, as the offer shows it."""

    view: ChangeOut
    after: ChangeAfter | None  # an update's values (None: a delete)
    proposal: Proposal | None  # where an update puts the occurrence
    conflicts: tuple[Event, ...]
    recipients: tuple[Attendee, ...]  # whom confirming mails


@dataclass(frozen=True)
class Asked:
    """What a change's stub asks the user, and the events its offer meets."""

    status: ActiveStubStatus
    ask: Ask
    conflicts: tuple[Event, ...] = ()


class Changes:
    def __init__(self, pending: Pending, placing: Placing, people: AttendeeRules) -> None:
        self.pending = pending
        self.placing = placing
        self.people = people

    # ---- prepare: show before and after, hold ---------------------------------------------------

    async def prepare(self, txn: Txn, command: PrepareChange) -> CommandResult:
        target = await find(txn, command.event_id)
        if target is None:
            return error_result("not_found", NOT_FOUND)
        active = await self.pending.active(txn)
        candidates = await self._candidates(txn, command, target, active)
        way = await self.pending.make_way(txn, command.hold, active)
        if way.kept is not None:
            return CommandResult(status="held", kept=stub_out(way.kept, (), txn.tz))
        asked = await self._ask(txn, command, target, candidates)
        if isinstance(asked, CommandResult):
            return asked
        stub = await self.pending.open(txn, asked.status, asked.ask, kind="change")
        return CommandResult(
            status=asked.status,
            stub=stub_out(stub, asked.conflicts, txn.tz),
            superseded=way.superseded,
        )

    async def pick(self, txn: Txn, stub: Stub, command: PrepareChange) -> CommandResult:
        """The user singled out one of the events the change asked about (contract §20): the same
        stub now offers the change for that event, and asks for the user's word as any change does."""
        target = await find(txn, command.event_id)
        if target is None:
            return error_result("not_found", NOT_FOUND)
        asked = await self._ask(txn, command, target, ())
        if isinstance(asked, CommandResult):
            return asked
        stored = await self.pending.store(txn, self.pending.of(stub).ask(asked.status, asked.ask, txn.now))
        return CommandResult(status=asked.status, stub=stub_out(stored, asked.conflicts, txn.tz))

    async def _candidates(
        self, txn: Txn, command: PrepareChange, target: Target, active: Stub | None
    ) -> tuple[EventCandidate, ...]:
        """The events the change may be about, the one it names first: those the find it was chosen
        from listed for the same words — or, when no find listed it and it names one the user is
        still being asked about, those (the choice is the user's, not the model's). Occurrences of
        one series count once for a change of the whole series. Fewer than two: none to choose
        among."""
        ids = command.candidates
        if not ids and active is not None:
            pending = self.pending.of(active)
            if pending.picks(command.event_id) and isinstance(active.payload, HeldChange):
                ids = tuple(c.event_id for c in active.payload.candidates)
        scope: Scope = command.scope if target.master is not None else "this"
        found: list[EventCandidate] = []
        seen: set[str] = set()
        for event_id in (command.event_id, *ids):
            each = target if event_id == command.event_id else await find(txn, event_id)
            if each is None:
                continue  # not the caller's, or gone: never offered
            key = each.master.id if each.master is not None and scope == "all" else event_id
            if key in seen:
                continue
            seen.add(key)
            shown = event_out(each.occurrence, txn.tz)
            found.append(
                EventCandidate(
                    event_id=event_id,
                    title=shown.title,
                    start=shown.start,
                    end=shown.end,
                    calendar=shown.calendar,
                    all_day=shown.all_day,
                )
            )
        return tuple(found) if len(found) > 1 else ()

    async def _ask(
        self, txn: Txn, command: PrepareChange, target: Target, candidates: tuple[EventCandidate, ...]
    ) -> Asked | CommandResult:
        """What the change's stub asks: the offer (before and after, or what goes) held for the
        user's word, or the person an update names that no contact matches."""
        scope: Scope = command.scope if target.master is not None else "this"
        recipients = await self.people.invited(txn, target.row, target.master)
        if command.action == "update":
            offer = await self._update_offer(txn, target, scope, command.update, recipients)
        else:
            offer = await self._delete_offer(txn, target, scope, recipients)
        if isinstance(offer, CommandResult):
            return offer
        if isinstance(offer, Unresolved):
            # A name no contact (or several) matches: the change waits for the person.
            ask = Ask(
                title=target.occurrence.title,
                slots=StubSlots(attendees=tuple(command.update.attendees or ()) if command.update else ()),
                attendee_query=offer.query,
                attendee_candidates=offer.candidates,
            )
            return Asked("needs_attendee", ask)
        decision = decide(
            offer.proposal,
            offer.conflicts,
            txn.spoken_at,
            reasons=(
                command.hold,
                # Found among several for the same words: the user says which (contract §20).
                "which_event" if candidates else None,
                # The change sends mail (an update or a cancellation) to the people invited.
                "sends_invitations" if offer.recipients else None,
                # Every update and delete waits for the user's word.
                "change_confirmation",
            ),
        )
        change = HeldChange(
            view=offer.view,
            action=command.action,
            scope=scope,
            row_id=target.row.id,
            master_id=target.master.id if target.master else None,
            occurrence_start=target.occurrence_start,
            after=offer.after,
            # Kept only while it asks: a change held before candidates existed is stored as it was.
            **({"candidates": candidates} if candidates else {}),
        )
        proposal = offer.proposal
        ask = Ask(
            title=target.occurrence.title,
            hold_reason=decision.hold_reason,
            conflict_event_ids=shown_conflicts(offer.conflicts),
            proposed_start=proposal.start if proposal else None,
            proposed_end=proposal.end if proposal else None,
            payload=change,
            recipients=offer.recipients,
        )
        assert decision.outcome != "run", "a change is never run without the user's word"
        return Asked(decision.outcome, ask, offer.conflicts)

    async def _update_offer(
        self,
        txn: Txn,
        target: Target,
        scope: Scope,
        update: UpdateSchedule | None,
        recipients: tuple[Attendee, ...],
    ) -> ChangeOffer | Unresolved | CommandResult:
        if update is None:
            return error_result("invalid_arguments", "an update needs the fields to change")
        people = await self.people.for_update(txn, target.occurrence, update)
        if isinstance(people, Unresolved):
            return people
        after = await self._after(txn, target.occurrence, update)
        if isinstance(after, CommandResult):
            return after
        if people is not None:
            after = after.evolve(attendees=people.attendees, organizer=people.organizer)
            recipients = people.recipients(recipients)
        conflicts = await self.placing.conflicts(
            txn,
            after.start,
            after.end,
            after.all_day,
            ignore_ids=frozenset({target.occurrence.id, target.row.id}),
            own_series=own_series(target.master.id if target.master else None, scope),
        )
        after_values = ChangeAfter.of(after, asked_in(update, target.occurrence))
        if target.master is not None and scope != "this" and target.occurrence_start is not None:
            try:
                series_move(target.master, target.occurrence_start, scope, after_values)
            except InexpressibleChangeError as exc:
                return error_result("inexpressible_change", str(exc))
        return ChangeOffer(
            view=ChangeOut(
                action="update",
                scope=scope,
                before=event_out(target.occurrence, txn.tz),
                after=event_out(after, txn.tz),
            ),
            after=after_values,
            proposal=Proposal(after.start, after.end, after.all_day),
            conflicts=conflicts,
            recipients=recipients,
        )

    async def _delete_offer(
        self, txn: Txn, target: Target, scope: Scope, recipients: tuple[Attendee, ...]
    ) -> ChangeOffer:
        removed, count = await self._removed(txn, target, scope)
        view = ChangeOut(
            action="delete",
            scope=scope,
            before=event_out(target.occurrence, txn.tz),
            removed_starts=removed,
            removed_count=count,
        )
        return ChangeOffer(view=view, after=None, proposal=None, conflicts=(), recipients=recipients)

    async def _after(self, txn: Txn, current: Event, update: UpdateSchedule) -> Event | CommandResult:
        """The occurrence as it would be after the update: date and times resolved by the time
        service, the length kept unless a new end or duration is given."""
        tz = txn.tz
        local_start = current.start.astimezone(tz)
        day: date = local_start.date()
        if update.date:
            resolved = await self.placing.resolve_day(txn, update.date)
            if isinstance(resolved, CommandResult):
                return resolved
            day = resolved
        all_day = current.all_day if update.all_day is None else update.all_day
        last_day = await self.placing.last_day(txn, update.end_date)
        if isinstance(last_day, CommandResult):
            return last_day
        try:
            if all_day:
                days = local_days(current.start, current.end, tz) if current.all_day else 1
                if last_day is not None:
                    days = (last_day - day).days + 1
                start, end = whole_days(day, days, tz)
            else:
                clock = (
                    parse_hhmm(update.time)
                    if update.time
                    else (local_start.time() if not current.all_day else time(9))
                )
                start = at_local(day, clock, tz)
                if update.end_time:
                    end = at_local(last_day or day, parse_hhmm(update.end_time), tz)
                    if end <= start and last_day is None:
                        end = at_local(day + timedelta(days=1), parse_hhmm(update.end_time), tz)
                elif update.duration_minutes:
                    end = start + timedelta(minutes=update.duration_minutes)
                elif last_day is not None:
                    end = at_local(last_day, clock, tz)
                else:
                    length = current.end - current.start if not current.all_day else timedelta(hours=1)
                    end = start + length
        except ValueError as exc:
            return error_result("invalid_time", str(exc))
        if end <= start:
            return error_result("invalid_time", "the event must end after it starts")
        calendar = current.calendar
        if update.calendar:
            calendars = await self.placing.calendars(txn)
            calendar = update.calendar if update.calendar in calendars else current.calendar
        return current.evolve(
            title=update.title or current.title,
            start=start.astimezone(UTC),
            end=end.astimezone(UTC),
            all_day=all_day,
            calendar=calendar,
            reminder_minutes=update.reminder_minutes
            if update.reminder_minutes is not None
            else current.reminder_minutes,
            location=update.location or current.location,
            notes=update.notes or current.notes,
        )

    async def _removed(
        self, txn: Txn, target: Target, scope: Scope
    ) -> tuple[tuple[datetime, ...], int | None]:
        master, slot = target.master, target.occurrence_start
        if master is None or scope == "this" or master.rrule is None or slot is None:
            return (target.occurrence.start,), 1
        origin = master.start.astimezone(UTC) if scope == "all" else slot
        overrides = await txn.uow.events.series_overrides(txn.user_id, master.id)
        going = [o for o in overrides if o.recurrence_id is not None and o.recurrence_id >= origin]
        # A preview, not the whole series: the first few that would go within ten years, each at
        # the time it really has (a moved occurrence at its own time, an excluded one not at all).
        upcoming = expand([master, *going], origin, origin + timedelta(days=3660))
        shown = [e.start for e in upcoming if e.series_id == master.id][:REMOVED_PREVIEW]
        return tuple(shown), live_count(master, origin)

    # ---- confirm: run the change ------------------------------------------------------------

    async def confirm(self, txn: Txn, stub: Stub) -> CommandResult:
        change = stub.payload
        if isinstance(change, HeldChange) and change.gone_ids:
            return await self._confirm_gone(txn, stub, change)
        target = await stored_target(txn, change) if isinstance(change, HeldChange) else None
        if target is None or not isinstance(change, HeldChange):
            # The event went away meanwhile (removed elsewhere): nothing to change.
            await self.pending.store(txn, self.pending.of(stub).cancel(txn.now))
            return error_result("not_found", NOT_FOUND)
        scope = change.scope
        before = event_out(target.occurrence, txn.tz)
        if change.action == "delete":
            removed = await delete_target(txn, target, scope)
            done = await self.pending.store(txn, self.pending.of(stub).finish("deleted", txn.now))
            return CommandResult(
                status="deleted",
                persisted=True,
                before=before,
                removed_count=removed,
                stub=stub_out(done, (), txn.tz),
            )
        try:
            written = await update_target(txn, target, scope, change.after)
        except InexpressibleChangeError as exc:
            return error_result("inexpressible_change", str(exc))
        # The receipt is read back: the occurrence the user pointed at, as the rows now give it.
        new = await read_back(txn, *written)
        if new is None:
            return error_result("not_found", NOT_FOUND)
        done = await self.pending.store(txn, self.pending.of(stub).finish("updated", txn.now))
        return CommandResult(
            status="updated",
            persisted=True,
            before=before,
            event=event_out(new, txn.tz),
            stub=stub_out(done, (), txn.tz),
        )

    async def _confirm_gone(self, txn: Txn, stub: Stub, change: HeldChange) -> CommandResult:
        """The events and tasks the connected calendar no longer shows, removed here too (each
        event with its overrides, each task with its blocks); those removed meanwhile are simply
        not counted."""
        uow = txn.uow
        found = await uow.events.events_by_ids(txn.user_id, list(change.gone_ids))
        overrides = [
            o for e in found if e.rrule for o in await uow.events.series_overrides(txn.user_id, e.id)
        ]
        gone_tasks = {t.id for t in await uow.tasks.tasks_by_ids(txn.user_id, list(change.gone_ids))}
        blocks = (
            [b.id for b in await uow.tasks.blocks(txn.user_id) if b.task_id in gone_tasks]
            if gone_tasks
            else []
        )
        await uow.events.delete_events(txn.user_id, [*(row.id for row in (*found, *overrides)), *blocks])
        for task_id in sorted(gone_tasks):
            await uow.tasks.delete_task(txn.user_id, task_id)
        removed = len(found) + len(gone_tasks)
        done = await self.pending.store(txn, self.pending.of(stub).finish("deleted", txn.now))
        return CommandResult(
            status="deleted",
            persisted=True,
            before=change.view.before,
            removed_count=removed,
            stub=stub_out(done, (), txn.tz),
        )


def own_series(master_id: str | None, scope: Scope) -> str | None:
    """The series whose other occurrences a change moves along (none for one occurrence): they
    are never what the change conflicts with."""
    return master_id if scope != "this" else None
