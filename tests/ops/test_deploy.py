"""Deploy files: alert rules pass promtool, the dashboard and the exported metrics match, manifests load."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ops.config import load_config
from ops.metrics import Metrics

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
METRIC = re.compile(r"\barena_[a-z0-9_]+")


def exported_series() -> dict[str, str]:
    """Every series name the daemon can export -> its metric family."""
    names: dict[str, str] = {}
    for family in Metrics().registry.collect():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(family.type, [""])
        for suffix in suffixes:
            names[family.name + suffix] = family.name
    return names


def dashboard_exprs() -> list[str]:
    dash = json.loads((DEPLOY / "grafana" / "arena-dashboard.json").read_text())
    return [t["expr"] for panel in dash["panels"] for t in panel["targets"]]


def test_dashboard_queries_only_exported_metrics_and_covers_them_all() -> None:
    series = exported_series()
    queried = {name for expr in dashboard_exprs() for name in METRIC.findall(expr)}
    assert queried - set(series) == set(), "dashboard queries metrics the daemon does not export"
    assert set(series.values()) - {series[q] for q in queried} == set(), "metrics missing from the dashboard"


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="scripts/install-test-tools.sh installs promtool"
)
def test_alert_rules_pass_promtool_and_use_exported_metrics() -> None:
    rules = DEPLOY / "prometheus" / "arena-alerts.yml"
    result = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    exprs = [r["expr"] for g in yaml.safe_load(rules.read_text())["groups"] for r in g["rules"]]
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    assert used <= set(exported_series())
    names = {r["alert"] for g in yaml.safe_load(rules.read_text())["groups"] for r in g["rules"]}
    assert {"ArenaRoundStuck", "ArenaPausedTooLong", "ArenaPassRateDrop", "ArenaModelBackendDown"} <= names


def test_kubernetes_manifests_and_systemd_unit(tmp_path: Path) -> None:
    docs = {}
    for file in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(file.read_text()):
            docs[(doc["kind"], doc.get("metadata", {}).get("name"))] = doc
    listed = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(
        p.name for p in (DEPLOY / "k8s").glob("*.yaml") if p.name != "kustomization.yaml"
    )
    # The ConfigMap's arena.toml is a valid configuration (with the Secret's token, as in the pod).
    toml_file = tmp_path / "arena.toml"
    toml_file.write_text(docs[("ConfigMap", "arena-config")]["data"]["arena.toml"])
    secret = docs[("Secret", "arena-secrets")]["stringData"]
    config = load_config(toml_file, environ=secret)
    assert config.admin.address == "0.0.0.0:8787" and config.admin.token is not None
    pod = docs[("Deployment", "arena")]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["terminationGracePeriodSeconds"] > config.daemon.grace_period_s
    assert ("Service", "arena-vllm") in docs and ("ServiceMonitor", "arena") in docs
    # The policy server is the pod's vLLM sidecar: it serves the configured name from base_model,
    # exposes the reload endpoints and reads the publish folder from the daemon's data volume.
    assert config.trainer.rollouts == "policy_server"
    assert config.models.policy.base_url == "http://127.0.0.1:8000/v1"
    assert config.models.helper.base_url == "http://arena-vllm:8000/v1"
    [sidecar] = [c for c in pod["containers"] if c["name"] == "policy-vllm"]
    assert f"--served-model-name={config.models.policy.model}" in sidecar["args"]
    assert f"--model={config.trainer.base_model}" in sidecar["args"] and "--port=8000" in sidecar["args"]
    assert {"name": "VLLM_SERVER_DEV_MODE", "value": "1"} in sidecar["env"]
    [data] = [m for m in sidecar["volumeMounts"] if m["name"] == "data"]
    daemon_data = next(m for m in container["volumeMounts"] if m["name"] == "data")
    assert data["mountPath"] == daemon_data["mountPath"] == str(config.data.dir) and data["readOnly"]
    assert config.trainer.publish_dir is not None and config.trainer.publish_dir.is_relative_to(
        config.data.dir
    )
    unit = (DEPLOY / "systemd" / "arena.service").read_text()
    for line in ("ProtectSystem=strict", "Restart=on-failure", "User=arena", "NoNewPrivileges=true"):
        assert line in unit
