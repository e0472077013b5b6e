"""One calendar's listing read into a plan of what changes in the stored rows (inbound.py writes
it): which objects are new or changed and what they read as, which are gone, and what of them
could not be read (notes.py). No I/O: what the sync knew before comes in as `Known`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from calagent.commands.caldav import notes, remote, rows
from calagent.commands.caldav.todos import read_task
from calagent.commands.domain.model import Event
from calagent.commands.ical.parse import read_resource
from calagent.commands.ical.todo import is_todo
from calagent.commands.txn import new_id
from calagent.contracts.tasks import TaskOut

log = logging.getLogger("calagent.commands.caldav")


@dataclass
class SyncStats:
    changed: int = 0
    deleted: int = 0
    skipped: int = 0
    withheld: int = 0  # gone from the server, kept here until the user answers (withheld.py)


@dataclass(frozen=True)
class Listing:
    """One calendar's listing as a sync read it."""

    account: rows.Account
    place: rows.Place
    found: remote.Changes
    stats: SyncStats
    listed_at: datetime
    fallback_tz: ZoneInfo  # a floating time is read in it


@dataclass(frozen=True)
class Known:
    """What the sync knew before applying a listing: the resources by href, the events the
    outbox still owes the server, their UIDs, and the rows stored of the listed known objects."""

    resources: dict[str, rows.Resource]
    waiting: set[str]
    waiting_uids: set[str]
    written: dict[str, list[Event]]


def newer(resource: rows.Resource, listed_at: datetime) -> bool:
    return resource.updated_at is not None and resource.updated_at > listed_at


@dataclass
class Plan:
    """What one calendar's listing changes in the stored rows, written in one go by `_write`."""

    replaced: list[str] = field(default_factory=list)
    fresh: list[Event] = field(default_factory=list)
    resources: list[dict[str, object]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    # Tasks as their VTODOs say them: (task, UID, object).
    tasks: list[tuple[TaskOut, str, str]] = field(default_factory=list)
    # Our own writes the listing showed as we hold them (event id, ETag): no longer unlisted.
    listed: list[tuple[str, str]] = field(default_factory=list)
    # The objects read this time, and what of them could not be read (notes.py).
    read_again: set[str] = field(default_factory=set)
    object_notes: list[notes.ObjectNote] = field(default_factory=list)


def take_changed(listing: Listing, before: Known, plan: Plan) -> set[str]:
    """The listed objects that are new or changed, planned as rows; the hrefs listed."""
    account, found, stats, listed_at = listing.account, listing.found, listing.stats, listing.listed_at
    known, waiting, waiting_uids = before.resources, before.waiting, before.waiting_uids
    seen: set[str] = set()
    for obj in found.changed:
        seen.add(obj.href)
        resource = known.get(obj.href)
        if resource is not None and obj.etag is not None and resource.etag == obj.etag:
            if resource.unlisted:  # our own write, shown by the server
                plan.listed.append((resource.event_id, obj.etag))
            continue  # our own write, or nothing new
        if resource is not None and (resource.event_id in waiting or newer(resource, listed_at)):
            stats.skipped += 1
            continue
        event_id = resource.event_id if resource is not None else new_id()
        if is_todo(obj.body):
            take_task(listing, obj, resource, event_id, before, plan)
            continue
        plan.read_again.add(obj.href)
        try:
            reading = read_resource(
                obj.body,
                master_id=event_id,
                user_id=account.user_id,
                calendar=listing.place.name,
                fallback_tz=listing.fallback_tz,
            )
        except Exception as exc:  # one object never stops its calendar's sync
            log.info("skipping %s: %r", obj.href, exc)
            plan.object_notes.append(notes.skipped(obj.href, obj.body, exc))
            stats.skipped += 1
            continue
        theirs = listing.place.rows(reading.rows, before.written.get(event_id, ()))
        plan.object_notes.extend(
            notes.ObjectNote(obj.href, theirs[0].uid, False, problem) for problem in reading.notes
        )
        if resource is None and theirs[0].uid in waiting_uids:
            # Our own object, PUT by a delivery that has not committed its resource yet:
            # the outbox settles it; taking it in here would make the event twice.
            stats.skipped += 1
            continue
        if resource is not None:
            plan.replaced.append(event_id)
        # The event keeps the UID it was born with; an object without one (invalid, but
        # seen) is known by the one its resource was given.
        uid = resource.uid if resource is not None else (theirs[0].uid or event_id)
        plan.fresh.extend(row.evolve(uid=uid) for row in theirs)
        plan.resources.append(_resource_row(listing, obj, resource, event_id, uid))
        stats.changed += 1
    return seen


def take_task(
    listing: Listing,
    obj: remote.RemoteObject,
    resource: rows.Resource | None,
    task_id: str,
    before: Known,
    plan: Plan,
) -> None:
    """A VTODO: the task it is here (contract §21), new or updated, keeping its object. Only
    from a calendar the user owns: a task someone shares is theirs to do."""
    stats = listing.stats
    read = read_task(obj.body, task_id, listing.fallback_tz) if listing.place.owned else None
    if read is None or (resource is None and read.uid in before.waiting_uids):
        stats.skipped += 1  # not ours to take, unreadable, or our own PUT not yet committed
        return
    uid = resource.uid if resource is not None else (read.uid or task_id)
    plan.tasks.append((read.task, uid, obj.body))
    plan.resources.append(_resource_row(listing, obj, resource, task_id, uid))
    stats.changed += 1


def _resource_row(
    listing: Listing, obj: remote.RemoteObject, resource: rows.Resource | None, event_id: str, uid: str
) -> dict[str, object]:
    """The resource row of an object a listing brought, for an event or a task alike."""
    return {
        "event_id": event_id,
        "user_id": listing.account.user_id,
        "account_id": listing.account.id,
        "calendar_url": listing.place.url,
        "href": obj.href,
        "uid": uid,
        "etag": obj.etag,
        "origin": resource.origin if resource is not None else "remote",
        "unlisted": False,
    }


def take_deleted(
    calendar_url: str,
    found: remote.Changes,
    listed_at: datetime,
    known: dict[str, rows.Resource],
    left: set[str],
    seen: set[str],
) -> list[str]:
    """The events whose objects are gone from the server (said gone, or missing from a complete
    listing), but for those `left` to the outbox or to the user and those written since."""
    hrefs = [remote.normal_href(h) for h in found.deleted]
    if found.complete:
        hrefs += [href for href, r in known.items() if r.calendar_url == calendar_url and href not in seen]
    gone: list[str] = []
    for href in dict.fromkeys(hrefs):
        resource = known.get(href)
        if resource is None or resource.event_id in left or newer(resource, listed_at):
            continue
        gone.append(resource.event_id)
    return gone
