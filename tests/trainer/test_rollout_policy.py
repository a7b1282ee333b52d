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


def test_the_sampling_copy_of_a_prepared_trainer_model_runs_itself_in_bfloat16(tmp_path: Path) -> None:
    """TRL's accelerator wraps the training model's forward in an autocast closure bound to it; the
    copy must not carry that wrapper along (it ran the fp32 master weights while claiming bf16)."""
    import torch
    from datasets import Dataset

    from trainer.grpo import grpo_args
    from trainer.policy_logps import policy_token_trainer_class

    from .tiny import tiny_causal_lm, tiny_config, tiny_tokenizer

    trainer = policy_token_trainer_class()(
        model=tiny_causal_lm(),
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=grpo_args(tiny_config(bf16=True), tmp_path, max_steps=1, seed=0),
        train_dataset=Dataset.from_list([{"prompt": "t5"}]),
        processing_class=tiny_tokenizer(),
    )
    master = trainer.accelerator.unwrap_model(trainer.model)
    assert "forward" in vars(master)  # the accelerator's wrapper: what the copy must not run
    twin = inference_copy(master, torch.bfloat16)
    ids = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        before = twin(input_ids=ids).logits
        assert before.dtype == torch.bfloat16  # its own bf16 weights, no fp32 autocast output
        master.model.norm.weight.mul_(0.5)  # an update the copy has not been given yet
        assert torch.equal(twin(input_ids=ids).logits, before)
        twin.model.norm.weight.mul_(0.5)  # the update reaching the copy
        assert not torch.equal(twin(input_ids=ids).logits, before)
