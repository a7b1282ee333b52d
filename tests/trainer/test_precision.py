"""The SFT loss on labelled positions only equals the model's own loss; bf16 is resolved sensibly;
bf16 training keeps fp32 master weights, so small learning rates still move every weight."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from trainer.precision import assistant_token_loss, autocast, train_dtype, use_bf16

from .tiny import tiny_causal_lm


@pytest.mark.model
def test_loss_over_labelled_positions_equals_the_full_head_loss(embedded_model_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32)
    ids = torch.randint(0, 40_000, (1, 96), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, -100)
    labels[0, 40:55] = ids[0, 40:55]
    labels[0, 80:90] = ids[0, 80:90]
    with torch.no_grad():
        full = model(input_ids=ids, labels=labels).loss
        kept = assistant_token_loss(model, ids, labels, -100)
        with autocast(True, "cpu"):
            mixed = assistant_token_loss(model, ids, labels, -100)
    assert kept.item() == pytest.approx(full.item(), rel=1e-5)
    assert mixed.item() == pytest.approx(full.item(), rel=2e-2)  # bf16 matmuls: close, not equal
    nothing = assistant_token_loss(model, ids, torch.full_like(ids, -100), -100)
    assert nothing.item() == 0.0 and nothing.requires_grad


def test_bf16_setting_wins_over_the_hardware() -> None:
    assert use_bf16(True, "cpu") is True
    assert use_bf16(False, "cpu") is False
    assert use_bf16(None, "cpu") in (True, False)


def _changed_fraction(model: Any, dtype: Any, *, bf16_autocast: bool, steps: int, lr: float) -> float:
    """Train a copy of `model` in `dtype` for `steps` AdamW steps; the share of weights that changed."""
    import torch

    twin = copy.deepcopy(model).to(dtype).train()
    before = {n: p.detach().clone() for n, p in twin.named_parameters()}
    optimizer = torch.optim.AdamW(twin.parameters(), lr=lr, weight_decay=0.0)
    ids = torch.randint(0, 512, (2, 48), generator=torch.Generator().manual_seed(1))
    for _ in range(steps):
        with autocast(bf16_autocast, "cpu"):
            loss = twin(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    changed = sum(int((p.detach() != before[n]).sum()) for n, p in twin.named_parameters())
    return changed / sum(p.numel() for p in twin.parameters())


def test_bf16_training_with_the_production_settings_moves_the_weights_as_fp32_does() -> None:
    import torch

    from trainer.config import TrainerConfig

    lr = TrainerConfig().learning_rate  # the production default (1e-6), as config/gpu-8b.toml sets it
    model = tiny_causal_lm()
    # The GPU recipe: a full fine-tune loads `train_dtype("cuda")` weights and trains under bf16 autocast.
    dtype = train_dtype("cuda", lora=False)
    assert dtype == torch.float32
    production = _changed_fraction(model, dtype, bf16_autocast=True, steps=8, lr=lr)
    fp32 = _changed_fraction(model, torch.float32, bf16_autocast=False, steps=8, lr=lr)
    assert fp32 > 0.7  # all but the embedding rows of tokens the batch does not use
    assert production == pytest.approx(fp32, abs=0.01)
    # What the recipe did before: pure bf16 weights, whose updates round away at this learning rate.
    pure_bf16 = _changed_fraction(model, torch.bfloat16, bf16_autocast=False, steps=8, lr=lr)
    assert pure_bf16 < 0.2


def test_a_lora_base_is_bf16_on_gpu_and_its_adapters_train_in_fp32() -> None:
    import torch
    from peft import get_peft_model

    from trainer.config import LoraConfig

    assert train_dtype("cuda", lora=True) == torch.bfloat16
    assert train_dtype("cpu", lora=True) == torch.float32  # CPU trains fp32 weights under autocast
    base = tiny_causal_lm().to(train_dtype("cuda", lora=True))
    model = get_peft_model(base, LoraConfig(enabled=True, r=4).peft_config())
    trained = {n: p.dtype for n, p in model.named_parameters() if p.requires_grad}
    frozen = {p.dtype for p in model.parameters() if not p.requires_grad}
    assert trained and set(trained.values()) == {torch.float32} and frozen == {torch.bfloat16}
