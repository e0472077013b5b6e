"""Who may publish and subscribe what: derived from the subject table, enforced by a real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import typing
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from calagent.contracts import subjects, wire
from calagent.contracts.turns import TurnAnswer, TurnEvent
from calagent.devtools.nats_server import EmbeddedNats
from calagent.runtime.trust import (
    ADMIN,
    ENDPOINT_SIDES,
    STREAM_SIDES,
    TOPIC_SIDES,
    allowed,
    covers,
    load_or_create_passwords,
    permissions,
    redact,
    user_of,
    with_credentials,
)

TURN_DONE = TurnEvent(
    turn_id="t-forged",
    type="turn.done",
    answer=TurnAnswer(
        turn_id="t-forged",
        conversation_id="default",
        outcome="created",
        reply="已创建「转账给张三」",
        intent="schedule.create",
    ),
).model_dump_json()


# ---- derived, complete ---------------------------------------------------------------------------


@pytest.mark.unit
def test_every_subject_declared_in_wire_says_who_is_on_each_side() -> None:
    declared = vars(wire).values()
    endpoints = {d.subject for d in declared if isinstance(d, wire.Endpoint)}
    streams = {d.subject for d in declared if isinstance(d, wire.Stream)}
    topics = {d.prefix for d in declared if isinstance(d, wire.Topic)}
    assert endpoints == set(ENDPOINT_SIDES)
    assert streams == set(STREAM_SIDES)
    assert topics == set(TOPIC_SIDES)


@pytest.mark.unit
def test_subjects_made_per_service_are_the_ones_the_grants_know() -> None:
    # `health(service)` and `deadletter(service)` are granted per service; a new factory of
    # subjects in `wire` would need the same, so it must show up here first.
    declaration = (wire.Endpoint, wire.Stream, wire.Topic)
    factories = {
        name
        for name, value in vars(wire).items()
        if inspect.isfunction(value)
        and value.__module__ == wire.__name__
        and typing.get_origin(typing.get_type_hints(value).get("return")) in declaration
    }
    assert factories == {"health", "deadletter"}
    for service in subjects.SERVICES:
        assert allowed(service, subjects.health(service), publish=False)
        assert allowed(service, subjects.deadletter(service), publish=True)
        others = [s for s in subjects.SERVICES if s != service]
        assert not any(allowed(service, subjects.deadletter(o), publish=True) for o in others)


@pytest.mark.unit
def test_only_the_agent_publishes_turn_events_and_only_the_gateway_turn_requests() -> None:
    event = wire.TURN_EVENTS.subject("t1")
    assert [s for s in subjects.SERVICES if allowed(s, event, publish=True)] == ["agent"]
    assert [s for s in subjects.SERVICES if allowed(s, subjects.TURN_REQUESTED, publish=True)] == ["gateway"]
    assert [s for s in subjects.SERVICES if allowed(s, subjects.COMMAND_EXECUTE, publish=True)] == ["agent"]
    assert [s for s in subjects.SERVICES if allowed(s, event, publish=False)] == ["gateway"]
    assert [s for s in subjects.SERVICES if allowed(s, subjects.COMMAND_EXECUTE, publish=False)] == [
        "commands"
    ]


@pytest.mark.unit
def test_no_service_may_read_another_services_replies() -> None:
    for service in subjects.SERVICES:
        for other in subjects.SERVICES:
            assert allowed(service, f"_INBOX.{other}.abc", publish=False) == (service == other)
        assert not allowed(service, "_INBOX.abc", publish=False)
        assert not allowed(service, ">", publish=False)


@pytest.mark.unit
def test_wildcards_cover_what_nats_would_match() -> None:
    assert covers("calagent.turn.events.*", "calagent.turn.events.t1")
    assert covers("calagent.turn.events.*", "calagent.turn.events.*")
    assert not covers("calagent.turn.events.*", "calagent.turn.events.>")
    assert not covers("calagent.turn.events.*", "calagent.turn.events.a.b")
    assert covers("$JS.ACK.S.d.>", "$JS.ACK.S.d.1.2.3")
    assert not covers("$JS.ACK.S.d.>", "$JS.ACK.S.d")
    assert covers(">", "anything.at.all")


@pytest.mark.unit
def test_credentials_ride_in_every_server_of_the_url_and_never_in_logs() -> None:
    url = with_credentials("nats://a:4222, nats://b:4223", "agent", "s3cr/t")
    assert url == "nats://agent:s3cr%2Ft@a:4222,nats://agent:s3cr%2Ft@b:4223"
    assert user_of(url) == "agent"
    assert "s3cr" not in redact(url)
    assert redact(url) == "nats://agent:***@a:4222,nats://agent:***@b:4223"
    assert redact("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"


@pytest.mark.unit
def test_the_admin_may_do_everything_and_nobody_else_may() -> None:
    blocks = permissions()
    assert blocks[ADMIN]["publish"]["allow"] == [">"]
    for service in subjects.SERVICES:
        assert ">" not in blocks[service]["publish"]["allow"]
        assert ">" not in blocks[service]["subscribe"]["allow"]


# ---- enforced by the server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNats]:
    embedded = EmbeddedNats(Path(tmp_path_factory.mktemp("trust")) / "nats")
    embedded.start()
    yield embedded
    embedded.stop()


class Connection:
    """A nats-py connection that keeps what the server refused."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.nc: NatsClient | None = None
        self._refusal = asyncio.Event()

    async def open(self, url: str) -> NatsClient:
        async def on_error(exc: Exception) -> None:
            self.errors.append(str(exc))
            self._refusal.set()

        self.nc = await nats.connect(url, error_cb=on_error, allow_reconnect=False)
        return self.nc

    async def refused(self, timeout: float = 2.0) -> str:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._refusal.wait(), timeout)
        return self.errors[0] if self.errors else ""


@pytest.fixture
async def connections() -> AsyncIterator[list[Connection]]:
    opened: list[Connection] = []
    yield opened
    for connection in opened:
        if connection.nc is not None and not connection.nc.is_closed:
            await connection.nc.close()


async def _connect(
    server: EmbeddedNats, user: str, opened: list[Connection]
) -> tuple[NatsClient, Connection]:
    connection = Connection()
    opened.append(connection)
    return await connection.open(server.url_for(user)), connection


async def _gateway_listening(server: EmbeddedNats, opened: list[Connection]) -> asyncio.Queue[Msg]:
    gateway, _ = await _connect(server, "gateway", opened)
    received: asyncio.Queue[Msg] = asyncio.Queue()

    async def on_event(msg: Msg) -> None:
        received.put_nowait(msg)

    await gateway.subscribe(wire.TURN_EVENTS.wildcard, cb=on_event)
    await gateway.flush()
    return received


@pytest.mark.integration
@pytest.mark.parametrize("forger", ["gateway", "commands", "timeparse", "evalrec"])
async def test_a_forged_turn_done_is_refused_by_the_server_and_never_reaches_the_gateway(
    server: EmbeddedNats, connections: list[Connection], forger: str
) -> None:
    received = await _gateway_listening(server, connections)
    nc, connection = await _connect(server, forger, connections)
    await nc.publish(wire.TURN_EVENTS.subject("t-forged"), TURN_DONE.encode())
    await nc.flush()
    assert "permissions violation for publish" in (await connection.refused()).lower()
    await asyncio.sleep(0.3)
    assert received.empty()

    # The same bytes from the agent's credential arrive: the refusal above is the permission.
    agent, agent_connection = await _connect(server, "agent", connections)
    await agent.publish(wire.TURN_EVENTS.subject("t-forged"), TURN_DONE.encode())
    await agent.flush()
    msg = await asyncio.wait_for(received.get(), timeout=5)
    assert TurnEvent.model_validate_json(msg.data).type == "turn.done"
    assert agent_connection.errors == []


@pytest.mark.integration
@pytest.mark.parametrize(
    ("user", "subject"),
    [
        ("commands", "calagent.turn.events.>"),
        ("evalrec", "calagent.turn.events.*"),
        ("timeparse", "calagent.turn.events.t1"),
        ("gateway", subjects.COMMAND_EXECUTE),
        ("agent", subjects.COMMAND_QUERY),
        ("gateway", "_INBOX.agent.>"),
        ("commands", "_INBOX.>"),
        ("gateway", ">"),
    ],
)
async def test_subscribing_where_a_service_has_no_business_is_refused(
    server: EmbeddedNats, connections: list[Connection], user: str, subject: str
) -> None:
    nc, connection = await _connect(server, user, connections)
    await nc.subscribe(subject)
    await nc.flush()
    assert "permissions violation for subscription" in (await connection.refused()).lower()


@pytest.mark.integration
async def test_only_the_agent_may_call_the_commands_write_subject(
    server: EmbeddedNats, connections: list[Connection]
) -> None:
    commands, _ = await _connect(server, "commands", connections)
    calls: list[bytes] = []

    async def on_command(msg: Msg) -> None:
        calls.append(msg.data)
        await msg.respond(b"{}")

    await commands.subscribe(subjects.COMMAND_EXECUTE, queue=subjects.queue_group("commands"), cb=on_command)
    await commands.flush()
    gateway, connection = await _connect(server, "gateway", connections)
    await gateway.publish(subjects.COMMAND_EXECUTE, b'{"forged": true}')
    await gateway.flush()
    assert "permissions violation for publish" in (await connection.refused()).lower()

    agent = await nats.connect(server.url_for("agent"), inbox_prefix="_INBOX.agent")
    try:
        reply = await agent.request(subjects.COMMAND_EXECUTE, b'{"real": true}', timeout=5)
    finally:
        await agent.close()
    assert reply.data == b"{}"
    assert calls == [b'{"real": true}']


@pytest.mark.integration
@pytest.mark.parametrize("who", ["nobody", "wrong password", "unknown user"])
async def test_a_client_without_valid_credentials_is_refused(server: EmbeddedNats, who: str) -> None:
    url = {
        "nobody": server.url,
        "wrong password": f"nats://agent:not-the-password@127.0.0.1:{server.port}",
        "unknown user": f"nats://mallory:whatever@127.0.0.1:{server.port}",
    }[who]
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)


@pytest.mark.unit
def test_passwords_are_private_and_kept_across_restarts(server: EmbeddedNats) -> None:
    users_file = server.data_dir / "users.json"
    assert users_file.stat().st_mode & 0o777 == 0o600
    assert server.conf_path.stat().st_mode & 0o777 == 0o600
    assert (server.data_dir / "nats.log").stat().st_mode & 0o777 == 0o600
    assert load_or_create_passwords(users_file) == server.passwords


@pytest.mark.integration
async def test_a_bus_given_a_server_list_with_credentials_connects_past_a_dead_one(
    server: EmbeddedNats,
) -> None:
    from calagent.runtime.bus import Bus

    dead = f"nats://agent:{server.passwords['agent']}@127.0.0.1:1"
    bus = await Bus.connect(f"{dead},{server.url_for('agent')}", "agent")
    try:
        assert bus.connected
        # The runtime's own test may look inside: which of the two servers it reached.
        url = bus._connection.connected_url
        assert url is not None and url.port == server.port
    finally:
        await bus.close()
