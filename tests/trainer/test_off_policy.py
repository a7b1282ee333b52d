"""Importance ratios between the trainer's and the sampler's log-probs, as TRL's vLLM correction."""

from __future__ import annotations

import math
from unittest.mock import patch

import pytest

from trainer.config import TrainerConfig
from trainer.off_policy import OffPolicyConfig, importance_ratios


def _tensors() -> tuple:
    import torch

    trainer = torch.tensor([[-1.0, -2.0, -0.5, -3.0], [-1.0, -1.0, -1.0, -1.0]])
    sampler = torch.tensor([[-1.0, -0.5, -2.5, math.nan], [-1.1, -0.9, -1.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    return trainer, sampler, mask


def test_token_truncated_ratios_cap_at_clip_max_and_unknown_sampler_logprobs_weigh_one() -> None:
    import torch

    trainer, sampler, mask = _tensors()
    weights, stats = importance_ratios(
        trainer, sampler, mask, mode="token_truncate", clip_min=None, clip_max=3.0
    )
    expected = torch.tensor(
        [[1.0, math.exp(-1.5), 3.0, 1.0], [math.exp(0.1), math.exp(-0.1), 1.0, 1.0]]  # exp(2) capped at 3
    )
    assert torch.allclose(weights, expected, atol=1e-6)
    assert stats.tokens == 7 and stats.ratio_max == pytest.approx(3.0)
    # The mismatch over trained tokens with a known sampler log-prob: |0|, 1.5, 2, 0.1, 0.1, 0.
    assert stats.logprob_diff_mean == pytest.approx((0 + 1.5 + 2 + 0.1 + 0.1 + 0) / 6, abs=1e-6)
    assert stats.logprob_diff_max == pytest.approx(2.0)
    # The largest ratio before the cap, and the per-token KL(sampler ‖ trainer): mean of e^r − 1 − r.
    signed = [0.0, -1.5, 2.0, 0.1, -0.1, 0.0]
    assert stats.ratio_peak == pytest.approx(math.exp(2.0))
    assert stats.kl == pytest.approx(sum(math.expm1(r) - r for r in signed) / 6, rel=1e-5)


def test_masked_and_sequence_modes() -> None:
    import torch

    trainer, sampler, mask = _tensors()
    masked, _ = importance_ratios(trainer, sampler, mask, mode="token_mask", clip_min=0.5, clip_max=3.0)
    assert masked[0, 1] == 0.0 and masked[0, 2] == 0.0 and masked[0, 0] == 1.0  # exp(-1.5), exp(2) out
    seq, _ = importance_ratios(trainer, sampler, mask, mode="sequence_truncate", clip_min=None, clip_max=3.0)
    assert seq.shape == (2, 1)
    assert torch.allclose(seq[:, 0], torch.tensor([math.exp(0.5), 1.0]), atol=1e-6)
    with pytest.raises(ValueError, match="unknown importance sampling mode"):
        importance_ratios(trainer, sampler, mask, mode="tokens", clip_min=None, clip_max=3.0)


def test_grpo_args_carry_the_correction_and_the_sampling_temperature(tmp_path) -> None:
    from trainer.grpo import grpo_args

    config = TrainerConfig(off_policy=OffPolicyConfig(mode="token_mask", clip_max=2.0, clip_min=0.5))
    args = grpo_args(config, tmp_path, max_steps=1, seed=0)
    assert args.vllm_importance_sampling_correction and args.vllm_importance_sampling_mode == "token_mask"
    assert args.vllm_importance_sampling_clip_max == 2.0 and args.vllm_importance_sampling_clip_min == 0.5
    assert args.temperature == config.episode.params.temperature
    off = grpo_args(
        config.model_copy(update={"off_policy": OffPolicyConfig(enabled=False)}),
        tmp_path,
        max_steps=1,
        seed=0,
    )
    assert not off.vllm_importance_sampling_correction
    # Raw sampler log-probs are at temperature 1: another sampling temperature cannot be corrected.
    warm = {"episode": {"params": {"temperature": 0.7, "logprobs": True}}}
    with pytest.raises(ValueError, match="processed_logprobs"):
        TrainerConfig.model_validate(warm)
    ok = TrainerConfig.model_validate({**warm, "off_policy": {"sampler_logprobs": "processed"}})
    assert grpo_args(ok, tmp_path, max_steps=1, seed=0).temperature == 0.7
    # Nor can a truncated or penalized distribution (what vLLM would take from generation_config.json).
    for field, value in (("top_k", 20), ("top_p", 0.95), ("min_p", 0.1), ("repetition_penalty", 1.1)):
        cut = {"episode": {"params": {"temperature": 1.0, "logprobs": True, field: value}}}
        with pytest.raises(ValueError, match=field):
            TrainerConfig.model_validate(cut)
        TrainerConfig.model_validate({**cut, "off_policy": {"sampler_logprobs": "processed"}})


def test_the_grpo_trainer_scales_each_tokens_advantage_by_its_ratio_and_logs_the_mismatch() -> None:
    import types
    from collections import defaultdict

    import torch

    from trainer.policy_logps import policy_token_trainer_class

    cls = policy_token_trainer_class()
    trainer = object.__new__(cls)  # only the correction's state: no model to train here
    trainer.use_vllm = False
    trainer.vllm_importance_sampling_correction = True
    trainer.vllm_importance_sampling_mode = "token_truncate"
    trainer.vllm_importance_sampling_clip_min = None
    trainer.vllm_importance_sampling_clip_max = 3.0
    trainer.model = types.SimpleNamespace(training=True)
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    current, sampler, mask = _tensors()
    inputs = {"advantages": torch.tensor([2.0, -1.0]), "sampling_per_token_logps": sampler}
    assert trainer._corrects(inputs)
    trainer._correct = (inputs, mask)
    trainer._apply_correction(current.requires_grad_())
    weights, stats = importance_ratios(
        current, sampler, mask, mode="token_truncate", clip_min=None, clip_max=3.0
    )
    assert torch.allclose(inputs["advantages"], torch.tensor([[2.0], [-1.0]]) * weights)
    assert not inputs["advantages"].requires_grad  # the ratio is a weight, not a path for gradients
    logged = trainer._metrics["train"]
    assert logged["sampling/importance_sampling_ratio/max"] == [pytest.approx(3.0)]
    assert logged["sampling/sampling_logp_difference/mean"] == [pytest.approx(stats.logprob_diff_mean)]
    assert logged["sampling/importance_sampling_ratio/peak"] == [pytest.approx(math.exp(2.0))]
    assert logged["sampling/kl_per_token/mean"] == [pytest.approx(stats.kl)]
    assert trainer._correct is None  # applied once per loss
    trainer.vllm_importance_sampling_correction = False
    assert not trainer._corrects(inputs)
    # A step's log carries the largest ratio over its micro-batches, not TRL's mean of them.
    logged["sampling/importance_sampling_ratio/peak"].append(2.0)
    logs: dict[str, float] = {}
    trainer.model.training = True
    with patch.object(cls.__mro__[1], "log", lambda self, logs, start_time=None: None):
        trainer.log(logs)
    assert logs["sampling/importance_sampling_ratio/peak"] == pytest.approx(math.exp(2.0))
    assert "sampling/importance_sampling_ratio/peak" not in logged
