"""What a transaction's writes decided must happen with their commit, collected by the code that
decided it and handled in one place (`SqlUnitOfWork.commit`, then the store after the commit):

- every resource a write touched gets a CalDAV outbox row (for a user with a connected account),
  in the same transaction, and so does every task written (its VTODO, contract §21);
- the touched resources that may have people to mail, and the objects of those deleted with their
  organizer, are what the invitation rule (`people/invitations.py`) looks at before the commit;
- the users whose deliveries or mail were queued are woken after the commit;
- what the one step after a write (`tasks.replans.Replans.after_write`) reacts to: the events that
  landed (written, blocks apart), whether the blocks' TRANSP is still to decide after the last
  write, and whether a stub ended (contract §21, §19).

An undo, a confirmation and a chat write of the same change record the same effects.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from calagent.commands.domain.model import Event, resource_of


@dataclass
class Effects:
    # Off for writes that came *from* the CalDAV server (or an account's own bookkeeping): nothing
    # of them is sent back — no outbox rows, no mail.
    outbound: bool = True
    # Off for a change that is itself someone's answer (an attendee's REPLY): it mails nobody.
    mail_people: bool = True
    # Per user, the resources this transaction wrote.
    touched: dict[str, set[str]] = field(default_factory=dict)
    # Per user, the tasks this transaction wrote or removed (each one VTODO on the server).
    tasks_touched: dict[str, set[str]] = field(default_factory=dict)
    # Per user, the touched resources that may have people to mail (contract §16).
    invited: dict[str, set[str]] = field(default_factory=dict)
    # The objects of deleted events with people, by resource: (organizer, object as last sent).
    deleted_objects: dict[str, tuple[str, str]] = field(default_factory=dict)
    # The users whose CalDAV deliveries, or mail, were queued: woken after the commit.
    outbox_users: tuple[str, ...] = ()
    mail_users: tuple[str, ...] = ()
    # Per user, the events this transaction wrote that are not task blocks, by id, as last
    # written: what the re-plan of the blocks looks at. A block written (by placing a task or by a
    # re-plan itself) is never one: it moves no other block.
    landed: dict[str, dict[str, Event]] = field(default_factory=dict)
    # The users whose events or tasks were written since their blocks' TRANSP was last decided.
    unsettled: set[str] = field(default_factory=set)
    # The users a stub of whom ended here: an offer waiting its turn may come back.
    stubs_ended: set[str] = field(default_factory=set)

    def event_written(self, event: Event) -> None:
        self.touched.setdefault(event.user_id, set()).add(resource_of(event))
        self.unsettled.add(event.user_id)
        if event.task_id is None:
            self.landed.setdefault(event.user_id, {})[event.id] = event
        # An override may change a meeting whose people are on its master: looked at at commit.
        if event.organizer or event.attendees or event.series_id:
            self.invited.setdefault(event.user_id, set()).add(resource_of(event))

    def row_deleted(
        self, user_id: str, event_id: str, series_id: str | None, organizer: str | None, ical: str | None
    ) -> None:
        resource = series_id or event_id
        self.touched.setdefault(user_id, set()).add(resource)
        self.unsettled.add(user_id)
        self.landed.get(user_id, {}).pop(event_id, None)
        if organizer or series_id:
            self.invited.setdefault(user_id, set()).add(resource)
        if series_id is None and organizer and ical:
            self.deleted_objects[event_id] = (organizer, ical)

    def task_written(self, user_id: str, task_id: str) -> None:
        self.tasks_touched.setdefault(user_id, set()).add(task_id)
        self.unsettled.add(user_id)

    def synced(self, user_id: str, landed: Iterable[Event]) -> None:
        """Events written or removed from the CalDAV server by statements of the sync's own (no
        repository saw them): `landed`, those written."""
        self.unsettled.add(user_id)
        for event in landed:
            if event.task_id is None:
                self.landed.setdefault(user_id, {})[event.id] = event

    def blocks_settled(self, user_id: str) -> None:
        """The user's blocks' TRANSP decided after every write so far."""
        self.unsettled.discard(user_id)

    def stub_ended(self, user_id: str) -> None:
        self.stubs_ended.add(user_id)

    def landed_of(self, user_id: str) -> tuple[Event, ...]:
        return tuple(self.landed.get(user_id, {}).values())

    def people_quieted(self) -> None:
        self.mail_people = False

    def mail_queued(self, user_id: str) -> None:
        if user_id not in self.mail_users:
            self.mail_users = (*self.mail_users, user_id)

    def deliveries_queued(self, users: tuple[str, ...]) -> None:
        self.outbox_users = (*self.outbox_users, *(u for u in users if u not in self.outbox_users))

    def to_wake(self) -> tuple[str, ...]:
        """Whose outbox has work after the commit: deliveries first, then mail, each user once."""
        return (*self.outbox_users, *(u for u in self.mail_users if u not in self.outbox_users))
