"""`scripts/gpu-check.sh`: one GRPO round through a policy server, measured.

On a GPU machine it serves a small model with vLLM; here `--cpu` runs the same round against
`arena serve-model --allow-reload` on the embedded model, so the script and its JSON stay working
between the sessions that get a GPU.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu-check.sh"


@pytest.mark.model
@pytest.mark.slow
def test_the_check_trains_a_lora_round_through_serve_model_and_reports_it(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "check.json"
    # One library task and the signal task, four episodes each, one step.
    small = ["--steps", "1", "--tasks", "1", "--group-size", "4", "--max-turns", "1", "--max-tokens", "24"]
    argv = ["bash", str(SCRIPT), "--cpu", "--model", str(embedded_model_path), "--lora", *small]
    done = subprocess.run([*argv, "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert json.loads(done.stdout) == report  # the JSON on stdout too
    assert report["device"] == "cpu" and report["steps"] == 1 and report["episodes"] == 8
    assert report["chain_breaks"] == 0
    [sync] = report["sync"]
    model_bytes = (embedded_model_path / "model.safetensors").stat().st_size
    assert sync["kind"] == "lora" and 0 < sync["bytes"] < model_bytes / 20 and sync["seconds"] > 0
    # LoRA moves the adapted projections only: some weights, not all.
    assert 0 < report["changed_weight_fraction"] < 1
    ratio = report["importance_ratio"]
    assert ratio["mean"] is not None and ratio["min"] <= ratio["mean"] <= ratio["max"]
    assert report["peak_memory_gb"] > 0


def test_unknown_arguments_and_a_missing_gpu_are_clear_errors() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--bogus"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and "unknown argument --bogus" in done.stderr
    if subprocess.run(["which", "nvidia-smi"], capture_output=True).returncode != 0:
        done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, cwd=REPO)
        assert done.returncode == 2 and "use --cpu" in done.stderr
