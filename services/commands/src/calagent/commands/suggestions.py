"""Whose time a suggestion counts (contract §16): the caller, and each attendee who is a user of
this deployment sharing their free/busy with the caller.

An attendee is named as the model named them: an address, a contact's name (the contact's address
is then used), or a user id. An address is a user when exactly one user's settings carry it. A
user counts only when they share their free/busy with the caller; everyone else counts as free and
is named back as unknown. What crosses from another user is their zone, their working hours and
the spans they are busy or tentative and the buffer they keep — never an event: titles, places
and notes stay in this function's locals and leave it only as spans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time
from zoneinfo import ZoneInfo

from calagent.commands.domain.freetime import Person, person_of
from calagent.commands.domain.people import Unresolved, resolve_one
from calagent.commands.domain.settings import StoredSettings
from calagent.commands.domain.timeutil import InvalidZoneError, zone
from calagent.commands.ports import UnitOfWork
from calagent.commands.reads import events_in, own_addresses
from calagent.contracts.address import is_address
from calagent.contracts.queries import SuggestFree
from calagent.contracts.suggestions import SuggestionPeople


@dataclass(frozen=True)
class Counted:
    people: list[Person]  # the caller first
    named: SuggestionPeople

    def who(self, caller: str) -> tuple[str, ...]:
        """Whom each slot's availabilities are of: `people` (the caller by their user id), then
        the unknown ones, each by the name asked for."""
        return (caller, *self.named.counted, *self.named.unknown)

    def told(self, busy: Sequence[int]) -> SuggestionPeople:
        """`named`, with the attendees at the places `busy` in `people` named as busy."""
        return self.named.model_copy(update={"busy": tuple(self.named.counted[i - 1] for i in busy)})


def _zone_or(name: str | None, fallback: ZoneInfo) -> ZoneInfo:
    if name is None:
        return fallback
    try:
        return zone(name)
    except InvalidZoneError:
        return fallback


async def suggestion_people(
    uow: UnitOfWork,
    query: SuggestFree,
    window: tuple[datetime, datetime],
    tz: ZoneInfo,
    deployment_hours: tuple[time, time],
    default_tz: str,
) -> Counted:
    caller = query.envelope.user_id
    start, end = window
    sharers = {entry.user for entry in (await uow.settings.sharing_of(caller))[1]}
    contacts = await uow.people.contacts(caller) if query.attendees else []
    wanted: dict[str, str] = {}  # user id → the name asked for
    unknown: list[str] = []
    addresses: dict[str, str] = {}  # casefolded address → the name asked for
    for name in query.attendees:
        text = name.strip()
        if text == caller:
            continue  # the caller's own time counts anyway
        if is_address(text):
            addresses[text.removeprefix("mailto:").casefold()] = name
            continue
        contact = resolve_one(text, contacts)
        if not isinstance(contact, Unresolved):
            addresses[contact.email.casefold()] = name
        elif text in sharers:
            wanted.setdefault(text, name)
        else:
            unknown.append(name)
    if addresses:
        owners = await uow.settings.users_with_email(list(addresses))
        for address, name in addresses.items():
            users = [u for u in owners.get(address, []) if u != caller]
            # Several users claiming one address name nobody for certain: not counted.
            if len(users) == 1 and users[0] in sharers:
                wanted.setdefault(users[0], name)
            elif not (len(users) == 0 and caller in owners.get(address, [])):
                unknown.append(name)
    wanted.pop(caller, None)
    saved = await uow.settings.settings_of([caller, *wanted])
    people: list[Person] = []
    for user_id in (caller, *wanted):
        chosen = saved.get(user_id, StoredSettings())
        # The caller's zone is their turn's; anyone else's is their saved one, else the default.
        own_tz = tz if user_id == caller else _zone_or(chosen.tz, _zone_or(default_tz, tz))
        # The addresses the user answers invitations under: whose answer on an event is theirs.
        own = await own_addresses(uow, user_id, chosen)
        people.append(
            person_of(
                await events_in(uow, user_id, start, end, incomplete_only=True),
                tz=own_tz,
                week=chosen.week(deployment_hours),
                buffer=chosen.buffer(),
                own_addresses=own,
            )
        )
    return Counted(
        people=people,
        named=SuggestionPeople(counted=tuple(wanted.values()), unknown=tuple(dict.fromkeys(unknown))),
    )
