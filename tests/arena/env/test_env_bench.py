"""`arena bench env --json` prints the numbers (judged by people, never asserted as timings)."""

from __future__ import annotations

import json

import pytest

from arena.env.bench import percentile
from ops.cli import main

from .conftest import GOOD


def test_bench_env_json_has_every_figure(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARENA_ENV_PATH", raising=False)
    argv = [
        "bench",
        "env",
        "shop",
        "--json",
        "--env-path",
        str(GOOD),
        "--iterations",
        "20",
        "--instances",
        "30",
    ]
    assert main([*argv, "--no-sandbox"]) == 0
    report = json.loads(capsys.readouterr().out)
    [shop] = report["environments"]
    assert shop["env"] == "shop" and shop["call_tool"] == "get_profile"
    for key in ("reset_p50_us", "reset_p99_us", "call_p50_us", "verify_p50_us"):
        assert shop[key] > 0
    assert shop["reset_p99_us"] >= shop["reset_p50_us"]
    assert shop["call_p50_us_sandboxed"] is None
    assert report["instances_1000_rss_mb"] > 0 and report["instances_env"] == "shop"
    assert "instances_1000_* measured with 30 instances" in report["notes"]
    assert main(["bench", "env", "nope", "--env-path", str(GOOD)]) == 2


def test_percentile() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0
    assert percentile(list(map(float, range(101))), 99) == 99.0
