"""Off-policy correction between the sampler (vLLM, a bf16 copy) and the trainer's log-probabilities.

The tokens of a rollout were drawn from the sampler's distribution, not from the one the trainer
computes: other kernels, a bf16 sampling copy, a stale weight sync. TRL corrects this on its own
vLLM path (`vllm_importance_sampling_*` in `GRPOConfig`): each token's loss is multiplied by the
importance ratio π_train(token) / π_sampler(token), truncated at a cap (TIS) or zeroed outside
[min, max] (MIS), per token or per sequence. Arena's rollouts come through `rollout_func`, where
TRL applies none of it, so `PolicyTokenGRPOTrainer` applies the same ratios (from the same
`GRPOConfig` settings) to the per-token advantages: the clipped PPO term is linear in the
advantage, so scaling it per token is the same as scaling the token's loss.

The trainer's side of the ratio is the policy the rollout was sampled from: TRL's old
log-probs when the batch is reused, else the current ones (detached) — at one iteration per
batch they are the same weights, so no extra forward pass is spent on them. Both sides must be
at the sampling temperature: the trainer scores at `GRPOConfig.temperature`, which `grpo_args`
sets to the episodes' sampling temperature; where the server reports raw log-probs (vLLM's
default `--logprobs-mode raw_logprobs`, `arena serve-model`) and the temperature is not 1, the
trainer's side is scored raw too (`raw_logps`). Tokens whose sampler log-prob is unknown (NaN)
get ratio 1.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


class CorrectionStats(BaseModel):
    """What one batch's correction saw: the mismatch and the ratios applied (over trained tokens)."""

    logprob_diff_mean: float = 0.0  # mean |trainer − sampler| log-prob
    logprob_diff_max: float = 0.0
    ratio_mean: float = 1.0
    ratio_min: float = 1.0
    ratio_max: float = 1.0
    # The largest per-token ratio π_train / π_sampler before any truncation or masking.
    ratio_peak: float = 1.0
    # Mean per-token KL(sampler ‖ trainer) on the sampled tokens: the k3 estimate exp(r) − 1 − r with
    # r = log π_train − log π_sampler (unbiased, never negative), over tokens whose sampler log-prob is known.
    kl: float = 0.0
    tokens: int = 0


def importance_ratios(
    trainer_logps: Any,
    sampler_logps: Any,
    mask: Any,
    *,
    mode: str,
    clip_min: float | None,
    clip_max: float | None,
) -> tuple[Any, CorrectionStats]:
    """Per-token weights (B × T, or B × 1 for sequence modes) and their statistics.

    `mask` is 1 on the tokens the loss trains; elsewhere the weight does not matter (the loss
    masks it) and is 1.
    """
    import torch

    if mode not in MODES:
        raise ValueError(f"unknown importance sampling mode {mode!r}: one of {', '.join(MODES)}")
    on = mask.bool()
    diff = torch.nan_to_num((trainer_logps - sampler_logps) * on, nan=0.0)
    diff = diff.masked_fill(~on, 0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    low = clip_min if clip_min is not None else 0.0
    high = clip_max if clip_max is not None else math.inf
    if mode.endswith("truncate"):
        weights = ratio.clamp(min=low, max=high)
    else:
        weights = ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
    signed = (trainer_logps - sampler_logps)[on & ~torch.isnan(sampler_logps)].detach().float()
    delta = signed.abs()
    applied = weights.expand_as(on)[on] if mode.startswith("token") else weights.flatten()
    stats = CorrectionStats(
        logprob_diff_mean=float(delta.mean()) if delta.numel() else 0.0,
        logprob_diff_max=float(delta.max()) if delta.numel() else 0.0,
        ratio_mean=float(applied.mean()) if applied.numel() else 1.0,
        ratio_min=float(applied.min()) if applied.numel() else 1.0,
        ratio_max=float(applied.max()) if applied.numel() else 1.0,
        ratio_peak=float(torch.exp(signed.max())) if signed.numel() else 1.0,
        kl=float((torch.expm1(signed) - signed).mean()) if signed.numel() else 0.0,
        tokens=int(on.sum()),
    )
    return weights, stats


class OffPolicyConfig(BaseModel):
    """TIS/MIS between sampler and trainer (the `GRPOConfig.vllm_importance_sampling_*` settings)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True, description="Weigh each token's loss by the trainer/sampler probability ratio."
    )
    mode: str = Field(
        default="token_truncate",
        pattern="^(token|sequence)_(truncate|mask)$",
        description="Per token or per sequence; truncate the ratio at clip_max (TIS) or mask outside the clip (MIS).",
    )
    clip_max: float | None = Field(default=3.0, gt=0.0, description="Upper bound of the ratio (TRL's C_max).")
    clip_min: float | None = Field(
        default=None, ge=0.0, description="Lower bound of the ratio (masking modes)."
    )
    sampler_logprobs: str = Field(
        default="raw",
        pattern="^(raw|processed)$",
        description="What the server's log-probs are: raw (before temperature: vLLM's default, arena "
        "serve-model) or processed (vLLM --logprobs-mode processed_logprobs: after temperature).",
    )
