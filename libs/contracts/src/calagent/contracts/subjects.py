"""Every subject and stream name on the bus, in one place.

Subjects are `calagent.<area>.<verb>`. Request-reply subjects are served by queue groups so
replicas share the load; turn and record subjects live in JetStream streams consumed through
durable pull consumers shared by replicas.
"""

from typing import Final

# JetStream: the gateway publishes one message per turn; agents pull from a shared consumer.
TURN_REQUESTED: Final = "calagent.turn.requested"
TURNS_STREAM: Final = "CALAGENT_TURNS"
AGENT_CONSUMER: Final = "agent"

# Core NATS: the agent streams progress of one turn to whoever waits for it (the gateway), on
# `<prefix>.<turn_id>` (`wire.TURN_EVENTS.subject(turn_id)`).
TURN_EVENTS_PREFIX: Final = "calagent.turn.events"

# JetStream: finished turn records for the eval recorder.
TURN_RECORDED: Final = "calagent.turn.recorded"
RECORDS_STREAM: Final = "CALAGENT_RECORDS"
EVALREC_CONSUMER: Final = "evalrec"

# Request-reply, queue groups.
TIME_RESOLVE: Final = "calagent.time.resolve"
TIME_RESOLVE_RANGE: Final = "calagent.time.resolve_range"
TIME_PARSE_REPLY: Final = "calagent.time.parse_reply"
TIME_CHOOSE_SLOT: Final = "calagent.time.choose_slot"
COMMAND_EXECUTE: Final = "calagent.command.execute"
COMMAND_QUERY: Final = "calagent.command.query"
AGENT_TURN_LOOKUP: Final = "calagent.agent.lookup"
AGENT_HISTORY: Final = "calagent.agent.history"
EVALREC_TIMELINE: Final = "calagent.evalrec.timeline"
EVALREC_REPORT: Final = "calagent.evalrec.report"
EVALREC_USAGE: Final = "calagent.evalrec.usage"
CALDAV_ACCOUNTS: Final = "calagent.caldav.accounts"
PEOPLE_MANAGE: Final = "calagent.people.manage"

# Core NATS: commands replicas wake their CalDAV outbox worker on `<prefix>.<user_id>` after a commit.
CALDAV_OUTBOX_PREFIX: Final = "calagent.caldav.outbox"

# Health: every service answers `calagent.health.<service>`.
HEALTH_PREFIX: Final = "calagent.health"

# Dead letters: a malformed or exhausted message is recorded here, never retried.
DEADLETTER_PREFIX: Final = "calagent.deadletter"
DEADLETTER_STREAM: Final = "CALAGENT_DEADLETTER"

# JetStream key-value: the gateway's claims of client message ids (one winner across replicas).
GATEWAY_KEYS_BUCKET: Final = "calagent_gateway_message_keys"
# Per-user turn counts per minute and tokens per day, shared by gateway replicas (contract §17).
GATEWAY_QUOTAS_BUCKET: Final = "calagent_gateway_quotas"

# JetStream key-value: each user's saved time zone, written by commands after the settings commit,
# watched by every gateway replica, which stamps it on the user's turns and reads (contract §16).
USER_ZONES_BUCKET: Final = "calagent_user_zones"

SERVICES: Final = ("gateway", "agent", "commands", "timeparse", "evalrec")


def health(service: str) -> str:
    return f"{HEALTH_PREFIX}.{service}"


def deadletter(service: str) -> str:
    return f"{DEADLETTER_PREFIX}.{service}"


def queue_group(service: str) -> str:
    return f"calagent-{service}"
