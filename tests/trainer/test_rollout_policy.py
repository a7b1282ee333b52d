"""Local rollouts sample from a bfloat16 copy that follows the training weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.rollout_policy import inference_copy


@pytest.mark.model
def test_inference_copy_follows_the_training_weights(embedded_model_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from simulate.local import LocalChatModel

    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32)
    twin = inference_copy(model, torch.bfloat16)
    chat = LocalChatModel(twin, AutoTokenizer.from_pretrained(embedded_model_path))
    assert next(twin.parameters()).dtype == torch.bfloat16
    assert not any(p.requires_grad for p in twin.parameters())
    with torch.no_grad():  # an "optimizer step" on the master weights
        model.model.norm.weight.add_(0.5)
    norm = twin.model.norm.weight
    assert not torch.equal(norm, model.model.norm.weight.to(torch.bfloat16))
    chat.load_state_dict(model.state_dict())  # what the rollout factory does before each batch
    assert torch.equal(norm, model.model.norm.weight.to(torch.bfloat16))
    assert norm.dtype == torch.bfloat16
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        fp32 = model(input_ids=ids).logits[0, -1]
        bf16 = twin(input_ids=ids).logits[0, -1].float()
    assert torch.argmax(fp32) == torch.argmax(bf16)  # rounding, not a different model
