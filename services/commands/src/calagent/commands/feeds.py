"""Private feeds (contract §10): the secret a user's calendar apps subscribe with, rotated on
request, and the calendar served under it.

The secret is the only identity of a feed request: calendar apps send no token. Only its SHA-256
is stored, one per user, with the zone the feed is served in; a new secret replaces the old one.
The answer carries the calendar only, never whose it is.
"""

from __future__ import annotations

import hashlib
import secrets
from zoneinfo import ZoneInfo

from calagent.commands.domain.timeutil import InvalidZoneError, zone
from calagent.commands.ical.render import render_ics
from calagent.commands.ports import Store
from calagent.commands.txn import query_error
from calagent.contracts.queries import FeedCalendar, QueryResult, RotateFeed
from calagent.runtime.clock import Clock

FEED_SECRET_BYTES = 32  # token_urlsafe: 43 characters, 256 random bits
FEED_NOT_FOUND = "no feed at this address"


class Feeds:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def rotate_feed(self, query: RotateFeed, tz: ZoneInfo) -> QueryResult:
        secret = secrets.token_urlsafe(FEED_SECRET_BYTES)
        async with self.store.unit_of_work() as uow:
            await uow.settings.replace_feed(
                query.envelope.user_id, feed_hash(secret), tz.key, self.clock.now()
            )
            await uow.commit()
        return QueryResult(feed_secret=secret, db_ms=uow.db_ms)

    async def feed(self, query: FeedCalendar) -> QueryResult:
        async with self.store.unit_of_work() as uow:
            owner = await uow.settings.feed_owner(feed_hash(query.secret))
            if owner is None:
                return query_error("not_found", FEED_NOT_FOUND)
            user_id, tz_name = owner
            events = await uow.events.all_events(user_id)
            parents = await uow.tasks.uids_by_id(user_id, {e.task_id for e in events if e.task_id})
        try:
            tz = zone(tz_name)
        except InvalidZoneError:
            tz = ZoneInfo("UTC")
        # What ExportIcs gives the owner, in the zone saved with the secret.
        return QueryResult(ics=render_ics(events, tz, self.clock.now(), parents), db_ms=uow.db_ms)


def feed_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
