"""GRPO's log-probabilities on policy tokens only equal TRL's own scoring where the loss looks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainer.policy_logps import policy_token_logps


@pytest.mark.model
def test_policy_token_logps_match_trl_scoring_under_the_mask(embedded_model_path: Path) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    gen = torch.Generator().manual_seed(0)
    prompt, width = 40, 60
    ids = torch.randint(0, 40_000, (2, prompt + width), generator=gen)
    attention = torch.ones_like(ids)
    attention[1, :5] = 0  # a left-padded prompt in the second row
    mask = torch.zeros(2, width, dtype=torch.long)
    mask[0, 3:20] = 1  # policy turns; the rest stands for tool results and glue
    mask[1, 10:30] = 1
    mask[1, 45:50] = 1
    with torch.no_grad():
        labels = ids.masked_fill(attention == 0, -100)
        labels[:, :prompt] = -100
        trl = model(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True)
        ours, entropy = policy_token_logps(model, ids, attention, mask, compute_entropy=True)
    on = mask.bool()
    assert torch.allclose(ours[on], trl.log_probs[:, -width:][on], atol=1e-4)
    assert torch.allclose(entropy[on], trl.entropy[:, -width:][on], atol=1e-3)
    assert (ours[~on] == 0).all() and (entropy[~on] == 0).all()


@pytest.mark.model
def test_an_all_masked_micro_batch_costs_nothing_but_keeps_the_graph(embedded_model_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32)
    ids = torch.randint(0, 40_000, (1, 50), generator=torch.Generator().manual_seed(1))
    logps, entropy = policy_token_logps(
        model, ids, torch.ones_like(ids), torch.zeros(1, 20, dtype=torch.long), compute_entropy=True
    )
    assert logps.shape == (1, 20) and (logps == 0).all() and logps.requires_grad
    logps.sum().backward()  # no error: a zero gradient
    assert entropy is not None and (entropy == 0).all()


@pytest.mark.model
def test_a_reused_generation_scores_against_old_logps_only_where_the_loss_looks(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """The loss of a reused generation (stored old log-probs) is the on-policy loss when the policy has
    not moved, even where an old log-prob outside the mask is extreme (exp(0 - old) would overflow)."""
    import torch
    from datasets import Dataset

    from trainer.checkpoints import load_policy
    from trainer.grpo import grpo_args
    from trainer.policy_logps import policy_token_trainer_class

    from .tiny import tiny_config

    model, tokenizer = load_policy(embedded_model_path, device="cpu")
    config = tiny_config(iterations_per_batch=2, micro_batch_size=2, group_size=2)
    trainer = policy_token_trainer_class()(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=grpo_args(config, tmp_path, max_steps=1, seed=0),
        train_dataset=Dataset.from_list([{"prompt": "hi"}]),
        processing_class=tokenizer,
    )
    trainer.current_gradient_accumulation_steps = 1
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, 40_000, (2, 12), generator=gen)
    completion = torch.randint(0, 40_000, (2, 16), generator=gen)
    policy = torch.zeros(2, 16, dtype=torch.long)
    policy[:, 2:6] = 1  # a policy turn, then a tool result (0) the loss must not look at
    policy[:, 11:14] = 1
    inputs = {
        "prompt_ids": prompt,
        "prompt_mask": torch.ones_like(prompt),
        "completion_ids": completion,
        "completion_mask": torch.ones_like(completion),
        "tool_mask": policy,
        "advantages": torch.tensor([1.0, -1.0]),
        "num_items_in_batch": policy.sum().float(),
    }
    on_policy = trainer._compute_loss(trainer.model, dict(inputs))
    ids = torch.cat([prompt, completion], dim=1)
    with torch.no_grad(), trainer.accelerator.autocast():  # as the loss scores them
        current, _ = policy_token_logps(trainer.model, ids, torch.ones_like(ids), policy)
    for extreme in (-1e4, float("-inf")):
        old = current.masked_fill(policy == 0, extreme)
        reused = trainer._compute_loss(trainer.model, {**inputs, "old_per_token_logps": old})
        assert torch.isfinite(reused), extreme
        assert torch.allclose(reused, on_policy, atol=1e-5), (extreme, reused, on_policy)
