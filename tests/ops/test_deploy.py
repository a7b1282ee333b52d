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
# Arena's own metrics and the standard process_* ones (python_info is left to ad-hoc queries).
METRIC = re.compile(r"\b(?:arena|process)_[a-z0-9_]+")
PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def exported_series() -> dict[str, str]:
    """Every series name the daemon can export -> its metric family."""
    names: dict[str, str] = {}
    for family in Metrics().registry.collect():
        if not METRIC.fullmatch(family.name):
            continue
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(family.type, [""])
        for suffix in suffixes:
            names[family.name + suffix] = family.name
    return names


def dashboard_panels() -> list[dict]:
    return json.loads((DEPLOY / "grafana" / "arena-dashboard.json").read_text())["panels"]


def dashboard_exprs() -> list[str]:
    return [t["expr"] for panel in dashboard_panels() for t in panel["targets"]]


def label_names() -> dict[str, set[str]]:
    """Metric family -> its label names (plus the instance and job labels Prometheus adds)."""
    metrics = Metrics()
    names = {m._name: set(m._labelnames) for m in vars(metrics).values() if hasattr(m, "_labelnames")}
    return {name: labels | {"instance", "job"} for name, labels in names.items()}


def test_every_target_has_a_legend_from_labels_it_returns() -> None:
    labels, series = label_names(), exported_series()
    for panel in dashboard_panels():
        for target in panel["targets"]:
            where = f"{panel['title']} {target['refId']}"
            assert target.get("legendFormat"), f"{where}: no legend"
            by = re.search(r"\bby \(([^)]*)\)", target["expr"])
            if by:  # an aggregation keeps only its `by` labels
                returned = {name.strip() for name in by[1].split(",")}
            else:
                families = {series[m] for m in METRIC.findall(target["expr"])}
                returned = set().union(*(labels.get(f, {"instance", "job"}) for f in families))
            if target.get("format") == "heatmap":
                returned.add("le")
            assert set(PLACEHOLDER.findall(target["legendFormat"])) <= returned, where


def test_panels_do_not_mix_units() -> None:
    for panel in dashboard_panels():
        if panel["fieldConfig"]["defaults"].get("unit") != "s":
            continue
        for target in panel["targets"]:
            expr = target["expr"]
            # Seconds: a quantile, a mean (sum / count), an age, or a gauge of seconds; never a
            # bare rate of calls.
            seconds = (
                expr.startswith(("histogram_quantile(", "time() -"))
                or ("_sum[" in expr and "_count[" in expr and " / " in expr)
                or re.fullmatch(r"arena_\w+_seconds(\{[^}]*\})?", expr) is not None
            )
            assert seconds, f"{panel['title']}: {expr} is not in seconds"


def test_heatmap_and_version_panels_show_what_they_mean() -> None:
    panels = dashboard_panels()
    for panel in (p for p in panels if p["type"] == "heatmap"):
        # Prometheus buckets as cells, not series that Grafana would bucket again.
        assert {t.get("format") for t in panel["targets"]} == {"heatmap"}, panel["title"]
        assert panel["options"]["calculate"] is False
    [version] = [p for p in panels if p["title"] == "Version"]
    # arena_info is always 1: the stat shows the version label as its text.
    assert version["options"]["textMode"] == "name"
    assert version["targets"][0]["legendFormat"] == "{{version}}"


def test_metrics_include_the_process_series() -> None:
    exposition = Metrics().exposition().decode()
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"):
        assert re.search(rf"^{name} [0-9.e+]+$", exposition, re.M), name


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
    assert {"ArenaRoundStuck", "ArenaPausedTooLong", "ArenaYardstickDrop", "ArenaModelBackendDown"} <= names
    # Cluster mode: a Ray cluster with no ready worker, one policy replica of several gone.
    assert {"ArenaClusterNoWorkerReady", "ArenaPolicyReplicaDown"} <= names
    # The drop alert watches the yardstick: the fresh-task rate falls after every difficulty raise.
    assert not any("arena_overall_pass_rate" in expr for expr in exprs)
