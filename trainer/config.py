"""Configuration of the trainer: GRPO rounds, the SFT warm-up, rollouts, checkpoints, publishing.

One pydantic model, `TrainerConfig`, is what the daemon passes to `train_round`/`sft_warmup`, and
it is also the daemon's `[trainer]` settings table (`ops.config.ArenaConfig.trainer`): the fields
the daemon derives from its other sections each round (the group size, the step count, the episode
caps, the seed, the policy server) are filled in by `ops.config_trainer`, which refuses them in the
table. The defaults are the daemon's (the CPU demo: the embedded model, small groups); production
raises `group_size`, `tasks_per_step` and uses `rollout_backend = "http"` with a vLLM server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arena.episode.runner import EpisodeConfig
from arena.tasks.reward import RewardConfig
from arena.types import SamplingParams
from simulate.chat_format import DEFAULT_TEMPLATE_KWARGS
from trainer.config_parts import LoraConfig, PublishConfig, SftConfig
from trainer.off_policy import OffPolicyConfig

__all__ = ["LoraConfig", "PublishConfig", "SftConfig", "TrainerConfig"]


def _rollout_episode() -> EpisodeConfig:
    # Sampling with temperature 1 so the G samples of a group differ; logprobs for the IS ratio.
    return EpisodeConfig(
        max_turns=6,
        max_tokens_per_turn=128,
        max_total_tokens=3072,
        params=SamplingParams(temperature=1.0, top_p=1.0, logprobs=True),
    )


class TrainerConfig(BaseModel):
    """Everything `train_round` and `sft_warmup` need besides the tasks and the folders.

    The daemon's knobs around training (`base_model`, `publish_dir`, `publish_gate`, `keep_rounds`,
    `gpu_memory_gb`, `warmup_tasks_per_env`, `warmup_max_tasks`) are fields here too, not a section
    of their own: they are about this package's starting weights, checkpoints, publishing, GPU
    budget and warm-up set, so one `[trainer]` table says everything about training.
    """

    model_config = ConfigDict(extra="forbid")

    # GRPO
    group_size: int = Field(default=4, ge=2, le=256, description="G: samples per task (a GRPO group).")
    tasks_per_step: int = Field(
        default=2,
        ge=1,
        le=1024,
        description="GRPO groups per optimizer step: a step trains on tasks_per_step × G episodes "
        "(G = round.samples_per_task).",
    )
    max_steps: int = Field(default=10, ge=1, description="Optimizer steps per round.")
    learning_rate: float = Field(default=1e-6, gt=0.0, le=1.0, description="Optimizer learning rate.")
    beta: float = Field(
        default=0.0,
        ge=0.0,
        description="KL coefficient against the policy each round starts from (0: no reference model, DAPO style).",
    )
    epsilon: float = Field(default=0.2, gt=0.0, lt=1.0, description="PPO clip (lower).")
    epsilon_high: float = Field(
        default=0.28, gt=0.0, lt=1.0, description="DAPO clip-higher (upper); at least epsilon."
    )
    loss_type: Literal["dapo", "grpo", "dr_grpo", "bnpo"] = Field(
        default="dapo", description="TRL's GRPO loss normalisation."
    )
    scale_rewards: Literal["group", "batch", "none"] = Field(
        default="group",
        description="Divide advantages by the reward std of the group, the batch, or not at all.",
    )
    drop_zero_variance: bool = Field(
        default=True, description="Mask groups whose rewards are all equal (they carry no signal)."
    )
    # Each extra pass costs a rollout of the groups it replaces, so it is bounded.
    dynamic_sampling_passes: int = Field(
        default=1,
        ge=0,
        le=16,
        description="Extra sampling passes per step that replace zero-variance groups by groups of tasks "
        "not yet drawn this step (DAPO dynamic sampling).",
    )
    # With 1 the ratio to the sampling policy is 1 at every step and the clip never binds; above 1
    # the clipped ratio is a trust region, so each costly rollout batch is learned from more than once.
    iterations_per_batch: int = Field(
        default=1,
        ge=1,
        le=16,
        description="Optimizer steps on each rollout batch (GRPO's mu; above 1 the clip bounds the reuse).",
    )
    max_grad_norm: float = Field(default=1.0, gt=0.0, description="Gradient clipping norm.")
    # Gradient accumulation with one generation per optimizer step bounds memory.
    micro_batch_size: int = Field(
        default=2,
        ge=1,
        description="Completions per forward/backward pass (the step's batch is split into micro-batches).",
    )
    gradient_checkpointing: bool = Field(
        default=True, description="Recompute activations in the backward pass (less memory, more time)."
    )
    bf16: bool | None = Field(
        default=None,
        description="bfloat16 autocast with fp32 master weights (none: where the hardware computes bf16 natively).",
    )
    seed: int = Field(default=0, description="Seed of the round's sampling and shuffling.")
    lora: LoraConfig = Field(default_factory=LoraConfig, description="LoRA adapters.")
    # Rollouts
    episode: EpisodeConfig = Field(
        default_factory=_rollout_episode, description="Caps and sampling of a rollout episode."
    )
    reward: RewardConfig = Field(default_factory=RewardConfig, description="How checks become rewards.")
    rollout_backend: Literal["local", "http"] = Field(
        default="local",
        description="Where GRPO samples: local (the trainer's own model) or http (the policy server, e.g. "
        "vLLM, which gets every update through publish_dir).",
    )
    rollout_base_url: str | None = Field(
        default=None, description="The OpenAI-compatible policy server (vLLM, .../v1) of http rollouts."
    )
    rollout_replica_urls: list[str] = Field(
        default_factory=list, description="More replicas of that server (`simulate.replicas`)."
    )
    rollout_model: str = Field(default="policy", description="The served model name on that server.")
    rollout_api_key: str | None = Field(default=None, description="Its API key, if it wants one.")
    rollout_concurrency: int = Field(default=32, ge=1, description="Rollout episodes in flight.")
    # The same for GRPO's rollouts (local, and the http backend's token-id prompts rendered here:
    # `simulate.token_chat`), the SFT warm-up and every evaluation (`simulate.chat_format`). With
    # thinking off the template's empty think block stays in the prompt; on, the sampled reasoning
    # is kept in the chain and trained like every sampled token.
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_TEMPLATE_KWARGS),
        description="The policy's chat-template arguments (Qwen3's enable_thinking, ...), the same for SFT, "
        "GRPO rollouts, EVALUATE, the yardstick and the publish gate, local and http (sent to vLLM).",
    )
    # Full checkpoints are saved every `save_every` steps either way.
    weight_sync: Literal["adapter", "full"] = Field(
        default="adapter",
        description="How a LoRA round's step updates reach the policy server (rollout_backend = http): "
        "adapter (runtime LoRA loading: vLLM --enable-lora, megabytes) or full (merged weights reload).",
    )
    off_policy: OffPolicyConfig = Field(
        default_factory=OffPolicyConfig,
        description="Importance-sampling correction between the sampler's log-probs and the trainer's.",
    )
    max_batch: int = Field(default=32, ge=1, description="Local rollouts: rows per decode batch.")
    rollout_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="Local rollouts and evaluations sample in this dtype (auto: bfloat16 where the hardware "
        "computes it natively, a refreshed copy of the fp32 training weights on CPU).",
    )
    # What the policy is shown, the same in training, warm-up and evaluation (TRUSTEE-style tool
    # subsets keep CPU prompts short).
    system_prompt: Literal["full", "compact"] = Field(
        default="full", description="Policy system prompt: full (with env rules) or compact (no rules)."
    )
    tool_subset: int | None = Field(
        default=None,
        ge=0,
        description="Show each task its reference tools plus N distractors (none: all tools).",
    )
    # Above 1 the step runs in worker processes started with `accelerate launch` (`trainer.sharded`),
    # each on its share of every batch; the daemon runs their rollouts against the policy server.
    processes: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Processes (one GPU each) for the GRPO step; above 1 it runs under `accelerate launch` "
        "with rollouts from the policy server (rollout_backend = http), full weights only.",
    )
    sharding: Literal["none", "fsdp"] = Field(
        default="none",
        description="With processes > 1: fsdp shards weights, gradients and AdamW moments over the GPUs "
        "(accelerate FSDP2, full shard; GPUs only; gpu_memory_gb is per GPU); none keeps a replica per process.",
    )
    # Checkpoints
    save_every: int = Field(
        default=5, ge=1, description="Optimizer steps between checkpoints (and at the end)."
    )
    keep_last: int = Field(
        default=3,
        ge=1,
        description="Checkpoints kept per round: the last N (and the best by rollout reward with keep_best).",
    )
    keep_best: bool = Field(
        default=True, description="Also keep the checkpoint with the best rollout reward."
    )
    # Warm-up and publishing
    sft: SftConfig = Field(default_factory=SftConfig, description="The SFT warm-up.")
    publish: PublishConfig = Field(default_factory=PublishConfig, description="Where new weights go.")
    # The daemon's knobs around training (see the class docstring).
    warmup_tasks_per_env: int = Field(
        default=16,
        ge=0,
        description="Grounded graph tasks per executable training environment in the warm-up set (beside "
        "its hand-written tasks): what a fresh policy imitates before its first GRPO round.",
    )
    warmup_max_tasks: int | None = Field(
        default=None,
        ge=1,
        description="At most this many warm-up tasks, taken in turn from each training environment "
        "(none: the whole set).",
    )
    keep_rounds: int = Field(
        default=5,
        ge=1,
        description="Rounds whose checkpoint folders stay on disk; older ones go after each publish "
        "(never the live policy's).",
    )
    base_model: Path | None = Field(
        default=None, description="Initial policy weights (folder); default the policy model when local."
    )
    publish_dir: Path | None = Field(
        default=None,
        description="Folder the HTTP policy server reads new weights from (http policy backend).",
    )
    publish_gate: bool = Field(
        default=True,
        description="Publish a new policy only if it is not worse than its parent on the yardstick: the "
        "paired 95% interval of its change over the same tasks does not lie wholly below 0 (off: publish "
        "every trained policy).",
    )
    gpu_memory_gb: float = Field(
        default=80.0,
        gt=0,
        description="GPU memory the trainer may use (GB); `arena config check` refuses a plan whose "
        "weights, gradients and AdamW moments exceed it and warns when worst-case activations do.",
    )

    @model_validator(mode="after")
    def _check(self) -> TrainerConfig:
        if self.epsilon_high < self.epsilon:
            raise ValueError(f"epsilon_high ({self.epsilon_high}) must be >= epsilon ({self.epsilon})")
        if self.batch_size % min(self.micro_batch_size, self.batch_size):
            raise ValueError(
                f"micro_batch_size ({self.micro_batch_size}) must divide tasks_per_step × group_size ({self.batch_size})"
            )
        params = self.episode.params
        if self.off_policy.enabled and self.off_policy.sampler_logprobs == "raw":
            # Raw log-probs are of the untouched softmax: a ratio against them never sees what
            # temperature, truncation or a penalty did to the distribution actually sampled.
            departs = []
            if params.temperature not in (0.0, 1.0):
                departs.append(f"temperature {params.temperature}")
            if params.truncates:
                departs.append(
                    f"top_p {params.top_p}, top_k {params.top_k}, min_p {params.min_p}, "
                    f"repetition_penalty {params.repetition_penalty}"
                )
            if departs:
                raise ValueError(
                    f"the sampler's raw log-probs are of the untouched softmax and the episodes sample with "
                    f"{'; '.join(departs)}: serve with vLLM's --logprobs-mode processed_logprobs and set "
                    "off_policy.sampler_logprobs = 'processed', sample at temperature 1 without truncation, "
                    "or turn off_policy off"
                )
        if self.rollout_backend == "http" and not self.rollout_base_url:
            raise ValueError("rollout_backend 'http' needs rollout_base_url (the vLLM server, …/v1)")
        self._check_processes()
        return self

    def _check_processes(self) -> None:
        """Combinations of `processes` and `sharding` that cannot run, refused with the reason."""
        if self.processes == 1:
            if self.sharding != "none":
                raise ValueError(
                    f"sharding '{self.sharding}' needs processes > 1 (one process holds everything)"
                )
            return
        if self.rollout_backend != "http":
            raise ValueError(
                f"processes = {self.processes} needs rollouts from the policy server (rollout_backend 'http'): "
                "local rollouts sample from the one in-process model, which worker processes do not share"
            )
        if self.lora.enabled:
            raise ValueError(
                f"processes = {self.processes} trains full weights: LoRA trains on one GPU (processes = 1)"
            )
        share = self.micro_batch * self.processes
        if self.batch_size % share:
            raise ValueError(
                f"tasks_per_step × group_size ({self.batch_size}) must split into micro-batches of "
                f"{self.micro_batch} over {self.processes} processes (a multiple of {share})"
            )

    def with_sampling(self, **update: object) -> TrainerConfig:
        """A copy whose episodes sample with `update` applied to `episode.params`."""
        params = self.episode.params.model_copy(update=update)
        return self.model_copy(update={"episode": self.episode.model_copy(update={"params": params})})

    @property
    def micro_batch(self) -> int:
        """Sequences per forward/backward pass."""
        return min(self.micro_batch_size, self.batch_size)

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches each process accumulates per optimizer step (the step's batch over all of them)."""
        return self.batch_size // (self.micro_batch * self.processes)

    @property
    def batch_size(self) -> int:
        """Completions per optimizer step (groups × G)."""
        return self.tasks_per_step * self.group_size
