"""The Kubernetes manifests run: `kubectl kustomize deploy/k8s` renders objects that pass the
Kubernetes schemas (offline, kubernetes-validate's bundled ones, strict) and semantic checks a
schema cannot make: probes reach their servers, volumes are mounted, references resolve, images
are pinned, and the ConfigMap is config/cluster.toml as Arena's own loader reads it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops.config import load_config
from trainer.config import LoraConfig

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
KUBECTL = shutil.which("kubectl")
KUBERNETES_VERSION = "1.32"  # the oldest release the manifests target; schemas ship offline
# Custom resources have no schema in the Kubernetes release; they get the semantic checks below.
CUSTOM_KINDS = {"ServiceMonitor"}
PINNED = re.compile(r"^[\w./-]+:v?\d+\.\d+\.\d+$")

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl missing (it renders the kustomization)")


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    """Every object `kubectl kustomize deploy/k8s` renders (what `kubectl apply -k` would send)."""
    out = subprocess.run([KUBECTL, "kustomize", str(K8S)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """The rendered objects of one kind, by name."""
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(workload name, pod template spec) for every Deployment."""
    for name, deployment in by_kind(objects, "Deployment").items():
        yield name, deployment["spec"]["template"]["spec"]


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Init and regular containers of a pod spec."""
    return pod.get("initContainers", []) + pod["containers"]


def test_every_object_passes_the_kubernetes_schemas(rendered: list[dict[str, Any]]) -> None:
    import kubernetes_validate

    kinds = {o["kind"] for o in rendered}
    assert {"Namespace", "ConfigMap", "Secret", "PersistentVolumeClaim", "Deployment", "Service"} <= kinds
    for obj in rendered:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {path}: {exc.message}")
    # The validator does reject a bad object (strict: unknown fields too), so passing means something.
    broken = {**by_kind(rendered, "Service")["arena"], "spec": {"ports": [{"port": "http"}], "selectr": {}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_images_are_pinned_by_version(rendered: list[dict[str, Any]]) -> None:
    for name, pod in pod_specs(rendered):
        for container in containers(pod):
            assert PINNED.match(container["image"]), f"{name}/{container['name']}: {container['image']}"


def test_probes_reach_their_servers(rendered: list[dict[str, Any]]) -> None:
    probes = 0
    for name, pod in pod_specs(rendered):
        for container in pod["containers"]:
            declared = {p.get("name") for p in container.get("ports", [])} | {
                p["containerPort"] for p in container.get("ports", [])
            }
            listens = {int(a.split("=")[1]) for a in container.get("args", []) if a.startswith("--port=")}
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                probe = container.get(kind)
                if probe is None:
                    continue
                probes += 1
                where = f"{name}/{container['name']} {kind}"
                for handler in ("httpGet", "tcpSocket", "grpc"):
                    if handler in probe:
                        # The kubelet probes from the node: a host would be the node's, not the pod's.
                        assert "host" not in probe[handler], where
                        assert probe[handler]["port"] in declared, f"{where}: port not on the container"
                if "exec" in probe:
                    # An in-container probe of a loopback-only server: the port it asks is the served one.
                    ports = {
                        int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", " ".join(probe["exec"]["command"]))
                    }
                    assert ports and ports <= listens, where
    assert probes >= 6


def test_volumes_mounts_and_references_resolve(rendered: list[dict[str, Any]]) -> None:
    config_maps, secrets = by_kind(rendered, "ConfigMap"), by_kind(rendered, "Secret")
    claims = by_kind(rendered, "PersistentVolumeClaim")
    namespaces = set(by_kind(rendered, "Namespace"))
    for obj in rendered:
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") in namespaces, obj["metadata"]["name"]
    for name, pod in pod_specs(rendered):
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounted = {m["name"] for c in containers(pod) for m in c.get("volumeMounts", [])}
        assert mounted <= set(volumes), f"{name}: mounts of undeclared volumes {mounted - set(volumes)}"
        assert set(volumes) <= mounted, f"{name}: volumes nobody mounts {set(volumes) - mounted}"
        for volume in volumes.values():
            if "configMap" in volume:
                assert volume["configMap"]["name"] in config_maps, f"{name}: {volume}"
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims, f"{name}: {volume}"
        for container in containers(pod):
            for source in container.get("envFrom", []):
                assert source["secretRef"]["name"] in secrets, f"{name}/{container['name']}"


def test_services_and_the_service_monitor_select_declared_ports(rendered: list[dict[str, Any]]) -> None:
    pods = {
        name: (d["spec"]["template"]["metadata"]["labels"], d["spec"]["template"]["spec"])
        for name, d in by_kind(rendered, "Deployment").items()
    }
    services = by_kind(rendered, "Service")
    for name, service in services.items():
        selector = service["spec"]["selector"].items()
        [pod] = [spec for labels, spec in pods.values() if selector <= labels.items()]
        named = {p["name"] for c in pod["containers"] for p in c.get("ports", []) if "name" in p}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in named, f"Service {name}: {port}"
    # ServiceMonitor (a custom resource, so no schema offline): it selects the daemon's Service,
    # scrapes a port that Service names, and labels the job "arena" as the alert rules expect.
    monitor = by_kind(rendered, "ServiceMonitor")["arena"]
    selected = [
        s
        for s in services.values()
        if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    ]
    assert [s["metadata"]["name"] for s in selected] == ["arena"]
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {
        p["name"] for p in selected[0]["spec"]["ports"]
    }
    assert selected[0]["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "arena"
    assert {e["path"] for e in monitor["spec"]["endpoints"]} == {"/metrics"}


def test_the_config_map_is_cluster_toml_and_fits_the_pod(
    rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    [config_map] = by_kind(rendered, "ConfigMap").values()
    secret = by_kind(rendered, "Secret")["arena-secrets"]["stringData"]
    toml_file = tmp_path / "arena.toml"
    toml_file.write_text(config_map["data"]["arena.toml"])
    # Parsed by Arena's own loader with the Secret's variables, as in the pod; no key can drift.
    config = load_config(toml_file, environ=secret)
    assert config == load_config(REPO / "config" / "cluster.toml", environ=secret)
    assert config_map["data"]["arena.toml"] == (REPO / "config" / "cluster.toml").read_text()
    assert config.admin.address == "0.0.0.0:8787" and config.admin.token is not None
    pod = by_kind(rendered, "Deployment")["arena"]["spec"]["template"]["spec"]
    daemon = pod["containers"][0]
    assert daemon["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert daemon["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {p["containerPort"] for p in daemon["ports"]} == {config.admin.port}
    assert pod["terminationGracePeriodSeconds"] > config.daemon.grace_period_s
    [config_mount] = [m for m in daemon["volumeMounts"] if m["name"] == "config"]
    assert daemon["args"][-1] == f"{config_mount['mountPath']}/arena.toml"
    # The policy server is the pod's vLLM sidecar: it serves the configured name from base_model,
    # exposes the reload endpoints and reads the publish folder from the daemon's data volume.
    assert config.trainer.rollouts == "policy_server"
    assert config.models.policy.base_url == "http://127.0.0.1:8000/v1"
    assert config.models.helper.base_url == "http://arena-vllm:8000/v1"
    [sidecar] = [c for c in pod["containers"] if c["name"] == "policy-vllm"]
    assert f"--served-model-name={config.models.policy.model}" in sidecar["args"]
    assert f"--model={config.trainer.base_model}" in sidecar["args"] and "--port=8000" in sidecar["args"]
    assert {"name": "VLLM_SERVER_DEV_MODE", "value": "1"} in sidecar["env"]
    # LoRA rounds send each step's adapter: the sidecar takes runtime adapters of the trained rank.
    if config.trainer.use_lora and config.trainer.lora_sync == "adapter":
        assert "--enable-lora" in sidecar["args"]
        assert {"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"} in sidecar["env"]
        rank = next(int(a.split("=")[1]) for a in sidecar["args"] if a.startswith("--max-lora-rank="))
        assert rank >= LoraConfig().r
    [data] = [m for m in sidecar["volumeMounts"] if m["name"] == "data"]
    daemon_data = next(m for m in daemon["volumeMounts"] if m["name"] == "data")
    assert data["mountPath"] == daemon_data["mountPath"] == str(config.data.dir) and data["readOnly"]
    assert config.trainer.publish_dir is not None and config.trainer.publish_dir.is_relative_to(
        config.data.dir
    )
