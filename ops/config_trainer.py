"""The `[trainer]` section: GRPO, the SFT warm-up, checkpoints, the policy's chat format and publishing."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ops.config_sections import ConfigSection
from simulate.chat_format import DEFAULT_TEMPLATE_KWARGS


class TrainerConfig(ConfigSection):
    """GRPO."""

    learning_rate: float = Field(1e-6, gt=0, description="Optimizer learning rate.")
    kl_beta: float = Field(
        0.0,
        ge=0,
        description="KL coefficient against the policy each round starts from (0: no reference model).",
    )
    clip_low: float = Field(0.2, gt=0, description="PPO clip (lower).")
    clip_high: float = Field(0.28, gt=0, description="DAPO clip-higher (upper).")
    batch_size: int = Field(8, ge=1, description="Episodes per optimizer step.")
    dynamic_sampling_passes: int = Field(
        1,
        ge=0,
        le=16,
        description="Extra sampling passes per step that replace zero-variance groups (DAPO dynamic sampling).",
    )
    iterations_per_batch: int = Field(
        1,
        ge=1,
        le=16,
        description="Optimizer steps on each rollout batch (GRPO's mu; above 1 the clip bounds the reuse).",
    )
    keep_checkpoints: int = Field(
        3, ge=1, description="Checkpoints kept per round (the last N and the best by rollout reward)."
    )
    keep_rounds: int = Field(
        5,
        ge=1,
        description="Rounds whose checkpoint folders stay on disk; older ones go after each publish "
        "(never the live policy's).",
    )
    use_lora: bool = Field(False, description="Train LoRA adapters instead of full weights.")
    lora_sync: Literal["adapter", "full"] = Field(
        "adapter",
        description="How a LoRA round's step updates reach the policy server (trainer.rollouts = "
        "policy_server): adapter (runtime LoRA loading: vLLM --enable-lora) or full (merged weights reload).",
    )
    sft_warmup: bool = Field(
        True, description="Supervised warm-up before the first GRPO round of a fresh policy."
    )
    sft_epochs: float = Field(2.0, gt=0, description="Epochs of the SFT warm-up.")
    sft_learning_rate: float = Field(1e-4, gt=0, le=1, description="Learning rate of the SFT warm-up.")
    warmup_tasks_per_env: int = Field(
        16,
        ge=0,
        description="Grounded graph tasks per executable training environment in the warm-up set (beside "
        "its hand-written tasks): what a fresh policy imitates before its first GRPO round.",
    )
    warmup_max_tasks: int | None = Field(
        None,
        ge=1,
        description="At most this many warm-up tasks, taken in turn from each training environment "
        "(none: the whole set).",
    )
    system_prompt: Literal["full", "compact"] = Field(
        "full", description="Policy system prompt: full (with env rules) or compact (no rules)."
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_TEMPLATE_KWARGS),
        description="The policy's chat-template arguments (Qwen3's enable_thinking, ...), the same for SFT, "
        "GRPO rollouts, EVALUATE, the yardstick and the publish gate, local and http (sent to vLLM).",
    )
    tool_subset: int | None = Field(
        None, ge=0, description="Show each task its reference tools plus N distractors (none: all tools)."
    )
    publish_dir: Path | None = Field(
        None, description="Folder the HTTP policy server reads new weights from (http policy backend)."
    )
    rollouts: Literal["local", "policy_server"] = Field(
        "local",
        description="Where GRPO samples: local (the trainer's own model) or policy_server (the http policy "
        "server, e.g. vLLM, which gets every update through publish_dir).",
    )
    base_model: Path | None = Field(
        None, description="Initial policy weights (folder); default the policy model when local."
    )
    publish_gate: bool = Field(
        True,
        description="Publish a new policy only if it is not worse than its parent on the yardstick: the "
        "paired 95% interval of its change over the same tasks does not lie wholly below 0 (off: publish "
        "every trained policy).",
    )
    gpu_memory_gb: float = Field(
        80.0,
        gt=0,
        description="GPU memory the trainer may use (GB); `arena config check` refuses a plan whose "
        "weights, gradients and AdamW moments exceed it and warns when worst-case activations do.",
    )
    processes: int = Field(
        1,
        ge=1,
        le=64,
        description="Processes (one GPU each) for the GRPO step; above 1 it runs under `accelerate launch` "
        "with rollouts from the policy server (trainer.rollouts = policy_server), full weights only.",
    )
    sharding: Literal["none", "fsdp"] = Field(
        "none",
        description="With processes > 1: fsdp shards weights, gradients and AdamW moments over the GPUs "
        "(accelerate FSDP2, full shard; gpu_memory_gb is per GPU); none keeps a replica per process.",
    )

    @model_validator(mode="after")
    def _check_processes(self) -> TrainerConfig:
        if self.sharding != "none" and self.processes == 1:
            raise ValueError(f"sharding = '{self.sharding}' needs processes > 1 (one GPU holds everything)")
        if self.processes > 1 and self.rollouts != "policy_server":
            raise ValueError(
                f"processes = {self.processes} needs rollouts = 'policy_server': local rollouts sample from "
                "the trainer's one in-process model, which worker processes do not share"
            )
        if self.processes > 1 and self.use_lora:
            raise ValueError(
                f"processes = {self.processes} trains full weights: LoRA trains on one GPU (processes = 1)"
            )
        if self.sharding == "fsdp" and self.sft_warmup:
            raise ValueError(
                "the SFT warm-up trains in the daemon's one process, where a model that needs FSDP does not "
                "fit: set sft_warmup = false with sharding = 'fsdp'"
            )
        return self
