"""The sub-models of `trainer.config.TrainerConfig`: LoRA adapters, the SFT warm-up, weight publishing.

They live beside `trainer/config.py` so that module stays readable; import them from either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class LoraConfig(BaseModel):
    """Optional LoRA adapters (peft) for the SFT warm-up and GRPO alike.

    Off by default: the embedded model is small enough to train fully. Checkpoints always hold the
    merged weights.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="Train LoRA adapters instead of full weights.")
    r: int = Field(default=16, ge=1, le=512, description="LoRA rank.")
    alpha: int = Field(default=32, ge=1, description="LoRA alpha (the update is scaled by alpha / r).")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Dropout on the adapters' input.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        description="Linear layers that get adapters (a JSON list).",
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

    enabled: bool = Field(
        default=True, description="Supervised warm-up before the first GRPO round of a fresh policy."
    )
    epochs: float = Field(default=2.0, gt=0.0, le=100.0, description="Epochs of the SFT warm-up.")
    learning_rate: float = Field(
        default=1e-4, gt=0.0, le=1.0, description="Learning rate of the SFT warm-up."
    )
    batch_size: int = Field(default=4, ge=1, le=256, description="Trajectories per SFT optimizer step.")
    max_length: int = Field(
        default=2048,
        ge=64,
        description="Longest trajectory (tokens) the warm-up imitates; longer ones are skipped, not cut.",
    )
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay of the warm-up.")
    warmup_ratio: float = Field(
        default=0.05, ge=0.0, lt=1.0, description="Share of the warm-up's steps spent ramping up its rate."
    )
    seed: int = Field(default=0, description="Seed of the warm-up's shuffling and initialisation.")


class PublishConfig(BaseModel):
    """Where new weights go after a round: the trainer's own model (local) or a vLLM server (http)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "http"] = Field(
        default="local", description="local: the trainer's own model; http: a vLLM server."
    )
    base_url: str | None = Field(default=None, description="vLLM server root, e.g. http://vllm:8000.")
    shared_dir: Path | None = Field(
        default=None, description="A folder the vLLM server can read (a shared volume)."
    )
    reload_path: str = Field(
        default="/collective_rpc", description="vLLM's endpoint that reloads weights from a folder."
    )
    timeout_s: float = Field(default=600.0, gt=0, description="Seconds a reload may take.")
    api_key: str | None = Field(default=None, description="The server's API key, if it wants one.")

    @model_validator(mode="after")
    def _check(self) -> PublishConfig:
        if self.kind == "http" and (not self.base_url or self.shared_dir is None):
            raise ValueError("publish kind 'http' needs base_url and shared_dir")
        return self
