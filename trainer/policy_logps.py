"""GRPO's log-probabilities on the policy's own tokens only: `PolicyTokenGRPOTrainer`.

TRL scores every completion position through the LM head (on CPU it cannot pick positions: its
compact path needs Triton), but in an Arena episode most of the completion is tool results and
template glue that the loss masks out anyway, and a group with zero reward variance is masked out
entirely. Measured on one 1,500-token episode with the embedded model on 2 cores: TRL's scoring
7.6 s per forward/backward, this one 3.3 s; a masked-out micro-batch costs a one-token forward.

The trainer subclass hands the loss mask (completion mask × `env_mask`) to the scorer while TRL
computes the training loss; everywhere else (reference model, the old log-probs of a reused
generation) TRL's own path runs. Values at masked positions are zero: every use of them in the loss
is multiplied by the mask. Where the loss compares them with stored old log-probs (several
iterations per generation), those are zeroed at the same positions, so the ratio there is
exp(0 - 0) = 1 instead of the overflow of exp(0 - old).

Constrained decoding (`round.constrain_tool_calls`: xgrammar masks the logits) samples from
q = p·mask / Z, not from the policy's p. Of the two exact treatments — score log q (the trainer
would need every position's mask and its normaliser Z, recomputing the grammar over each
completion) or train only the tokens where the grammar left a choice — the trainer does the second:
the sampler marks each token whose mask admitted that token alone (`DecodeResult.forced`), and the
episode's mask (`TokenChain.mask`) is 0 there. On a forced token q = 1 whatever the weights, so the
exact gradient of log q is zero; training log p there instead pushed the advantage into a token the
policy never chose, every step, without ever changing what is sampled (the learn bench's one-token
KL of 4,176 was such a token). On the tokens trained, the sampler's recorded log-prob is that of the
full softmax before the mask (as vLLM reports it) and so is the trainer's: the importance ratio
compares like with like. What is left out on them is the mask's normaliser: where the grammar
leaves a few tokens (a tool's name, a key) the gradient of log p also lowers tokens the grammar
bans, which changes nothing that is sampled; the forced tokens were where log p and log q parted
most (q = 1 where p could be 1e-6).
"""

from __future__ import annotations

from typing import Any


def policy_token_logps(
    model: Any,
    input_ids: Any,
    attention_mask: Any,
    loss_mask: Any,
    *,
    temperature: float = 1.0,
    compute_entropy: bool = False,
) -> tuple[Any, Any]:
    """Per-token log-probabilities (and entropies) of the completion, computed where `loss_mask` is 1.

    `input_ids` is prompt + completion (B × T), `loss_mask` covers the completion (B × K, K ≤ T).
    Returns two B × K tensors (entropies None unless asked), zero where the mask is 0. Only the
    positions that predict a masked-in token of some row go through the LM head.
    """
    import torch

    batch, width = loss_mask.shape
    prompt_len = input_ids.size(1) - width
    columns = torch.nonzero(loss_mask.bool().any(dim=0)).flatten()
    if columns.numel() == 0:
        # Nothing to learn in this micro-batch (e.g. a zero-variance group): a one-token forward keeps
        # the result attached to the graph so backward() works, at almost no cost.
        anchor = model(input_ids=input_ids[:, :1]).logits.sum() * 0.0
        zeros = loss_mask.new_zeros(loss_mask.shape, dtype=torch.float32) + anchor
        return zeros, (zeros.detach() if compute_entropy else None)
    hidden_positions = prompt_len + columns - 1  # the hidden state at t predicts the token at t + 1
    # One row without padding needs no mask: the plain causal path is the fast one.
    mask_arg = None if bool(attention_mask.all()) else attention_mask
    out = model(input_ids=input_ids, attention_mask=mask_arg, logits_to_keep=hidden_positions)
    logits = out.logits.float() / temperature
    log_probs = torch.log_softmax(logits, dim=-1)

    def spread(values: Any) -> Any:
        """B × len(columns) values back to B × K, zero where the mask is 0."""
        full = loss_mask.new_zeros((batch, width), dtype=values.dtype).index_copy(1, columns, values)
        return full * loss_mask.to(values.dtype)

    targets = input_ids[:, prompt_len + columns]
    logps = spread(log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1))
    entropies = None
    if compute_entropy:
        with torch.no_grad():
            entropies = spread(-(log_probs.exp() * log_probs).sum(-1))
    return logps, entropies


RATIO_PEAK = "sampling/importance_sampling_ratio/peak"  # the largest per-token ratio, before truncation
# Metrics whose step value is the extreme over the step's micro-batches, not their mean.
EXTREMES = {
    RATIO_PEAK: max,
    "sampling/importance_sampling_ratio/max": max,
    "sampling/importance_sampling_ratio/min": min,
    "sampling/sampling_logp_difference/max": max,
}


def policy_token_trainer_class() -> type:
    """TRL's `GRPOTrainer` with the loss's log-probabilities from `policy_token_logps`."""
    from trl import GRPOTrainer

    from trainer.samples import quiet_unscored_notice

    quiet_unscored_notice()

    class PolicyTokenGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
        """Scores only the policy's tokens when computing the GRPO loss (see the module docstring)."""

        _loss_mask: Any = None
        _correct: Any = None  # (the loss's inputs, its mask) while a correction is pending

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            mask = inputs["completion_mask"]
            if "tool_mask" in inputs:
                mask = mask * inputs["tool_mask"]
            old = inputs.get("old_per_token_logps")
            if old is not None:  # a reused generation: masked positions must agree with our zeros
                # masked_fill, not a product: an old log-prob of -inf times 0 would be NaN.
                inputs = {**inputs, "old_per_token_logps": old.masked_fill(mask == 0, 0.0)}
            self._loss_mask = mask if self.off_policy_mask_threshold is None else None
            # The loss reads the advantages after scoring: the correction rewrites them there.
            inputs = dict(inputs)
            self._correct = (inputs, mask) if self._corrects(inputs) else None
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self._loss_mask = None
                self._correct = None

        def _corrects(self, inputs: dict[str, Any]) -> bool:
            """Whether TRL's sampler correction is on and this batch carries the sampler's log-probs."""
            return (
                not self.use_vllm  # TRL's own vLLM path applies it already
                and self.vllm_importance_sampling_correction
                and inputs.get("sampling_per_token_logps") is not None
            )

        def _apply_correction(self, logps: Any) -> None:
            """Scale each token's advantage by its truncated (or masked) importance ratio."""
            from trainer.off_policy import importance_ratios

            assert self._correct is not None
            inputs, mask = self._correct
            self._correct = None  # once per loss: only the policy's own scoring
            old = inputs.get("old_per_token_logps")
            trained = logps.detach() if old is None else old
            weights, stats = importance_ratios(
                trained,
                inputs["sampling_per_token_logps"],
                mask,
                mode=self.vllm_importance_sampling_mode,
                clip_min=self.vllm_importance_sampling_clip_min,
                clip_max=self.vllm_importance_sampling_clip_max,
            )
            advantages = inputs["advantages"]
            inputs["advantages"] = (
                advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
            ) * weights
            metrics = self._metrics["train" if self.model.training else "eval"]
            if stats.tokens:
                metrics["sampling/sampling_logp_difference/mean"].append(stats.logprob_diff_mean)
                metrics["sampling/sampling_logp_difference/max"].append(stats.logprob_diff_max)
                metrics["sampling/importance_sampling_ratio/mean"].append(stats.ratio_mean)
                metrics["sampling/importance_sampling_ratio/min"].append(stats.ratio_min)
                metrics["sampling/importance_sampling_ratio/max"].append(stats.ratio_max)
                metrics[RATIO_PEAK].append(stats.ratio_peak)
                metrics["sampling/kl_per_token/mean"].append(stats.kl)

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            """TRL's step log, with the extremes over the step's micro-batches (TRL averages every
            metric it collected, which would turn the step's largest ratio into a mean of maxima)."""
            metrics = self._metrics["train" if self.model.training else "eval"]
            for key, pick in EXTREMES.items():
                values = [v for v in metrics.pop(key, []) if v == v]
                if values:
                    logs[key] = pick(values)
            super().log(logs, start_time)

        def _get_per_token_logps_and_entropies(
            self,
            model: Any,
            input_ids: Any,
            attention_mask: Any,
            logits_to_keep: int,
            batch_size: int | None = None,
            compute_entropy: bool = False,
            compute_aux_loss: bool = False,
            **extra: Any,
        ) -> tuple[Any, Any, Any]:
            mask = self._loss_mask
            multimodal = any(v is not None for v in extra.values())
            if mask is None or compute_aux_loss or multimodal or mask.size(1) != logits_to_keep:
                result = super()._get_per_token_logps_and_entropies(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size=batch_size,
                    compute_entropy=compute_entropy,
                    compute_aux_loss=compute_aux_loss,
                    **extra,
                )
                if self._correct is not None:
                    self._apply_correction(result[0])
                return result
            with self.accelerator.autocast():
                logps, entropies = policy_token_logps(
                    model,
                    input_ids,
                    attention_mask,
                    mask,
                    temperature=self.temperature,
                    compute_entropy=compute_entropy,
                )
            if self._correct is not None:
                self._apply_correction(logps)
            return logps, entropies, None

    return PolicyTokenGRPOTrainer
