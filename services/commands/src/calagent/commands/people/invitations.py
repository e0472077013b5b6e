"""Queuing invitations in the transaction of the write that causes them.

At commit, for each event the transaction touched that the user organizes, the object the people
were last sent (`events.ical`) is compared with the rows as they are now: the object patched with
them (`views.render_resource`, one renderer with CalDAV and the feeds) is what they get. Something
changed → a REQUEST with the raised SEQUENCE to every attendee, a CANCEL to each one taken off;
the event gone → a CANCEL to everyone. The new object is kept as the event's `ical` and the
messages go into `mail_outbox`, all in the same transaction as the write: an outage of the mail
server delays them, a rollback takes them back, and nothing is sent for a write that did not
commit. Writes that came from the connected calendar (`outbound` off) send nothing.

What the people were last told is the outbox's (`last_told`), whichever write told them: every
message's SEQUENCE is above it (`next_sequence`), and an event cancelled for everyone since its
object was kept (removed, then brought back by an undo) is news to them again, so a chat write, a
confirmation and an undo send the same mail for the same change.
"""

from __future__ import annotations

from datetime import date, datetime

from icalendar import Calendar
from opentelemetry import propagate

from calagent.commands.adapters.store import SqlUnitOfWork
from calagent.commands.domain.model import Event
from calagent.commands.domain.people import Told, next_sequence, normal_address
from calagent.commands.ical.attendees import attendees_of
from calagent.commands.ical.patch import stamp_changed
from calagent.commands.ical.render import render_resource
from calagent.commands.people import imip
from calagent.contracts.people import Attendee
from calagent.runtime.clock import Clock


class Invitations:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    async def queue(self, uow: SqlUnitOfWork) -> None:
        effects = uow.effects
        if not effects.outbound or not effects.mail_people or not effects.invited:
            return
        stamp = self.clock.now()
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        for user_id, resources in effects.invited.items():
            mailbox = await uow.people.mailbox(user_id)
            if mailbox is None:
                continue
            mails: list[tuple[str, imip.Mail]] = []
            for resource in sorted(resources):
                rows = await uow.events.resource_rows(user_id, resource)
                owner = next((r for r in rows if r.id == resource), None)
                if owner is None:
                    gone = effects.deleted_objects.get(resource)
                    if gone is not None and normal_address(gone[0]) == normal_address(mailbox):
                        mails += await self._cancel_all(uow, user_id, gone[1], mailbox, stamp)
                    continue
                if owner.organizer is None or normal_address(owner.organizer) != normal_address(mailbox):
                    continue
                mails += await self._changed(uow, owner, rows, mailbox, stamp)
            if mails:
                await uow.people.queue_mail(user_id, mailbox, mails, carrier)

    async def _changed(
        self, uow: SqlUnitOfWork, owner: Event, rows: list[Event], mailbox: str, stamp: datetime
    ) -> list[tuple[str, imip.Mail]]:
        before = owner.ical
        if before is None and not owner.attendees:
            return []
        uid = owner.uid or f"{owner.id}@calagent"
        text = render_resource(rows, uid, stamp)
        if text is None:
            return []
        told = await uow.people.last_told(owner.user_id, uid)
        # The event was cancelled for everyone after `before` was kept (it was removed, and it is
        # back): the people hold that CANCEL, not `before`, so all of the event is news to them.
        withdrawn = (
            before is not None
            and told is not None
            and told.withdrawn_after(imip.sequence_of(Calendar.from_ical(before)))
        )
        if text == before and not withdrawn:
            return []
        obj = Calendar.from_ical(text)
        if before is not None and not withdrawn:
            kept = Calendar.from_ical(before)
            if _for_people(kept) == _for_people(obj):
                # Only the user's own alarm (or bookkeeping) changed: nothing for the people.
                return []
            gone = _removed_occurrences(kept, obj)
            if gone:
                return await self._cancel_occurrences(uow, owner, obj, text, gone, mailbox, stamp, told)
        old_people = _people(before) if before is not None and not withdrawn else ()
        sequence = next_sequence(imip.sequence_of(obj), told)
        if _raise_sequence(obj, sequence, stamp, first=before is None):
            text = bytes(obj.to_ical()).decode("utf-8")
        await uow.events.keep_object(owner.user_id, owner.id, text)
        summary = imip.summary_of(obj)
        out: list[tuple[str, imip.Mail]] = []
        now_people = {normal_address(a.email) for a in owner.attendees}
        for person in owner.attendees:
            body = imip.request_body(Calendar.from_ical(text))
            out.append(_mail("REQUEST", body, person, uid, sequence, mailbox, stamp, summary))
        for person in old_people:
            if normal_address(person.email) in now_people:
                continue
            body = imip.cancel_body(obj, sequence, mailbox, [person], stamp, whole=False)
            out.append(_mail("CANCEL", body, person, uid, sequence, mailbox, stamp, summary))
        return out

    async def _cancel_occurrences(
        self,
        uow: SqlUnitOfWork,
        owner: Event,
        obj: Calendar,
        text: str,
        gone: list[date | datetime],
        mailbox: str,
        stamp: datetime,
        told: Told | None,
    ) -> list[tuple[str, imip.Mail]]:
        """Occurrences of a series taken away and nothing else changed: a CANCEL naming each by
        its RECURRENCE-ID (RFC 5546 §3.2.5), not the whole series sent again."""
        sequence = next_sequence(imip.sequence_of(obj), told)
        if _raise_sequence(obj, sequence, stamp):
            text = bytes(obj.to_ical()).decode("utf-8")
        await uow.events.keep_object(owner.user_id, owner.id, text)
        uid = owner.uid or f"{owner.id}@calagent"
        summary = imip.summary_of(obj)
        out: list[tuple[str, imip.Mail]] = []
        for person in owner.attendees:
            body = imip.cancel_body(obj, sequence, mailbox, [person], stamp, whole=False, occurrences=gone)
            out.append(_mail("CANCEL", body, person, uid, sequence, mailbox, stamp, summary))
        return out

    async def _cancel_all(
        self, uow: SqlUnitOfWork, user_id: str, before: str, mailbox: str, stamp: datetime
    ) -> list[tuple[str, imip.Mail]]:
        obj = Calendar.from_ical(before)
        people = _people(before)
        masters = [c for c in obj.walk("VEVENT") if "RECURRENCE-ID" not in c]
        if not people or not masters:
            return []
        uid = str(masters[0]["UID"])
        # The object goes with the event: this CANCEL is the one message whose object is not kept.
        sequence = next_sequence(imip.sequence_of(obj) + 1, await uow.people.last_told(user_id, uid))
        summary = imip.summary_of(obj)
        out: list[tuple[str, imip.Mail]] = []
        for person in people:
            body = imip.cancel_body(obj, sequence, mailbox, [person], stamp, whole=True)
            out.append(_mail("CANCEL", body, person, uid, sequence, mailbox, stamp, summary))
        return out


def _raise_sequence(obj: Calendar, sequence: int, stamp: datetime, *, first: bool = False) -> bool:
    """`obj` brought up to `sequence` when its people hold that one or a higher (every VEVENT below
    it raised and stamped anew, so no occurrence reads as stale); `first`, the first version people
    get: a VEVENT without SEQUENCE says it out loud (RFC 5546 wants it on a REQUEST). Whether any
    component was raised; one the people are behind on is left as it is."""
    behind = imip.sequence_of(obj) < sequence
    raised = False
    for component in obj.walk("VEVENT"):
        own = component.get("SEQUENCE")
        if (own is None and (first or behind)) or (own is not None and behind and int(own) < sequence):
            stamp_changed(component, stamp, sequence)
            raised = True
    return raised


def _mail(
    method: str,
    body: Calendar,
    person: Attendee,
    uid: str,
    sequence: int,
    mailbox: str,
    stamp: datetime,
    summary: str,
) -> tuple[str, imip.Mail]:
    """One scheduling message to one person, from the organizer's mailbox, ready for the outbox."""
    msg_id = imip.message_id(uid, sequence, method, person.email, mailbox.rpartition("@")[2])
    message = imip.envelope(
        body,
        method=method,
        sender=mailbox,
        recipient=person,
        msg_id=msg_id,
        stamp=stamp,
        summary=summary,
    )
    return uid, imip.Mail(method, sequence, person.email, msg_id, message)


def _people(text: str) -> tuple[Attendee, ...]:
    """Everyone the object invites (the master's attendees and any override's), once each."""
    seen: set[str] = set()
    out: list[Attendee] = []
    for component in Calendar.from_ical(text).walk("VEVENT"):
        for person in attendees_of(component):
            key = normal_address(person.email)
            if key not in seen:
                seen.add(key)
                out.append(person)
    return tuple(out)


# What people are sent of an object does not include the bookkeeping of a version (DTSTAMP,
# LAST-MODIFIED, SEQUENCE) nor the user's own alarms, which a REQUEST leaves out.
_BOOKKEEPING = ("DTSTAMP", "LAST-MODIFIED", "SEQUENCE")


def _for_people(
    obj: Calendar, *, without_exdates: bool = False, skip: frozenset[object] = frozenset()
) -> list[bytes]:
    out: list[bytes] = []
    for component in obj.walk("VEVENT"):
        if "RECURRENCE-ID" in component and component.decoded("RECURRENCE-ID") in skip:
            continue
        copy = Calendar.from_ical(component.to_ical())
        for name in _BOOKKEEPING + (("EXDATE",) if without_exdates else ()):
            copy.pop(name, None)
        copy.subcomponents = [c for c in copy.subcomponents if c.name != "VALARM"]
        out.append(bytes(copy.to_ical()))
    return sorted(out)


def _exdates(obj: Calendar) -> list[date | datetime]:
    masters = [c for c in obj.walk("VEVENT") if "RECURRENCE-ID" not in c and "RRULE" in c]
    if not masters:
        return []
    raw = masters[0].get("EXDATE")
    lists = raw if isinstance(raw, list) else [raw] if raw is not None else []
    return [d.dt for item in lists for d in item.dts]


def _removed_occurrences(told: Calendar, now: Calendar) -> list[date | datetime]:
    """The slots `now` excludes that `told` did not, when that is all that changed (an override
    of a removed slot goes with it); empty otherwise."""
    before = set(_exdates(told))
    gone = [slot for slot in _exdates(now) if slot not in before]
    if not gone:
        return []
    skip = frozenset(gone)
    if _for_people(told, without_exdates=True, skip=skip) != _for_people(
        now, without_exdates=True, skip=skip
    ):
        return []
    return gone
