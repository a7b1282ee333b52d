"""What the trainer reports: one `StepMetrics` per optimizer step, a `TrainResult` per call.

Records are plain pydantic models handed to an observer callback (`on_step`); ops turns them into
Prometheus metrics and log lines. The trainer never imports ops.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field


class RolloutStats(BaseModel):
    """What one batch of episodes looked like (computed by the rollout bridge)."""

    episodes: int = 0
    # Episodes that ended on an infrastructure error (environment, user simulator or model server
    # failed): left out of their group's statistics and of the reward and pass rate below.
    infra_errors: int = 0
    groups: int = 0
    zero_variance_groups: int = 0  # groups whose scored rewards were all equal (dropped from the loss)
    resampled_groups: int = 0  # zero-variance groups replaced by another task's group (dynamic sampling)
    discarded_episodes: int = 0  # episodes run but not trained on (replaced, or resampled without signal)
    reward_mean: float = 0.0
    reward_std: float = 0.0
    pass_rate: float = 0.0
    mean_turns: float = 0.0  # policy turns per episode
    mean_policy_tokens: float = 0.0  # sampled tokens per episode
    generated_tokens: int = 0
    forced_tokens: int = 0  # of those, tokens a grammar forced (constrained decoding: not trained)
    seconds: float = 0.0
    chain_breaks: int = 0  # episodes whose later turns could not be trained (prompt re-rendered)
    finishes: dict[str, int] = Field(default_factory=dict)

    @property
    def scored(self) -> int:
        """Episodes with a reward (those that did not end on an infrastructure error)."""
        return self.episodes - self.infra_errors

    @property
    def zero_variance_fraction(self) -> float:
        """Share of groups without signal."""
        return self.zero_variance_groups / self.groups if self.groups else 0.0

    @classmethod
    def pooled(cls, batches: Sequence[RolloutStats]) -> RolloutStats:
        """Episodes, reward mean and std and pass rate over several batches, as if they were one."""
        episodes, infra = sum(b.episodes for b in batches), sum(b.infra_errors for b in batches)
        n = episodes - infra  # the scored episodes the batches' means are over
        if n == 0:
            return cls(episodes=episodes, infra_errors=infra)
        mean = sum(b.reward_mean * b.scored for b in batches) / n
        # E[x²] − E[x]² with each batch's E[x²] = std² + mean² (population std, as in a batch).
        square = sum((b.reward_std**2 + b.reward_mean**2) * b.scored for b in batches) / n
        return cls(
            episodes=episodes,
            infra_errors=infra,
            reward_mean=mean,
            reward_std=max(square - mean**2, 0.0) ** 0.5,
            pass_rate=sum(b.pass_rate * b.scored for b in batches) / n,
        )


class StepMetrics(BaseModel):
    """One optimizer step (GRPO) or one logging step (SFT)."""

    phase: Literal["grpo", "sft"]
    round_id: int
    step: int  # global optimizer step in this run (1-based)
    loss: float
    learning_rate: float = 0.0
    grad_norm: float | None = None
    reward_mean: float | None = None
    reward_std: float | None = None
    pass_rate: float | None = None
    kl: float | None = None
    entropy: float | None = None
    clip_fraction: float | None = None  # share of tokens whose ratio was clipped
    # Sampler vs trainer (`trainer.off_policy`): mean |log-prob difference| on trained tokens, and the
    # importance ratios applied to them (None when the correction is off or nothing was sampled).
    sampler_logprob_diff: float | None = None
    importance_ratio_mean: float | None = None
    importance_ratio_min: float | None = None
    importance_ratio_max: float | None = None
    # The largest per-token ratio before truncation, and the mean per-token KL(sampler ‖ trainer).
    importance_ratio_peak: float | None = None
    sampler_kl: float | None = None
    chain_breaks: int | None = None  # episodes of the step whose later turns were not trained
    # How the step's update reached an HTTP rollout server: "full" weights or the LoRA "adapter"
    # alone, the bytes written to the shared folder and the seconds until the server served them.
    sync_kind: str | None = None
    sync_bytes: int | None = None
    sync_seconds: float | None = None
    tokens_per_s: float | None = None  # sampled tokens per second of rollout
    episode_length: float | None = None  # mean policy turns per episode
    episode_tokens: float | None = None  # mean sampled tokens per episode
    zero_variance_fraction: float | None = None
    resampled_groups: int | None = None  # groups replaced by dynamic sampling
    seconds: float = 0.0  # wall time of the step (rollouts included)

    def finite(self) -> bool:
        """Every reported number is finite (a NaN loss means training diverged)."""
        values = [v for v in self.model_dump().values() if isinstance(v, float)]
        return all(math.isfinite(v) for v in values)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def grpo_step_metrics(
    *, round_id: int, step: int, logs: dict[str, Any], stats: RolloutStats, seconds: float
) -> StepMetrics:
    """A GRPO step's record from TRL's logged values and its rollout batch's statistics (the
    weight-sync fields are the caller's to fill)."""
    return StepMetrics(
        phase="grpo",
        round_id=round_id,
        step=step,
        loss=float(logs["loss"]),
        learning_rate=float(logs.get("learning_rate", 0.0)),
        grad_norm=_opt_float(logs.get("grad_norm")),
        reward_mean=stats.reward_mean,
        reward_std=stats.reward_std,
        pass_rate=stats.pass_rate,
        kl=_opt_float(logs.get("kl")),  # only computed when beta > 0 (reference model)
        entropy=_opt_float(logs.get("entropy")),
        clip_fraction=_opt_float(logs.get("clip_ratio/region_mean")),
        sampler_logprob_diff=_opt_float(logs.get("sampling/sampling_logp_difference/mean")),
        importance_ratio_mean=_opt_float(logs.get("sampling/importance_sampling_ratio/mean")),
        importance_ratio_min=_opt_float(logs.get("sampling/importance_sampling_ratio/min")),
        importance_ratio_max=_opt_float(logs.get("sampling/importance_sampling_ratio/max")),
        importance_ratio_peak=_opt_float(logs.get("sampling/importance_sampling_ratio/peak")),
        sampler_kl=_opt_float(logs.get("sampling/kl_per_token/mean")),
        chain_breaks=stats.chain_breaks,
        tokens_per_s=stats.generated_tokens / stats.seconds if stats.seconds > 0 else None,
        episode_length=stats.mean_turns,
        episode_tokens=stats.mean_policy_tokens,
        zero_variance_fraction=stats.zero_variance_fraction,
        resampled_groups=stats.resampled_groups,
        seconds=seconds,
    )


class CheckpointInfo(BaseModel):
    """A saved checkpoint, as returned in `TrainResult`."""

    path: Path
    step: int
    reward_mean: float | None = None


class TaskOutcome(BaseModel):
    """How a task's training episodes went in one call (the curriculum learns from these too)."""

    task: str  # ENV/ID
    env: str
    episodes: int = 0  # scored episodes (infrastructure errors are counted apart)
    passed: int = 0
    reward_sum: float = 0.0
    infra_errors: int = 0  # episodes that ended on an environment or model failure


class TrainResult(BaseModel):
    """The outcome of one `train_round` or `sft_warmup` call."""

    round_id: int
    phase: Literal["grpo", "sft"]
    policy_dir: Path  # the new policy (a checkpoint folder): the next round's input
    steps: int  # optimizer steps taken in this call (resumed ones excluded)
    resumed_from_step: int = 0
    total_steps: int = 0
    stopped: bool = False  # safe_point asked to stop; policy_dir is the checkpoint saved then
    reward_mean: float | None = None  # over all rollouts of the call
    pass_rate: float | None = None
    zero_variance_groups: int = 0
    resampled_groups: int = 0
    groups: int = 0
    episodes: int = 0
    # GRPO: episodes that ended on an infrastructure error (environment, user simulator or model
    # server failure): left out of their groups' statistics and of reward_mean and pass_rate.
    infra_errors: int = 0
    forced_tokens: int = 0  # GRPO: sampled tokens a grammar forced (constrained decoding: not trained)
    # GRPO: episodes whose later turns were not trained (their prompt was re-rendered: a new chain).
    chain_breaks: int = 0
    examples: int = 0  # SFT: trajectories trained on
    skipped: int = 0  # SFT: tasks whose reference could not be rendered; GRPO: unknown tasks
    seconds: float = 0.0  # this call
    # GRPO resumed from a checkpoint: the round's training time before this call (from its lineage).
    prior_seconds: float = 0.0
    checkpoints: list[CheckpointInfo] = Field(default_factory=list)
    metrics: list[StepMetrics] = Field(default_factory=list)
    processes: int = 1  # GRPO: processes (GPUs) the steps ran on (`trainer.sharded` above 1)
    task_outcomes: list[TaskOutcome] = Field(default_factory=list)  # GRPO: per task, over its rollouts


OnStep = Callable[[StepMetrics], None]
SafePoint = Callable[[], Awaitable[None]]
