"""The compose deployment agrees with the code: services, commands, environment, ports, and a
three-node JetStream cluster every service reaches on each node."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from calagent.contracts import subjects
from calagent.runtime.settings import Settings
from calagent.runtime.trust import ADMIN, authorization_conf, password_variable

pytestmark = pytest.mark.unit

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SERVICES = subjects.SERVICES
REPLICAS = {"gateway": 1, "agent": 2, "commands": 2, "timeparse": 1, "evalrec": 1}
NATS_NODES = ("nats-1", "nats-2", "nats-3")
ROUTE_PASSWORD = "CALAGENT_NATS_ROUTE_PASSWORD"
# Variables of the OpenTelemetry SDK itself, read by the exporters rather than by Settings.
OTEL_VAR = re.compile(r"^OTEL_[A-Z0-9_]+$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def known_env_vars() -> set[str]:
    return {field.alias for field in Settings.model_fields.values() if field.alias}


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the `- KEY=value` form
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): str(v) for k, v in env.items()}


def published_ports(compose: dict[str, Any]) -> set[int]:
    ports: set[int] = set()
    for service in compose["services"].values():
        for entry in service.get("ports") or []:
            text = str(entry["published"] if isinstance(entry, dict) else entry)
            ports.add(int(text.split(":")[-2] if text.count(":") else text))
    return ports


def test_every_service_runs_its_own_module(compose: dict[str, Any]) -> None:
    for name in SERVICES:
        service = compose["services"].get(name)
        assert service is not None, f"{name} is missing from compose.yaml"
        assert service["command"] == ["python", "-m", f"calagent.{name}"]
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"


@pytest.mark.parametrize("name", SERVICES)
def test_service_module_exists(name: str) -> None:
    assert importlib.util.find_spec(f"calagent.{name}.__main__") is not None, (
        f"calagent.{name} has no __main__"
    )


def test_every_environment_variable_is_one_the_code_reads(compose: dict[str, Any]) -> None:
    known = known_env_vars()
    for name in SERVICES:
        env = environment_of(compose["services"][name])
        unknown = {var for var in env if var not in known and not OTEL_VAR.match(var)}
        assert not unknown, f"{name} sets variables no code reads: {sorted(unknown)}"


def test_services_are_wired_to_the_infrastructure(compose: dict[str, Any]) -> None:
    for name in SERVICES:
        env = environment_of(compose["services"][name])
        # Its own NATS user, with the password nats.conf gives that user, on every node; and a
        # copy of each stream on every node.
        userinfo = f"{name}:${{{password_variable(name)}:?}}"
        assert env["NATS_URL"] == ",".join(f"nats://{userinfo}@{node}:4222" for node in NATS_NODES)
        assert env["CALAGENT_NATS_REPLICAS"] == str(len(NATS_NODES))
        assert env["DATABASE_URL"] == "postgresql+asyncpg://calagent:calagent@postgres:5432/calagent"
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"
        assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
        assert env["CALAGENT_HTTP_PORT"] == "8080"
        assert "CALAGENT_AUTH_SECRET" in env
        for passed_through in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CALAGENT_MODEL"):
            assert env[passed_through].startswith("${" + passed_through), passed_through


def test_replicas_health_checks_and_start_order(compose: dict[str, Any]) -> None:
    for name in SERVICES:
        service = compose["services"][name]
        assert service["deploy"]["replicas"] == REPLICAS[name]
        assert service["healthcheck"]["test"], f"{name} has no healthcheck"
        depends = service["depends_on"]
        for node in NATS_NODES:
            assert depends[node]["condition"] == "service_healthy"
        assert "container_name" not in service, "a fixed container name cannot be scaled"
    for name in ("agent", "commands", "evalrec"):
        assert compose["services"][name]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_infrastructure_images_and_ports(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for node in NATS_NODES:
        assert services[node]["image"].startswith("nats:2.10")
    assert services["postgres"]["image"] == "postgres:16"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert re.fullmatch(r"jaegertracing/jaeger:2\.\d+\.\d+", services["jaeger"]["image"])
    assert {8080, 4222, 4317, 4318, 16686} <= published_ports(compose)
    assert "8080:8080" in services["gateway"]["ports"]
    volumes = compose["volumes"]
    node_volumes = set()
    for node in NATS_NODES:
        data = [str(v).split(":")[0] for v in services[node]["volumes"] if str(v).endswith(":/data")]
        assert len(data) == 1 and data[0] in volumes, node
        node_volumes.add(data[0])
    assert len(node_volumes) == len(NATS_NODES), "each node keeps its own store"
    assert any(str(v).split(":")[0] in volumes for v in services["postgres"]["volumes"])


def test_nats_runs_jetstream_with_fsync_on_every_write(compose: dict[str, Any]) -> None:
    config = (DEPLOY / "nats.conf").read_text(encoding="utf-8")
    uncommented = "\n".join(line.split("#", 1)[0] for line in config.splitlines())
    block = re.search(r"jetstream\s*\{(?P<body>[^}]*)\}", uncommented)
    assert block is not None, "nats.conf has no jetstream block"
    assert re.search(r"^\s*sync_interval\s*:\s*always\s*$", block["body"], re.MULTILINE)
    assert re.search(r"^\s*store_dir\s*:\s*/data", block["body"], re.MULTILINE)
    for node in NATS_NODES:
        assert "./nats.conf:/etc/nats/nats.conf:ro" in compose["services"][node]["volumes"]
        assert compose["services"][node]["command"][:2] == ["-c", "/etc/nats/nats.conf"]


def _flag(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_the_nats_nodes_form_one_cluster_with_authenticated_routes(compose: dict[str, Any]) -> None:
    names = [_flag(compose["services"][node]["command"], "--name") for node in NATS_NODES]
    assert names == list(NATS_NODES)  # JetStream needs a distinct server name per node
    for node in NATS_NODES:
        routes = _flag(compose["services"][node]["command"], "--routes").split(",")
        # Every node routes to all three (a route to itself is dropped), with the route password.
        assert routes == [
            f"nats-route://route:${{{ROUTE_PASSWORD}:{'?' if i else '?set a password for each NATS user (deploy/README.md)'}}}@{peer}:6222"
            for i, peer in enumerate(NATS_NODES)
        ]
    config = (DEPLOY / "nats.conf").read_text(encoding="utf-8")
    block = re.search(r"^cluster\s*\{(?P<body>.*?)^\}", config, re.MULTILINE | re.DOTALL)
    assert block is not None, "nats.conf has no cluster block"
    assert re.search(r"^\s*port\s*:\s*6222\s*$", block["body"], re.MULTILINE)
    assert re.search(rf"^\s*password\s*:\s*\${ROUTE_PASSWORD}\s*$", block["body"], re.MULTILINE)


def test_dockerfile_installs_the_project(compose: dict[str, Any]) -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.MULTILINE)
    for copied in ("pyproject.toml", "libs", "services", "apps"):
        assert re.search(rf"^COPY .*\b{copied}\b", dockerfile, re.MULTILINE), f"{copied} is not copied"
    assert re.search(r"^RUN pip install \.", dockerfile, re.MULTILINE)
    healthcheck = DEPLOY / "healthcheck.py"
    assert healthcheck.exists()
    assert "healthcheck.py" in dockerfile
    assert compose["services"]["gateway"]["build"]["context"] == ".."


def test_nats_conf_grants_exactly_what_the_subject_table_derives(compose: dict[str, Any]) -> None:
    config = (DEPLOY / "nats.conf").read_text(encoding="utf-8")
    assert authorization_conf() in config
    for node in NATS_NODES:
        nats_env = environment_of(compose["services"][node])
        for variable in (*map(password_variable, (*SERVICES, ADMIN)), ROUTE_PASSWORD):
            assert nats_env[variable].startswith("${" + variable + ":?"), (node, variable)


def test_nats_conf_is_valid_for_nats_server_and_needs_every_password(tmp_path: Path) -> None:
    import os
    import subprocess

    from calagent.devtools.nats_server import nats_server_binary

    conf = tmp_path / "nats.conf"
    conf.write_text((DEPLOY / "nats.conf").read_text(encoding="utf-8"))
    passwords = {password_variable(user): f"pw-{user}" for user in (*SERVICES, ADMIN)}
    passwords[ROUTE_PASSWORD] = "pw-route"
    checked = subprocess.run(
        [
            nats_server_binary(),
            "-t",
            "-c",
            str(conf),
            "--name",
            "nats-1",
            "--routes",
            "nats-route://route:pw-route@nats-2:6222",
        ],
        env={**os.environ, **passwords},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert checked.returncode == 0, checked.stderr
    without = subprocess.run(
        [nats_server_binary(), "-t", "-c", str(conf)],
        env={k: v for k, v in os.environ.items() if k not in passwords},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert without.returncode != 0
    assert "CALAGENT_NATS_" in without.stdout + without.stderr


def test_three_nodes_from_nats_conf_form_one_jetstream_cluster(
    tmp_path: Path,
) -> None:
    """The nodes as compose runs them (the same file, a name and the route list each), on this
    host's ports instead of the containers': they form one cluster with JetStream."""
    import os
    import subprocess

    from calagent.devtools.nats_cluster import wait_for_jetstream
    from calagent.devtools.nats_server import nats_server_binary
    from calagent.devtools.processes import free_port, wait_for_port

    passwords = {password_variable(user): f"pw-{user}" for user in (*SERVICES, ADMIN)}
    env = {**os.environ, **passwords, ROUTE_PASSWORD: "pw-route"}
    ports = [(free_port(), free_port(), free_port()) for _ in NATS_NODES]
    routes = ",".join(f"nats-route://route:pw-route@127.0.0.1:{route}" for _, route, _ in ports)
    nodes = []
    try:
        for node, (client, route, monitor) in zip(NATS_NODES, ports, strict=True):
            # Each container has its own /data volume; here, a directory each.
            conf = tmp_path / f"{node}.conf"
            text = (DEPLOY / "nats.conf").read_text(encoding="utf-8")
            conf.write_text(text.replace("/data/jetstream", str(tmp_path / node)))
            argv = [nats_server_binary(), "-c", str(conf), "--name", node, "--routes", routes]
            argv += ["-a", "127.0.0.1", "-p", str(client), "-m", str(monitor)]
            argv += ["--cluster", f"nats://127.0.0.1:{route}"]
            nodes.append(
                subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        for (client, _, _), proc in zip(ports, nodes, strict=True):
            wait_for_port(client, 20, proc)
        admin = ",".join(f"nats://admin:pw-admin@127.0.0.1:{client}" for client, _, _ in ports)
        wait_for_jetstream(admin, 60)
    finally:
        for proc in nodes:
            proc.terminate()
            proc.wait(timeout=20)
