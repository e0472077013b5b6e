"""Who may publish and subscribe what on the bus, derived from the subject table in one place.

`calagent.contracts.wire` says what travels on each subject; `SIDES` below says which service is on
which side of each of them. `permissions()` turns the two into one NATS user per service whose
allow-lists name nothing else (everything not allowed is refused by the server): only the agent
publishes turn events, only the gateway publishes turn requests, only the agent executes
commands. A subject added to `wire` without a line here fails `test_trust.py`, so it cannot be
silently left open or silently unreachable.

Replies are not granted as subjects: a service that serves an endpoint gets `allow_responses`
(it may answer the requests it received, once each), and a caller subscribes only to its own inbox
prefix (`_INBOX.<user>.>`, see `inbox_prefix`), so no service can read another's replies.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from calagent.contracts import subjects, wire

# Full access, for operators' CLI calls (`calagent timeline`, `calagent report`) and test harnesses.
ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class EndpointSides:
    served_by: str
    called_by: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StreamSides:
    published_by: tuple[str, ...]
    # The consuming service, which owns the stream's durable consumer; None when only operators read.
    consumed_by: str | None


@dataclass(frozen=True, slots=True)
class TopicSides:
    published_by: tuple[str, ...]
    listened_by: tuple[str, ...]


# Every subject of `calagent.contracts.wire`, by its declaration. Health and dead-letter subjects
# exist once per service and are added in `_grants`.
ENDPOINT_SIDES: Mapping[str, EndpointSides] = {
    wire.TIME_RESOLVE.subject: EndpointSides("timeparse", ("commands",)),
    wire.TIME_RESOLVE_RANGE.subject: EndpointSides("timeparse", ("commands",)),
    # The agent reads a tool argument written in words; commands reads an answer to a stub.
    wire.TIME_PARSE_REPLY.subject: EndpointSides("timeparse", ("agent", "commands")),
    # Commands reads which proposed time an attendee's mailed reply names.
    wire.TIME_CHOOSE_SLOT.subject: EndpointSides("timeparse", ("commands",)),
    wire.COMMAND_EXECUTE.subject: EndpointSides("commands", ("agent",)),
    # The gateway's HTTP reads (events, the active stub, the calendar feed) are queries.
    wire.COMMAND_QUERY.subject: EndpointSides("commands", ("agent", "gateway")),
    wire.AGENT_TURN_LOOKUP.subject: EndpointSides("agent", ("gateway",)),
    # The page's conversation after a reload (`GET /v1/messages`).
    wire.AGENT_HISTORY.subject: EndpointSides("agent", ("gateway",)),
    wire.EVALREC_TIMELINE.subject: EndpointSides("evalrec", ("gateway",)),
    # Only the operator's CLI asks for reports (with the admin credential).
    wire.EVALREC_REPORT.subject: EndpointSides("evalrec", ()),
    # A user's own tokens (`GET /v1/usage`); the operator's CLI asks for everyone's.
    wire.EVALREC_USAGE.subject: EndpointSides("evalrec", ("gateway",)),
    # Connected calendars: the gateway's /v1/accounts routes.
    wire.CALDAV_ACCOUNTS.subject: EndpointSides("commands", ("gateway",)),
    # People: the gateway's /v1/contacts and /v1/mail-address routes.
    wire.PEOPLE_MANAGE.subject: EndpointSides("commands", ("gateway",)),
}
STREAM_SIDES: Mapping[str, StreamSides] = {
    wire.TURN_REQUESTED.subject: StreamSides(("gateway",), "agent"),
    wire.TURN_RECORDED.subject: StreamSides(("agent",), "evalrec"),
}
TOPIC_SIDES: Mapping[str, TopicSides] = {
    wire.TURN_EVENTS.prefix: TopicSides(("agent",), ("gateway",)),
    # A commit that queued CalDAV deliveries wakes every commands replica's outbox worker.
    wire.CALDAV_OUTBOX.prefix: TopicSides(("commands",), ("commands",)),
}
# Each service's health endpoint is asked by the gateway (`/healthz`).
HEALTH_CALLERS = ("gateway",)
# JetStream key-value buckets, by owner.
KV_BUCKETS: Mapping[str, tuple[str, ...]] = {
    "gateway": (subjects.GATEWAY_KEYS_BUCKET, subjects.GATEWAY_QUOTAS_BUCKET),
    # Each user's saved zone, written after the settings commit.
    "commands": (subjects.USER_ZONES_BUCKET,),
}
# Buckets a service may open and watch (an ordered push consumer into its own inbox), never write:
# every gateway replica keeps the users' saved zones in memory.
KV_WATCHERS: Mapping[str, tuple[str, ...]] = {"gateway": (subjects.USER_ZONES_BUCKET,)}
STREAM_NAMES = (subjects.TURNS_STREAM, subjects.RECORDS_STREAM, subjects.DEADLETTER_STREAM)


def inbox_prefix(user: str) -> str:
    """Where replies to `user`'s requests arrive; only `user` may subscribe under it."""
    return f"_INBOX.{user}"


@dataclass
class Grant:
    publish: list[str] = field(default_factory=list)
    subscribe: list[str] = field(default_factory=list)
    # May answer requests it received (core request-reply), once per request.
    responds: bool = False

    def add(self, publish: Iterable[str] = (), subscribe: Iterable[str] = ()) -> None:
        self.publish.extend(s for s in publish if s not in self.publish)
        self.subscribe.extend(s for s in subscribe if s not in self.subscribe)


def _wire_streams() -> dict[str, wire.Stream[Any]]:
    return {s.subject: s for s in vars(wire).values() if isinstance(s, wire.Stream)}


def _stream_api(stream: str, *more: str) -> list[str]:
    """The stream API subjects that look a stream up and make or update it (what opening one at
    start needs), and any `more` verbs."""
    return [f"$JS.API.STREAM.{verb}.{stream}" for verb in ("INFO", "CREATE", "UPDATE", *more)]


def _grants(services: Iterable[str] = subjects.SERVICES) -> dict[str, Grant]:
    grants = {service: Grant() for service in services}
    streams = _wire_streams()
    for service, grant in grants.items():
        # Every service's bus makes sure the streams exist at start and dead-letters what it gives up on.
        grant.add(
            publish=[
                *(api for name in STREAM_NAMES for api in _stream_api(name)),
                subjects.deadletter(service),
            ],
            # Its own health subject both ways: it answers there, and a container healthcheck
            # running with the service's credential asks there.
            subscribe=[f"{inbox_prefix(service)}.>", subjects.health(service)],
        )
        grant.add(publish=[subjects.health(service)])
        grant.responds = True
        for bucket in KV_BUCKETS.get(service, ()):
            stream = f"KV_{bucket}"
            grant.add(
                publish=[
                    *_stream_api(stream, "MSG.GET"),
                    f"$JS.API.DIRECT.GET.{stream}",
                    f"$JS.API.DIRECT.GET.{stream}.>",
                    f"$KV.{bucket}.>",
                ]
            )
        for bucket in KV_WATCHERS.get(service, ()):
            stream = f"KV_{bucket}"
            grant.add(
                publish=[
                    # Opened (made, when its owner has not started yet) with the owner's configuration.
                    *_stream_api(stream),
                    f"$JS.API.CONSUMER.CREATE.{stream}",
                    f"$JS.API.CONSUMER.CREATE.{stream}.>",
                    f"$JS.API.CONSUMER.INFO.{stream}.>",
                    f"$JS.API.CONSUMER.DELETE.{stream}.>",
                    # The ordered consumer's flow-control answers.
                    f"$JS.FC.{stream}.>",
                ]
            )
    for caller in HEALTH_CALLERS:
        grants[caller].add(publish=[subjects.health(service) for service in grants])
    for subject, endpoint in ENDPOINT_SIDES.items():
        grants[endpoint.served_by].add(subscribe=[subject])
        for caller in endpoint.called_by:
            grants[caller].add(publish=[subject])
    for subject, stream_sides in STREAM_SIDES.items():
        for publisher in stream_sides.published_by:
            grants[publisher].add(publish=[subject])
        consumer = stream_sides.consumed_by
        if consumer is not None:
            declared = streams[subject]
            name, durable = declared.stream, declared.durable
            grants[consumer].add(
                publish=[
                    f"$JS.API.CONSUMER.INFO.{name}.{durable}",
                    f"$JS.API.CONSUMER.CREATE.{name}.{durable}",
                    f"$JS.API.CONSUMER.CREATE.{name}.{durable}.>",
                    f"$JS.API.CONSUMER.DURABLE.CREATE.{name}.{durable}",
                    f"$JS.API.CONSUMER.MSG.NEXT.{name}.{durable}",
                    # ack, nak with backoff, in_progress and term of this consumer's deliveries
                    f"$JS.ACK.{name}.{durable}.>",
                ]
            )
    for prefix, topic_sides in TOPIC_SIDES.items():
        for publisher in topic_sides.published_by:
            grants[publisher].add(publish=[f"{prefix}.*"])
        for listener in topic_sides.listened_by:
            grants[listener].add(subscribe=[f"{prefix}.*"])
    return grants


def covers(pattern: str, subject: str) -> bool:
    """Whether NATS subject `pattern` (with `*` and `>`) takes in every subject `subject` names."""
    wanted, given = pattern.split("."), subject.split(".")
    for index, token in enumerate(wanted):
        if token == ">":
            return len(given) > index
        if index >= len(given) or given[index] == ">":
            return False  # `>` names any depth; only a `>` in the pattern takes that in
        if token not in ("*", given[index]):
            return False
    return len(wanted) == len(given)


def allowed(service: str, subject: str, *, publish: bool) -> bool:
    """Whether `service`'s NATS user may publish (or subscribe to) `subject`."""
    grant = _grants()[service]
    return any(covers(p, subject) for p in (grant.publish if publish else grant.subscribe))


def permissions() -> dict[str, dict[str, Any]]:
    """NATS `permissions` blocks by user: the services' least privilege, and the admin's all."""
    blocks: dict[str, dict[str, Any]] = {}
    for service, grant in _grants().items():
        block: dict[str, Any] = {
            "publish": {"allow": grant.publish},
            "subscribe": {"allow": grant.subscribe},
        }
        if grant.responds:
            block["allow_responses"] = True
        blocks[service] = block
    blocks[ADMIN] = {"publish": {"allow": [">"]}, "subscribe": {"allow": [">"]}}
    return blocks


def password_variable(user: str) -> str:
    """The environment variable a deployment's nats.conf reads `user`'s password from."""
    return f"CALAGENT_NATS_{user.upper()}_PASSWORD"


def authorization_conf(passwords: Mapping[str, str] | None = None) -> str:
    """The `authorization { users = [...] }` block of nats.conf: with `passwords`, those; without,
    references to `password_variable(user)` that nats-server resolves from its environment (the
    form `deploy/nats.conf` keeps)."""
    entries = []
    for user, block in permissions().items():
        password = json.dumps(passwords[user]) if passwords is not None else f"${password_variable(user)}"
        # NATS configuration takes JSON for values; a `$NAME` value is read from the environment.
        entries.append(
            f"    {{user: {json.dumps(user)}, password: {password}, permissions: {json.dumps(block)}}}"
        )
    return "authorization {\n  users = [\n" + ",\n".join(entries) + "\n  ]\n}\n"


def users() -> tuple[str, ...]:
    return (*subjects.SERVICES, ADMIN)


def load_or_create_passwords(path: Path) -> dict[str, str]:
    """One random password per NATS user, kept 0600 in `path` and reused on the next start."""
    known: dict[str, str] = {}
    if path.exists():
        loaded = json.loads(path.read_text())
        if isinstance(loaded, dict):
            known = {str(k): str(v) for k, v in loaded.items()}
    missing = [user for user in users() if not known.get(user)]
    if missing or not path.exists():
        for user in missing:
            known[user] = secrets.token_urlsafe(24)
        write_private(path, json.dumps(known, indent=2))
    path.chmod(0o600)
    return known


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable and writable by its owner only from the first byte (an
    existing file of looser mode is tightened, not trusted)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(text)


def with_credentials(url: str, user: str, password: str) -> str:
    """`url` (one server or a comma-separated list) with `user:password@` on every server."""
    servers = []
    for server in url.split(","):
        parts = urlsplit(server.strip())
        host = parts.hostname or ""
        netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
        if parts.port is not None:
            netloc += f":{parts.port}"
        servers.append(urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)))
    return ",".join(servers)


def user_of(url: str) -> str | None:
    """The user named in a NATS URL (the first server's), if any."""
    first = url.split(",")[0].strip()
    return urlsplit(first).username


def redact(url: str) -> str:
    """`url` with every password replaced, for logs."""
    servers = []
    for server in url.split(","):
        parts = urlsplit(server.strip())
        if parts.password is None:
            servers.append(server.strip())
            continue
        netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        servers.append(urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)))
    return ",".join(servers)
