"""The trainer's GPU memory estimate from a model's config, and `arena config check` acting on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.cli import main
from trainer.gpu_memory import KNOWN_MODELS, ModelShape, PlanTooLarge, check_plan, estimate, model_shape

REPO = Path(__file__).resolve().parents[2]


def _plan(lora_r: int | None, budget: float = 80.0, tokens: int = 16384):  # type: ignore[no-untyped-def]
    shape = ModelShape.from_config(KNOWN_MODELS["qwen3-8b"])
    return estimate(
        shape,
        lora_r=lora_r,
        lora_targets=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        micro_batch=2,
        sequence_tokens=tokens,
        trained_tokens=tokens,
        gradient_checkpointing=True,
        kl_reference=False,
        budget_gb=budget,
    )


def test_qwen3_8b_counts_and_the_full_fine_tune_terms() -> None:
    shape = ModelShape.from_config(KNOWN_MODELS["qwen3-8b"])
    assert shape.parameters == pytest.approx(8.19e9, rel=0.01)  # Qwen3-8B's published size
    full = _plan(None)
    # fp32 master + bf16 autocast copies (6 B), fp32 grads (4 B), AdamW moments (8 B) per weight.
    assert full.weights_gb == pytest.approx(shape.parameters * 6 / 1e9)
    assert full.optimizer_gb == pytest.approx(shape.parameters * 8 / 1e9)
    with pytest.raises(PlanTooLarge, match=r"full fine-tune of 8.19B weights.*GB of 80 GB.*lora.enabled"):
        check_plan(full)
    lora = _plan(16)
    assert lora.trained_parameters == pytest.approx(43.6e6, rel=0.01) and lora.weights_gb < 17
    assert check_plan(lora) is None
    # Only the worst-case activations over budget: a warning, not a refusal.
    warning = check_plan(_plan(16, tokens=40_000))
    assert warning is not None and "token caps" in warning


def test_the_shape_comes_from_config_json_before_a_known_name(tmp_path: Path) -> None:
    folder = tmp_path / "Qwen3-8B"
    assert model_shape(folder) is not None and "known architecture" in model_shape(folder).source  # type: ignore[union-attr]
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**KNOWN_MODELS["qwen3-0.6b"], "head_dim": None}))
    shape = model_shape(folder)
    assert shape is not None and shape.hidden_size == 1024 and shape.head_dim == 1024 // 16
    assert model_shape(tmp_path / "unknown-model") is None


def test_config_check_prints_the_estimate_and_refuses_a_full_8b_fine_tune(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = REPO / "config" / "gpu-8b.toml"
    assert main(["config", "check", "--config", str(recipe)]) == 0
    out = capsys.readouterr().out
    assert "GPU memory estimate" in out and "lora fine-tune of 8.19B" in out and "of 80 GB" in out
    full = tmp_path / "full.toml"
    full.write_text(recipe.read_text().replace("lora.enabled = true", "lora.enabled = false"))
    assert main(["config", "check", "--config", str(full)]) == 2
    assert "cannot fit the GPU: full fine-tune of 8.19B weights" in capsys.readouterr().err
    # A GPU with more memory (trainer.gpu_memory_gb) takes the same plan's static part.
    big = tmp_path / "big.toml"
    big.write_text(full.read_text().replace("[trainer]\n", "[trainer]\ngpu_memory_gb = 400\n"))
    assert main(["config", "check", "--config", str(big)]) == 0
    assert "full fine-tune" in capsys.readouterr().out
