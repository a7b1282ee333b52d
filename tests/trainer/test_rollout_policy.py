"""Local rollouts sample from a bfloat16 copy that follows the training weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.precision import rollout_dtype
from trainer.rollout_policy import InferenceCopy


@pytest.mark.model
def test_inference_copy_follows_the_training_weights(embedded_model_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32)
    twin = InferenceCopy(model, torch.bfloat16)
    assert next(twin.model.parameters()).dtype == torch.bfloat16
    assert not any(p.requires_grad for p in twin.model.parameters())
    with torch.no_grad():  # an "optimizer step" on the master weights
        model.model.norm.weight.add_(0.5)
    norm = twin.model.model.norm.weight
    assert not torch.equal(norm, model.model.norm.weight.to(torch.bfloat16))
    twin.sync()
    assert torch.equal(norm, model.model.norm.weight.to(torch.bfloat16))
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        fp32 = model(input_ids=ids).logits[0, -1]
        bf16 = twin.model(input_ids=ids).logits[0, -1].float()
    assert torch.argmax(fp32) == torch.argmax(bf16)  # rounding, not a different model


def test_rollout_dtype_resolution() -> None:
    import torch

    assert rollout_dtype("float32", "cpu") == torch.float32
    assert rollout_dtype("bfloat16", "cpu") == torch.bfloat16
    assert rollout_dtype("auto", "cpu") in (torch.float32, torch.bfloat16)
