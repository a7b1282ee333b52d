"""The Kubernetes manifests run: `kubectl kustomize` renders deploy/k8s (one machine) and
deploy/k8s/cluster (cluster mode) into objects that pass the Kubernetes schemas (offline,
kubernetes-validate's bundled ones, strict) and semantic checks a schema cannot make: probes reach
their servers, volumes are mounted, references resolve, images are pinned, the ConfigMap is
config/cluster.toml as Arena's own loader reads it, and in cluster mode the daemon joins the
RayCluster's head and lists every vLLM replica.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops.config import ArenaConfig, load_config
from trainer.config import LoraConfig

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
KUBECTL = shutil.which("kubectl")
KUBERNETES_VERSION = "1.32"  # the oldest release the manifests target; schemas ship offline
# Custom resources have no schema in the Kubernetes release; they get the semantic checks below
# (a RayCluster's pod templates are validated as PodTemplates).
CUSTOM_KINDS = {"ServiceMonitor", "RayCluster"}
WORKLOADS = ("Deployment", "StatefulSet")
PINNED = re.compile(r"^[\w./-]+:v?\d+\.\d+\.\d+$")

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl missing (it renders the kustomization)")


@functools.cache
def render(folder: Path) -> tuple[dict[str, Any], ...]:
    """Every object `kubectl kustomize <folder>` renders (what `kubectl apply -k` would send)."""
    assert KUBECTL is not None
    out = subprocess.run([KUBECTL, "kustomize", str(folder)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return tuple(doc for doc in yaml.safe_load_all(out.stdout) if doc)


@pytest.fixture(params=["one-machine", "cluster"])
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """Each deployment's objects: the checks every variant must pass run on both."""
    return list(render(K8S if request.param == "one-machine" else K8S / "cluster"))


@pytest.fixture
def single() -> list[dict[str, Any]]:
    return list(render(K8S))


@pytest.fixture
def cluster() -> list[dict[str, Any]]:
    return list(render(K8S / "cluster"))


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """The rendered objects of one kind, by name."""
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def ray_groups(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(RayCluster/group, group spec) for every RayCluster's head and worker groups."""
    for name, ray in by_kind(objects, "RayCluster").items():
        yield f"{name}/head", ray["spec"]["headGroupSpec"]
        for group in ray["spec"].get("workerGroupSpecs", []):
            yield f"{name}/{group['groupName']}", group


def pod_templates(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(workload name, pod template) for every Deployment, StatefulSet and RayCluster group."""
    for kind in WORKLOADS:
        for name, workload in by_kind(objects, kind).items():
            yield name, workload["spec"]["template"]
    for name, group in ray_groups(objects):
        yield name, group["template"]


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(workload name, pod spec) for every pod the objects run."""
    for name, template in pod_templates(objects):
        yield name, template["spec"]


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Init and regular containers of a pod spec."""
    return pod.get("initContainers", []) + pod["containers"]


def running(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers that serve while the pod runs: regular ones and native sidecars."""
    sidecars = [c for c in pod.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    return sidecars + pod["containers"]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels and In expressions, or a Service's map) matches."""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        selector = {"matchLabels": selector}
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In", expr  # the only operator these manifests use
        if labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


def test_every_object_passes_the_kubernetes_schemas(rendered: list[dict[str, Any]]) -> None:
    import kubernetes_validate

    kinds = {o["kind"] for o in rendered}
    assert {"Namespace", "ConfigMap", "Secret", "PersistentVolumeClaim", "Deployment", "Service"} <= kinds
    # A RayCluster's pods are ordinary pod templates: validated as such (the rest of it is checked
    # in test_the_ray_cluster_has_a_coordinating_head_and_a_worker_group).
    templates = [
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": name.replace("/", "-")},
            "template": g["template"],
        }
        for name, g in ray_groups(rendered)
    ]
    for obj in rendered + templates:
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
        for container in running(pod):
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
    pods = [(t["metadata"]["labels"], t["spec"]) for _, t in pod_templates(rendered)]
    services = by_kind(rendered, "Service")
    for name, service in services.items():
        [pod] = [spec for labels, spec in pods if selects(service["spec"]["selector"], labels)]
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
    single: list[dict[str, Any]], tmp_path: Path
) -> None:
    rendered = single
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
    assert config.trainer.rollout_backend == "http"
    assert config.models.policy.base_url == "http://127.0.0.1:8000/v1"
    assert config.models.helper.base_url == "http://arena-vllm:8000/v1"
    [sidecar] = [c for c in pod["containers"] if c["name"] == "policy-vllm"]
    assert f"--served-model-name={config.models.policy.model}" in sidecar["args"]
    assert f"--model={config.trainer.base_model}" in sidecar["args"] and "--port=8000" in sidecar["args"]
    assert {"name": "VLLM_SERVER_DEV_MODE", "value": "1"} in sidecar["env"]
    # LoRA rounds send each step's adapter: the sidecar takes runtime adapters of the trained rank.
    if config.trainer.lora.enabled and config.trainer.weight_sync == "adapter":
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


def daemon_config(objects: list[dict[str, Any]], tmp_path: Path) -> ArenaConfig:
    """The configuration the daemon's container sees: the ConfigMap, the Secret and its env."""
    [config_map] = by_kind(objects, "ConfigMap").values()
    environ = dict(by_kind(objects, "Secret")["arena-secrets"]["stringData"])
    daemon = by_kind(objects, "Deployment")["arena"]["spec"]["template"]["spec"]["containers"][0]
    environ |= {e["name"]: e["value"] for e in daemon.get("env", []) if "value" in e}
    toml_file = tmp_path / "arena.toml"
    toml_file.write_text(config_map["data"]["arena.toml"])
    return load_config(toml_file, environ=environ)


def ray_pin() -> str:
    """The Ray version the cluster extra installs (pyproject.toml)."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    [pin] = [req.split("==")[1] for req in extras["cluster"] if req.startswith("ray")]
    return pin


def test_the_cluster_overlay_adds_to_the_one_machine_deployment(
    single: list[dict[str, Any]], cluster: list[dict[str, Any]]
) -> None:
    names = {(o["kind"], o["metadata"]["name"]) for o in single}
    replaced = {("Deployment", "arena-vllm"), ("Service", "arena-vllm")}  # by the helper StatefulSet
    assert names - replaced <= {(o["kind"], o["metadata"]["name"]) for o in cluster}
    assert {
        ("RayCluster", "arena-ray"),
        ("StatefulSet", "arena-policy"),
        ("StatefulSet", "arena-helper"),
    } <= {(o["kind"], o["metadata"]["name"]) for o in cluster}
    # The same arena.toml: cluster mode is set by the daemon's environment, not a second file.
    assert by_kind(single, "ConfigMap") == by_kind(cluster, "ConfigMap")


def test_the_ray_cluster_has_a_coordinating_head_and_a_worker_group(
    cluster: list[dict[str, Any]], tmp_path: Path
) -> None:
    config = daemon_config(cluster, tmp_path)
    [ray] = by_kind(cluster, "RayCluster").values()
    assert ray["apiVersion"] == "ray.io/v1"
    # The image's Ray (the cluster extra) is the version KubeRay is told it runs.
    assert ray["spec"]["rayVersion"] == ray_pin()
    head, workers = ray["spec"]["headGroupSpec"], ray["spec"]["workerGroupSpecs"]
    # The head coordinates only: no CPU for Ray to place an episode worker on.
    assert head["rayStartParams"]["num-cpus"] == "0"
    assert workers, "no worker group"
    daemon_pod = by_kind(cluster, "Deployment")["arena"]["spec"]["template"]["spec"]
    daemon_image = daemon_pod["containers"][0]["image"]
    claims = by_kind(cluster, "PersistentVolumeClaim")
    capacity = 0.0
    for name, group in ray_groups(cluster):
        # KubeRay takes rayStartParams as strings (map[string]string).
        assert all(isinstance(v, str) for v in group["rayStartParams"].values()), name
        pod = group["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        for container in pod["containers"]:
            where = f"{name}/{container['name']}"
            # The daemon's image: a Ray driver and its nodes must run the same Ray and Python.
            assert container["image"] == daemon_image, where
            hardened = container["securityContext"]
            assert hardened["allowPrivilegeEscalation"] is False and hardened["capabilities"]["drop"] == [
                "ALL"
            ]
            # Our own probes, so KubeRay injects none of its defaults (they query the dashboard
            # agent, which plain ray, without ray[default], does not run).
            assert "readinessProbe" in container and "livenessProbe" in container, where
        if name.endswith("/head"):
            continue
        assert 1 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"], name
        capacity += group["replicas"] * float(group["rayStartParams"]["num-cpus"])
        # The workers load the environments from the daemon's data volume, at the daemon's path,
        # read-only (only the daemon writes), so the claim must be mountable on several nodes.
        volumes = {v["name"]: v for v in pod["volumes"]}
        [data] = [
            m
            for c in pod["containers"]
            for m in c["volumeMounts"]
            if "persistentVolumeClaim" in volumes[m["name"]]
        ]
        claim = volumes[data["name"]]["persistentVolumeClaim"]["claimName"]
        assert data["mountPath"] == str(config.data.dir) and data["readOnly"] is True
        assert claims[claim]["spec"]["accessModes"] == ["ReadWriteMany"]
    # Room for every worker the daemon asks for.
    assert capacity >= config.cluster.workers * config.cluster.worker_cpus


def test_the_cluster_daemon_joins_the_head_and_lists_every_replica(
    cluster: list[dict[str, Any]], tmp_path: Path
) -> None:
    config = daemon_config(cluster, tmp_path)
    assert config.cluster.backend == "ray"
    assert config.store.url is not None and config.store.url.startswith("postgresql")
    [ray] = by_kind(cluster, "RayCluster").values()
    head = ray["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    [gcs] = [p["containerPort"] for p in head["ports"] if p["name"] == "gcs-server"]
    # KubeRay names the head's Service <RayCluster>-head-svc.
    assert config.cluster.address == f"{ray['metadata']['name']}-head-svc:{gcs}"

    pod = by_kind(cluster, "Deployment")["arena"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["arena"], "the policy is served by its replicas now"
    # The daemon's pod is a 0-CPU Ray node of that cluster (a driver needs a raylet beside it),
    # started after the migration and sharing the session's /tmp and the object store's /dev/shm.
    assert [c["name"] for c in pod["initContainers"]] == ["migrate", "ray-node"]
    node = pod["initContainers"][1]
    assert node["restartPolicy"] == "Always"
    assert f"--address={config.cluster.address}" in node["args"] and "--num-cpus=0" in node["args"]
    daemon_mounts = {(m["name"], m["mountPath"]) for m in pod["containers"][0]["volumeMounts"]}
    assert {(m["name"], m["mountPath"]) for m in node["volumeMounts"]} <= daemon_mounts
    assert {"/tmp", "/dev/shm"} <= {m["mountPath"] for m in node["volumeMounts"]}

    services = by_kind(cluster, "Service")
    for role, name in (("policy", "arena-policy"), ("helper", "arena-helper")):
        replicas = by_kind(cluster, "StatefulSet")[name]
        service = services[replicas["spec"]["serviceName"]]
        # Headless, so each pod has its own name, and the names resolve before readiness.
        assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
        assert selects(service["spec"]["selector"], replicas["spec"]["template"]["metadata"]["labels"])
        [port] = [p["port"] for p in service["spec"]["ports"]]
        count = replicas["spec"]["replicas"]
        assert count >= 2, f"{name}: several replicas"
        section = getattr(config.models, role)
        expected = [f"http://{name}-{i}.{service['metadata']['name']}:{port}/v1" for i in range(count)]
        assert section.backend == "http" and section.urls == expected, role

    # The policy replicas: the served name and the base weights of the config, the reload endpoints,
    # listening beyond loopback, and the publish folder on the shared volume at the daemon's path.
    spec = by_kind(cluster, "StatefulSet")["arena-policy"]["spec"]["template"]["spec"]
    [vllm] = spec["containers"]
    assert f"--served-model-name={config.models.policy.model}" in vllm["args"]
    assert f"--model={config.trainer.base_model}" in vllm["args"] and "--host=0.0.0.0" in vllm["args"]
    assert {"name": "VLLM_SERVER_DEV_MODE", "value": "1"} in vllm["env"]
    if config.trainer.lora.enabled and config.trainer.weight_sync == "adapter":
        assert "--enable-lora" in vllm["args"]
        rank = next(int(a.split("=")[1]) for a in vllm["args"] if a.startswith("--max-lora-rank="))
        assert rank >= LoraConfig().r
    [data] = [m for m in vllm["volumeMounts"] if m["name"] == "data"]
    assert data["mountPath"] == str(config.data.dir) and data["readOnly"] is True
    assert config.trainer.publish_dir is not None and config.trainer.publish_dir.is_relative_to(
        config.data.dir
    )


def test_only_arena_reaches_the_ray_nodes_and_the_reload_endpoints(cluster: list[dict[str, Any]]) -> None:
    # Ray has no authentication, and a policy replica's reload endpoint loads any path as weights.
    labels = {name: t["metadata"]["labels"] for name, t in pod_templates(cluster)}
    policies = list(by_kind(cluster, "NetworkPolicy").values())

    def allowed(target: str) -> set[str]:
        rules = [p for p in policies if selects(p["spec"]["podSelector"], labels[target])]
        assert rules, f"no NetworkPolicy guards {target}"
        return {
            name
            for p in rules
            for rule in p["spec"]["ingress"]
            for peer in rule["from"]
            for name in labels
            if selects(peer["podSelector"], labels[name])
        }

    ray = {"arena-ray/head", "arena-ray/episodes"}
    for target in ray:
        assert allowed(target) == ray | {"arena"}, target
    assert allowed("arena-policy") == {"arena", "arena-ray/episodes"}
