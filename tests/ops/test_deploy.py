"""Deploy files: alert rules pass promtool, the dashboard and the exported metrics match.

The Kubernetes manifests are checked in test_k8s.py, the systemd unit in test_systemd.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

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
