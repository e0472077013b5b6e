"""The compose deployment agrees with the code: services, commands, environment, ports, JetStream."""

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
        # Its own NATS user, with the password nats.conf gives that user.
        assert env["NATS_URL"] == f"nats://{name}:${{{password_variable(name)}:?}}@nats:4222"
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
        assert depends["nats"]["condition"] == "service_healthy"
        assert "container_name" not in service, "a fixed container name cannot be scaled"
    for name in ("agent", "commands", "evalrec"):
        assert compose["services"][name]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_infrastructure_images_and_ports(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["nats"]["image"].startswith("nats:2.10")
    assert services["postgres"]["image"] == "postgres:16"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert re.fullmatch(r"jaegertracing/jaeger:2\.\d+\.\d+", services["jaeger"]["image"])
    assert {8080, 4222, 4317, 4318, 16686} <= published_ports(compose)
    assert "8080:8080" in services["gateway"]["ports"]
    volumes = compose["volumes"]
    assert any(
        str(v).endswith(":/data") and str(v).split(":")[0] in volumes for v in services["nats"]["volumes"]
    )
    assert any(str(v).split(":")[0] in volumes for v in services["postgres"]["volumes"])


def test_nats_runs_jetstream_with_fsync_on_every_write(compose: dict[str, Any]) -> None:
    config = (DEPLOY / "nats.conf").read_text(encoding="utf-8")
    uncommented = "\n".join(line.split("#", 1)[0] for line in config.splitlines())
    block = re.search(r"jetstream\s*\{(?P<body>[^}]*)\}", uncommented)
    assert block is not None, "nats.conf has no jetstream block"
    assert re.search(r"^\s*sync_interval\s*:\s*always\s*$", block["body"], re.MULTILINE)
    assert re.search(r"^\s*store_dir\s*:\s*/data", block["body"], re.MULTILINE)
    mounts = compose["services"]["nats"]["volumes"]
    assert any(str(m).startswith("./nats.conf:") for m in mounts)
    assert "/etc/nats/nats.conf" in compose["services"]["nats"]["command"]


def test_dockerfile_installs_the_project(compose: dict[str, Any]) -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.MULTILINE)
    for copied in ("pyproject.toml", "libs", "services"):
        assert re.search(rf"^COPY .*\b{copied}\b", dockerfile, re.MULTILINE), f"{copied} is not copied"
    assert re.search(r"^RUN pip install \.", dockerfile, re.MULTILINE)
    healthcheck = DEPLOY / "healthcheck.py"
    assert healthcheck.exists()
    assert "healthcheck.py" in dockerfile
    assert compose["services"]["gateway"]["build"]["context"] == ".."


def test_nats_conf_grants_exactly_what_the_subject_table_derives(compose: dict[str, Any]) -> None:
    config = (DEPLOY / "nats.conf").read_text(encoding="utf-8")
    assert authorization_conf() in config
    nats_env = environment_of(compose["services"]["nats"])
    for user in (*SERVICES, ADMIN):
        assert nats_env[password_variable(user)].startswith("${" + password_variable(user) + ":?")


def test_nats_conf_is_valid_for_nats_server_and_needs_every_password(tmp_path: Path) -> None:
    import os
    import subprocess

    from calagent.runtime.embedded import nats_server_binary

    conf = tmp_path / "nats.conf"
    conf.write_text((DEPLOY / "nats.conf").read_text(encoding="utf-8"))
    passwords = {password_variable(user): f"pw-{user}" for user in (*SERVICES, ADMIN)}
    checked = subprocess.run(
        [nats_server_binary(), "-t", "-c", str(conf)],
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
