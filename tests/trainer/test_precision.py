"""The SFT loss on labelled positions only equals the model's own loss; bf16 is resolved sensibly."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.precision import assistant_token_loss, autocast, use_bf16


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
