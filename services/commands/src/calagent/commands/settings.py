"""`calagent.people.manage` for settings and sharing: the caller's own, by the envelope's user.

A saved zone is published to the zones bucket after its commit (`ZonePublisher`); when that
fails the request fails as transient and the client's retry — the same values — publishes it.
"""

from __future__ import annotations

from datetime import time

from calagent.commands.domain.settings import StoredSettings
from calagent.commands.ports import Store, ZonePublisher
from calagent.contracts.people import PeopleError, PeopleResult
from calagent.contracts.settings import (
    AnySettingsCommand,
    GetSettings,
    ListSharing,
    PutSettings,
    Share,
    SharingOut,
    Unshare,
)
from calagent.runtime.clock import Clock

SETTINGS_COMMANDS = (GetSettings, PutSettings, Share, Unshare, ListSharing)


class SettingsDesk:
    def __init__(
        self, store: Store, clock: Clock, zones: ZonePublisher, working_hours: tuple[time, time]
    ) -> None:
        self.store = store
        self.clock = clock
        self.zones = zones
        self.working_hours = working_hours

    async def run(self, command: AnySettingsCommand) -> PeopleResult:
        user_id = command.envelope.user_id
        fallback_tz = command.envelope.tz
        async with self.store.unit_of_work() as uow:
            if isinstance(command, GetSettings):
                saved = (await uow.settings.settings_of([user_id])).get(user_id, StoredSettings())
                return PeopleResult(settings=saved.view(fallback_tz, self.working_hours))
            if isinstance(command, PutSettings):
                before = (await uow.settings.settings_of([user_id])).get(user_id, StoredSettings())
                saved = before.patched(command.patch, command.fields)
                await uow.settings.save_settings(user_id, saved, self.clock.now())
                await uow.commit()
                if "tz" in command.fields:
                    await self.zones.publish_zone(user_id, saved.tz)
                return PeopleResult(settings=saved.view(fallback_tz, self.working_hours))
            if isinstance(command, Share):
                if command.with_user == user_id:
                    return PeopleResult(
                        error=PeopleError(code="invalid_settings", message="one shares with someone else")
                    )
                await uow.settings.share(user_id, command.with_user, command.level, self.clock.now())
            elif isinstance(command, Unshare) and not await uow.settings.unshare(user_id, command.with_user):
                return PeopleResult(
                    error=PeopleError(code="not_found", message="you do not share with this user")
                )
            mine, theirs = await uow.settings.sharing_of(user_id)
            await uow.commit()
            return PeopleResult(sharing=SharingOut(shared_with=tuple(mine), shared_with_me=tuple(theirs)))
