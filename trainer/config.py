"""Configuration of the trainer: GRPO rounds, the SFT warm-up, rollouts, checkpoints, publishing.

One pydantic model, `TrainerConfig`, is what the daemon passes to `train_round`/`sft_warmup`. The
defaults are the CPU demo (the embedded model, small groups); production raises `group_size`,
`tasks_per_step` and uses `rollout_backend = "http"` with a vLLM server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arena.episode.runner import EpisodeConfig
from arena.tasks.reward import RewardConfig
from arena.types import SamplingParams
from simulate.chat_format import DEFAULT_TEMPLATE_KWARGS
from trainer.off_policy import OffPolicyConfig


def _rollout_episode() -> EpisodeConfig:
    # Sampling with temperature 1 so the G samples of a group differ; logprobs for the IS ratio.
    return EpisodeConfig(
        max_turns=6,
        max_tokens_per_turn=128,
        max_total_tokens=3072,
        params=SamplingParams(temperature=1.0, top_p=1.0, logprobs=True),
    )


class LoraConfig(BaseModel):
    """Optional LoRA adapters (peft) for the SFT warm-up and GRPO alike.

    Off by default: the embedded model is small enough to train fully. Checkpoints always hold the
    merged weights.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    r: int = Field(default=16, ge=1, le=512)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )

    def peft_config(self) -> Any:
        """peft's `LoraConfig` for these settings, or None when LoRA is off."""
        if not self.enabled:
            return None
        from peft import LoraConfig as PeftLoraConfig

        return PeftLoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=list(self.target_modules),
            task_type="CAUSAL_LM",
        )


class SftConfig(BaseModel):
    """The supervised warm-up on reference trajectories (loss on assistant tokens only)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True  # run before the first GRPO round of a fresh policy
    epochs: float = Field(default=3.0, gt=0.0, le=100.0)
    learning_rate: float = Field(default=5e-5, gt=0.0, le=1.0)
    batch_size: int = Field(default=4, ge=1, le=256)
    max_length: int = Field(default=2048, ge=64)  # longer trajectories are skipped, not cut
    weight_decay: float = Field(default=0.0, ge=0.0)
    warmup_ratio: float = Field(default=0.05, ge=0.0, lt=1.0)
    seed: int = 0


class PublishConfig(BaseModel):
    """Where new weights go after a round: the trainer's own model (local) or a vLLM server (http)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "http"] = "local"
    base_url: str | None = None  # vLLM server root, e.g. http://vllm:8000
    shared_dir: Path | None = None  # a folder the vLLM server can read (shared volume)
    reload_path: str = "/collective_rpc"  # vLLM's endpoint that reloads weights from a folder
    timeout_s: float = Field(default=600.0, gt=0)
    api_key: str | None = None

    @model_validator(mode="after")
    def _check(self) -> PublishConfig:
        if self.kind == "http" and (not self.base_url or self.shared_dir is None):
            raise ValueError("publish kind 'http' needs base_url and shared_dir")
        return self


class TrainerConfig(BaseModel):
    """Everything `train_round` and `sft_warmup` need besides the tasks and the folders."""

    model_config = ConfigDict(extra="forbid")

    # GRPO
    group_size: int = Field(default=4, ge=2, le=256)  # G samples per task
    tasks_per_step: int = Field(default=2, ge=1, le=1024)  # groups per optimizer step
    max_steps: int = Field(default=10, ge=1)  # optimizer steps per round
    learning_rate: float = Field(default=1e-5, gt=0.0, le=1.0)
    beta: float = Field(default=0.0, ge=0.0)  # KL coefficient (0: no reference model, DAPO style)
    epsilon: float = Field(default=0.2, gt=0.0, lt=1.0)  # lower clip
    epsilon_high: float = Field(default=0.28, gt=0.0, lt=1.0)  # upper clip (DAPO clip-higher)
    loss_type: Literal["dapo", "grpo", "dr_grpo", "bnpo"] = "dapo"
    scale_rewards: Literal["group", "batch", "none"] = "group"
    drop_zero_variance: bool = True  # mask groups whose rewards are all equal (no signal)
    # DAPO dynamic sampling: up to this many extra sampling passes per step replace the groups whose
    # rewards were all equal by groups of tasks not yet drawn this step, so fewer steps are spent on
    # groups without signal (each pass costs a rollout of the groups it replaces).
    dynamic_sampling_passes: int = Field(default=1, ge=0, le=16)
    # Optimizer steps on each batch of rollouts (GRPO's μ). With 1 the ratio to the sampling policy
    # is 1 at every step and the clip never binds; above 1 the batch is reused and the clipped ratio
    # bounds how far the later steps move the policy on it (a trust region), so each costly rollout
    # batch is learned from more than once.
    iterations_per_batch: int = Field(default=1, ge=1, le=16)
    max_grad_norm: float = Field(default=1.0, gt=0.0)
    # Sequences per forward/backward pass: a step's G × tasks_per_step completions are split into
    # micro-batches (gradient accumulation, one generation per optimizer step), which bounds memory.
    micro_batch_size: int = Field(default=2, ge=1)
    gradient_checkpointing: bool = True
    # bfloat16 autocast (fp32 master weights): None = where the hardware computes bf16 natively.
    bf16: bool | None = None
    seed: int = 0
    lora: LoraConfig = Field(default_factory=LoraConfig)
    # Rollouts
    episode: EpisodeConfig = Field(default_factory=_rollout_episode)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    rollout_backend: Literal["local", "http"] = "local"
    rollout_base_url: str | None = None  # OpenAI-compatible server (vLLM) when rollout_backend = "http"
    rollout_replica_urls: list[str] = Field(default_factory=list)  # more replicas of it (`simulate.replicas`)
    rollout_model: str = "policy"  # the served model name on that server
    rollout_api_key: str | None = None  # its API key, if it wants one
    rollout_concurrency: int = Field(default=32, ge=1)  # episodes in flight
    # The policy's chat-template arguments, the same for GRPO's rollouts (local, and the http
    # backend's token-id prompts rendered here: `simulate.token_chat`), the SFT warm-up and every
    # evaluation (`simulate.chat_format`). Thinking (Qwen3's `enable_thinking`) is off by default:
    # the template's empty think block stays in the prompt; on, the sampled reasoning is kept in
    # the chain and trained like every sampled token.
    chat_template_kwargs: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_TEMPLATE_KWARGS))
    # http backend, LoRA rounds: each step's update reaches the server as the adapter alone
    # ("adapter": vLLM's runtime LoRA loading, megabytes) or as merged full weights ("full": a
    # checkpoint reload, the model's size). Full checkpoints are saved every `save_every` steps either way.
    weight_sync: Literal["adapter", "full"] = "adapter"
    # Importance-sampling correction between the sampler's log-probs and the trainer's (TIS by default).
    off_policy: OffPolicyConfig = Field(default_factory=OffPolicyConfig)
    max_batch: int = Field(default=32, ge=1)  # local backend: rows per decode batch
    # Local backend: the dtype rollouts and evaluations sample in. "auto" = bfloat16 where the
    # hardware computes it natively (a refreshed copy of the fp32 training weights on CPU).
    rollout_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    # What the policy is shown (the same in training, warm-up and evaluation). "compact" leaves the
    # environment's rules out of the system prompt; `tool_subset` shows each task only its
    # reference tools plus that many distractors (TRUSTEE-style tool subsets; keeps CPU prompts short).
    system_prompt: Literal["full", "compact"] = "full"
    tool_subset: int | None = Field(default=None, ge=0)
    # Processes (one GPU each) for the GRPO step. Above 1 the step runs in worker processes started
    # with `accelerate launch` (`trainer.sharded`), each on its share of every batch; the daemon
    # runs their rollouts against the policy server. `sharding = "fsdp"` shards weights, gradients
    # and AdamW moments over them (accelerate's FSDP2, FULL_SHARD: GPUs only); "none" keeps a
    # full replica per process (data parallel, also on CPU with gloo).
    processes: int = Field(default=1, ge=1, le=64)
    sharding: Literal["none", "fsdp"] = "none"
    # Checkpoints
    save_every: int = Field(default=5, ge=1)  # optimizer steps between checkpoints (and at the end)
    keep_last: int = Field(default=2, ge=1)
    keep_best: bool = True
    # Warm-up and publishing
    sft: SftConfig = Field(default_factory=SftConfig)
    publish: PublishConfig = Field(default_factory=PublishConfig)

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
