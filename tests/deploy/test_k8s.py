"""The Kubernetes manifests are valid and agree with the code: one Deployment per service running
its own module with its own NATS user on every node, Secrets for every credential, CPU autoscaling
for the stateless services, the agent scaled by KEDA on its real JetStream consumer, and NATS
values that give every node the users and permissions of `calagent.runtime.trust`.

Schemas: `kubernetes-validate` (the Kubernetes OpenAPI schemas it ships, offline) for the built-in
kinds; KEDA's ScaledObject against the OpenAPI schema of its CRD (`keda_scaledobject_schema.json`,
where it came from is in its `$comment`), with unknown fields refused as `kubectl apply
--validate=strict` does.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from calagent.contracts import subjects
from calagent.runtime.settings import Settings
from calagent.runtime.trust import password_variable, permissions, users

pytestmark = pytest.mark.unit

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
KUBERNETES_VERSION = "1.30.0"
KEDA_SCHEMA = Path(__file__).with_name("keda_scaledobject_schema.json")
NATS_NODES = tuple(f"nats-{index}.nats-headless:4222" for index in range(3))
NAMESPACE = "calagent"
# Variables a Deployment sets that no Settings field reads: the NATS password, which NATS_URL
# takes in through Kubernetes' `$(NATS_PASSWORD)` expansion.
COMPOSED = {"NATS_PASSWORD"}
OTEL_VAR = re.compile(r"^OTEL_[A-Z0-9_]+$")
CPU_SCALED = ("gateway", "commands", "timeparse", "evalrec")


def _documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "nats-values.yaml":
            continue  # Helm values, not a manifest
        found += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    return found


DOCUMENTS = _documents()


def _of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in DOCUMENTS if doc["kind"] == kind}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused wherever it names the fields."""
    strict = copy.deepcopy(schema)
    stack = [strict]
    while stack:
        node = stack.pop()
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        stack += [value for value in node.get("properties", {}).values() if isinstance(value, dict)]
        stack += [node[key] for key in ("items", "additionalProperties") if isinstance(node.get(key), dict)]
    return strict


@pytest.mark.parametrize(
    "document",
    [doc for doc in DOCUMENTS if doc["apiVersion"] != "keda.sh/v1alpha1"],
    ids=lambda doc: f"{doc['kind']}/{doc['metadata']['name']}",
)
def test_each_manifest_is_valid_for_kubernetes(document: dict[str, Any]) -> None:
    kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    assert document["metadata"].get("namespace", NAMESPACE) == NAMESPACE


def test_the_scaled_object_is_valid_for_kedas_crd() -> None:
    schema = _strict(json.loads(KEDA_SCHEMA.read_text(encoding="utf-8")))
    scaled = [doc for doc in DOCUMENTS if doc["kind"] == "ScaledObject"]
    assert len(scaled) == 1
    jsonschema.validate(scaled[0], schema)
    with pytest.raises(jsonschema.ValidationError):  # the strictness is real
        jsonschema.validate({**scaled[0], "spec": {**scaled[0]["spec"], "pollingIntervall": 5}}, schema)


def test_one_deployment_per_service_runs_its_module_with_its_own_nats_user_on_every_node() -> None:
    deployments = _of_kind("Deployment")
    assert set(deployments) == {f"calagent-{service}" for service in subjects.SERVICES}
    known = {field.alias for field in Settings.model_fields.values() if field.alias}
    for service in subjects.SERVICES:
        container = _container(deployments[f"calagent-{service}"])
        assert container["command"] == ["python", "-m", f"calagent.{service}"]
        env = {item["name"]: item for item in container["env"]}
        names = list(env)
        assert names.index("NATS_PASSWORD") < names.index("NATS_URL"), (
            "$(NATS_PASSWORD) expands only if earlier"
        )
        password = env["NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert (password["name"], password["key"]) == ("calagent-nats-users", password_variable(service))
        assert env["NATS_URL"]["value"] == ",".join(
            f"nats://{service}:$(NATS_PASSWORD)@{node}" for node in NATS_NODES
        )
        unknown = {name for name in env if name not in known | COMPOSED and not OTEL_VAR.match(name)}
        assert not unknown, f"{service} sets variables no code reads: {sorted(unknown)}"
        # Credentials only from Secrets, never written into the manifest.
        for secret_var in ("CALAGENT_AUTH_SECRET", "DATABASE_URL", "OPENAI_API_KEY"):
            if secret_var in env:
                assert "secretKeyRef" in env[secret_var]["valueFrom"], (service, secret_var)
        assert "CALAGENT_AUTH_SECRET" in env
        assert container["resources"]["requests"]["cpu"], "CPU autoscaling needs a CPU request"


def test_the_shared_configuration_replicates_every_stream_and_sends_spans_over_otlp() -> None:
    config = _of_kind("ConfigMap")["calagent-config"]["data"]
    assert config["CALAGENT_NATS_REPLICAS"] == str(len(NATS_NODES))
    assert config["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http://")
    assert config["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    known = {field.alias for field in Settings.model_fields.values() if field.alias}
    assert {name for name in config if name not in known and not OTEL_VAR.match(name)} == set()
    for deployment in _of_kind("Deployment").values():
        assert {"configMapRef": {"name": "calagent-config"}} in _container(deployment)["envFrom"]


def test_every_secret_a_deployment_names_exists_with_that_key() -> None:
    secrets = {name: set(doc["stringData"]) for name, doc in _of_kind("Secret").items()}
    for deployment in _of_kind("Deployment").values():
        for item in _container(deployment)["env"]:
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref is not None:
                assert ref["key"] in secrets.get(ref["name"], set()), ref


def test_the_gateway_service_reaches_the_gateway_pods() -> None:
    service = _of_kind("Service")["calagent-gateway"]
    pods = _of_kind("Deployment")["calagent-gateway"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pods.items()
    ports = {
        port["name"]: port["containerPort"]
        for port in _container(_of_kind("Deployment")["calagent-gateway"])["ports"]
    }
    assert ports == {"http": 8080}
    assert [port["targetPort"] for port in service["spec"]["ports"]] == ["http"]


def test_stateless_services_scale_on_cpu_and_the_agent_on_turns_waiting_for_it() -> None:
    autoscalers = _of_kind("HorizontalPodAutoscaler")
    targets = {hpa["spec"]["scaleTargetRef"]["name"]: hpa for hpa in autoscalers.values()}
    assert set(targets) == {f"calagent-{service}" for service in CPU_SCALED}
    for hpa in targets.values():
        assert [metric["resource"]["name"] for metric in hpa["spec"]["metrics"]] == ["cpu"]
        assert hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]

    scaled = _of_kind("ScaledObject")["calagent-agent"]["spec"]
    assert scaled["scaleTargetRef"]["name"] == "calagent-agent"
    assert "calagent-agent" not in targets, "one autoscaler per Deployment"
    (trigger,) = scaled["triggers"]
    assert trigger["type"] == "nats-jetstream"
    metadata = trigger["metadata"]
    # The real names, from the contracts: the stream the gateway publishes turns to and the
    # durable consumer every agent replica pulls from.
    assert metadata["stream"] == subjects.TURNS_STREAM
    assert metadata["consumer"] == subjects.AGENT_CONSUMER
    assert metadata["account"] == "$G"
    # The chart's headless Service: KEDA asks the consumer's leader by its pod name under it.
    assert metadata["natsServerMonitoringEndpoint"] == f"nats-headless.{NAMESPACE}.svc.cluster.local:8222"
    assert int(metadata["lagThreshold"]) > 0


@pytest.fixture(scope="module")
def nats_values() -> dict[str, Any]:
    loaded = yaml.safe_load((K8S / "nats-values.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_the_nats_chart_runs_three_jetstream_nodes_with_fsync_on_every_write(
    nats_values: dict[str, Any],
) -> None:
    config = nats_values["config"]
    assert config["cluster"] == {"enabled": True, "replicas": len(NATS_NODES)}
    jetstream = config["jetstream"]
    assert jetstream["enabled"] is True
    assert jetstream["fileStore"]["enabled"] is True and jetstream["fileStore"]["pvc"]["enabled"] is True
    assert jetstream["merge"]["sync_interval"] == "always"
    assert config["monitor"]["enabled"] is True  # KEDA reads the consumer there


def test_every_nats_node_has_the_users_and_permissions_the_subject_table_derives(
    nats_values: dict[str, Any],
) -> None:
    configured = nats_values["config"]["merge"]["authorization"]["users"]
    assert [entry["user"] for entry in configured] == list(users())
    for entry in configured:
        assert entry["permissions"] == permissions()[entry["user"]], entry["user"]
        assert entry["password"] == f"<< ${password_variable(entry['user'])} >>"
    env = nats_values["container"]["env"]
    for user in users():
        ref = env[password_variable(user)]["valueFrom"]["secretKeyRef"]
        assert (ref["name"], ref["key"]) == ("calagent-nats-users", password_variable(user))
    assert set(_of_kind("Secret")["calagent-nats-users"]["stringData"]) == {
        password_variable(u) for u in users()
    }
