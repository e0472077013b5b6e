"""The composition root (cosmicpython's bootstrap): the one place where the commands service's
collaborators are built and injected. `Writes` and `CommandService` take what they dispatch to;
the app takes from the result what the inbox and the sync share with them (the invitation
answers, counters, proposals, the re-plan after a sync), instead of reaching through `Writes`."""

from __future__ import annotations

from dataclasses import dataclass

from calagent.commands.calendars import Calendars
from calagent.commands.changes import Changes
from calagent.commands.config import CommandConfig
from calagent.commands.counters import Counters
from calagent.commands.creates import Creates
from calagent.commands.feeds import Feeds
from calagent.commands.offers import Offers
from calagent.commands.pending import Pending
from calagent.commands.people.attendees import AttendeeRules
from calagent.commands.people.inbox import InvitationAnswers
from calagent.commands.placing import Placing
from calagent.commands.plans import PlanDeletion, Plans
from calagent.commands.ports import Store, TimePort
from calagent.commands.proposing import Proposing
from calagent.commands.queries import Queries
from calagent.commands.service import CommandService
from calagent.commands.tasks.offers import TaskOffers
from calagent.commands.tasks.replans import Replans
from calagent.commands.tasks.service import Tasks
from calagent.commands.undo import Undo
from calagent.commands.writes import Collaborators, Writes
from calagent.runtime.clock import Clock


@dataclass(frozen=True)
class Root:
    """The dispatch the bus handlers call, and the collaborators it was built with."""

    service: CommandService
    rooms: Collaborators


def bootstrap(store: Store, time_port: TimePort, config: CommandConfig, clock: Clock) -> Root:
    pending = Pending(config.stub_ttl)
    placing = Placing(time_port, config)
    people = AttendeeRules(placing)
    changes = Changes(pending, placing, people)
    offers = Offers(changes, placing)
    # Stateless reads: the proposals' free/busy and the service's queries share one.
    queries = Queries(store, time_port, config, clock)
    tasks = Tasks(store, config, clock, placing)
    rooms = Collaborators(
        pending=pending,
        placing=placing,
        people=people,
        changes=changes,
        plans=Plans(pending),
        offers=offers,
        undo=Undo(),
        answers=InvitationAnswers(pending, placing),
        counters=Counters(pending, changes, offers, placing, people),
        proposing=Proposing(pending, placing, queries),
        tasks=tasks,
        replans=Replans(tasks, pending, config, clock),
        task_offers=TaskOffers(tasks, pending),
        creates=Creates(pending, placing, time_port),
    )
    service = CommandService(
        store,
        Writes(store, clock, rooms),
        queries,
        Calendars(store, time_port, config.calendars, queries),
        Feeds(store, clock),
        PlanDeletion(store, clock),
    )
    return Root(service, rooms)
