"""Every subject with its types, declared once and used by both ends.

`subjects` names the subjects; this module says what travels on each: an `Endpoint` is a
request-reply subject (request type → reply type, served by a queue group), a `Stream` a JetStream
subject with its message type (and, where one is consumed, the durable pull consumer replicas
share), a `Topic` a core subject family keyed by an id with its message type. Pure data: the
runtime turns these into FastStream subscribers and publishers, the AsyncAPI document is generated
from those, and a client cannot ask an endpoint for the wrong reply type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from calagent.contracts import subjects
from calagent.contracts.bus import DeadLetter, HealthCheck, HealthReply
from calagent.contracts.caldav import AccountRequest, AccountResult, OutboxWake
from calagent.contracts.commands import CommandRequest, CommandResult
from calagent.contracts.evalrec import (
    ReportRequest,
    ReportResult,
    TimelineRequest,
    TimelineResult,
    UsageRequest,
    UsageResult,
)
from calagent.contracts.people import PeopleRequest, PeopleResult
from calagent.contracts.queries import QueryRequest, QueryResult
from calagent.contracts.time import (
    ChooseSlotRequest,
    ChosenSlot,
    ParsedReply,
    ParseReplyRequest,
    RangeRequest,
    RangeResult,
    ResolveRequest,
    ResolveResult,
)
from calagent.contracts.turns import (
    HistoryRequest,
    HistoryResult,
    TurnEvent,
    TurnLookup,
    TurnLookupResult,
    TurnRecord,
    TurnRequested,
)

Req = TypeVar("Req", bound=BaseModel)
Rep = TypeVar("Rep", bound=BaseModel)
Msg = TypeVar("Msg", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Endpoint(Generic[Req, Rep]):
    """Request-reply: whoever serves `subject` answers a `request` with a `reply`."""

    subject: str
    request: type[Req]
    reply: type[Rep]
    summary: str


@dataclass(frozen=True, slots=True)
class Stream(Generic[Msg]):
    """A JetStream subject: `message`s kept in `stream`, deduplicated by `Nats-Msg-Id`."""

    subject: str
    message: type[Msg]
    stream: str
    summary: str
    # The durable pull consumer every replica of the consuming service shares; None when only
    # operators read the subject.
    durable: str | None = None


@dataclass(frozen=True, slots=True)
class Topic(Generic[Msg]):
    """Core NATS fan-out on `<prefix>.<key>`: whoever listens gets it, nothing is kept."""

    prefix: str
    message: type[Msg]
    summary: str

    def subject(self, key: str) -> str:
        return f"{self.prefix}.{key}"

    @property
    def wildcard(self) -> str:
        return f"{self.prefix}.*"


# ---- request-reply ---------------------------------------------------------------------------------

TIME_RESOLVE: Endpoint[ResolveRequest, ResolveResult] = Endpoint(
    subjects.TIME_RESOLVE, ResolveRequest, ResolveResult, "A canonical date/time symbol to absolute time."
)
TIME_RESOLVE_RANGE: Endpoint[RangeRequest, RangeResult] = Endpoint(
    subjects.TIME_RESOLVE_RANGE, RangeRequest, RangeResult, "Two symbols to an absolute range."
)
TIME_PARSE_REPLY: Endpoint[ParseReplyRequest, ParsedReply] = Endpoint(
    subjects.TIME_PARSE_REPLY,
    ParseReplyRequest,
    ParsedReply,
    "A short reply to a slot patch, and whether the grammar consumed all of it.",
)
TIME_CHOOSE_SLOT: Endpoint[ChooseSlotRequest, ChosenSlot] = Endpoint(
    subjects.TIME_CHOOSE_SLOT,
    ChooseSlotRequest,
    ChosenSlot,
    "Which of the times proposed to someone their reply names (contract §20).",
)
COMMAND_EXECUTE: Endpoint[CommandRequest, CommandResult] = Endpoint(
    subjects.COMMAND_EXECUTE,
    CommandRequest,
    CommandResult,
    "A calendar write; `persisted` is sent only after the commit.",
)
COMMAND_QUERY: Endpoint[QueryRequest, QueryResult] = Endpoint(
    subjects.COMMAND_QUERY, QueryRequest, QueryResult, "A read of calendar state."
)
AGENT_TURN_LOOKUP: Endpoint[TurnLookup, TurnLookupResult] = Endpoint(
    subjects.AGENT_TURN_LOOKUP,
    TurnLookup,
    TurnLookupResult,
    "The stored answer of an earlier turn with this client message id.",
)
AGENT_HISTORY: Endpoint[HistoryRequest, HistoryResult] = Endpoint(
    subjects.AGENT_HISTORY,
    HistoryRequest,
    HistoryResult,
    "One page of the caller's archived conversation, each message with its turn's outcome.",
)
EVALREC_TIMELINE: Endpoint[TimelineRequest, TimelineResult] = Endpoint(
    subjects.EVALREC_TIMELINE, TimelineRequest, TimelineResult, "Where the time of one turn went."
)
EVALREC_REPORT: Endpoint[ReportRequest, ReportResult] = Endpoint(
    subjects.EVALREC_REPORT, ReportRequest, ReportResult, "Recorded turns summed up, with eval candidates."
)
EVALREC_USAGE: Endpoint[UsageRequest, UsageResult] = Endpoint(
    subjects.EVALREC_USAGE, UsageRequest, UsageResult, "Tokens the model used, per day, user or model."
)

CALDAV_ACCOUNTS: Endpoint[AccountRequest, AccountResult] = Endpoint(
    subjects.CALDAV_ACCOUNTS,
    AccountRequest,
    AccountResult,
    "Connect (validated by a PROPFIND), list or disconnect the caller's CalDAV accounts.",
)

PEOPLE_MANAGE: Endpoint[PeopleRequest, PeopleResult] = Endpoint(
    subjects.PEOPLE_MANAGE,
    PeopleRequest,
    PeopleResult,
    "The caller's contacts (add, list, delete) and private mail address.",
)


def health(service: str) -> Endpoint[HealthCheck, HealthReply]:
    return Endpoint(subjects.health(service), HealthCheck, HealthReply, f"Is a {service} replica answering?")


# ---- JetStream -------------------------------------------------------------------------------------

TURN_REQUESTED: Stream[TurnRequested] = Stream(
    subjects.TURN_REQUESTED,
    TurnRequested,
    subjects.TURNS_STREAM,
    "One chat turn for the agent; Nats-Msg-Id is user:client_message_id (or the turn id).",
    durable=subjects.AGENT_CONSUMER,
)
TURN_RECORDED: Stream[TurnRecord] = Stream(
    subjects.TURN_RECORDED,
    TurnRecord,
    subjects.RECORDS_STREAM,
    "What the agent reports about a finished turn.",
    durable=subjects.EVALREC_CONSUMER,
)


def deadletter(service: str) -> Stream[DeadLetter]:
    return Stream(
        subjects.deadletter(service),
        DeadLetter,
        subjects.DEADLETTER_STREAM,
        f"A malformed or exhausted message {service} gave up on.",
    )


# ---- core fan-out ----------------------------------------------------------------------------------

CALDAV_OUTBOX: Topic[OutboxWake] = Topic(
    subjects.CALDAV_OUTBOX_PREFIX,
    OutboxWake,
    "Writes of this user wait in the CalDAV outbox; every commands replica's worker looks at once.",
)
TURN_EVENTS: Topic[TurnEvent] = Topic(
    subjects.TURN_EVENTS_PREFIX, TurnEvent, "Progress of one turn, keyed by its turn id; `turn.done` ends it."
)
