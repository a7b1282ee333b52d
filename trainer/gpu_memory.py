"""How much GPU memory a training plan needs, estimated from the model's `config.json`.

A plan that cannot fit is refused before anything is loaded, naming the numbers (`arena config
check`, and `train_round` on GPU). The estimate is deliberately rough and errs high:

- full fine-tune: fp32 master weights (4 bytes a weight), the bf16 copies autocast makes for the
  matmuls (2), fp32 gradients (4) and AdamW's two fp32 moments (8) — 18 bytes a weight; with a KL
  term TRL also loads a reference model (fp32, 4);
- LoRA: the frozen bf16 base (2 bytes a weight) plus 18 bytes per adapter weight;
- activations of one micro-batch: with gradient checkpointing every layer keeps its bf16 input
  and one layer is recomputed at a time (its attention projections and MLP); without it every
  layer keeps those. The LM head's fp32 logits and log-softmax (8 bytes per vocabulary entry)
  are counted for the trained positions only (the policy's tokens: `policy_token_logps`).
- several processes (`trainer.processes`, one GPU each): with FSDP's FULL_SHARD every GPU keeps
  1/N of the weights, gradients, AdamW moments and KL reference, plus the bf16 units it gathers
  to compute (the embeddings and LM head, which stay gathered through the forward, and two
  decoder layers: the one computing and the one prefetched); without sharding (data parallel)
  every GPU holds everything. Activations are per GPU either way (each trains its own micro-batch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

GB = 1e9

# Architectures of common policy models, for a plan checked on a machine without the weights
# (`arena config check` on a laptop): the values of their `config.json` that the estimate reads.
KNOWN_MODELS: dict[str, dict[str, Any]] = {
    "qwen3-0.6b": {"hidden_size": 1024, "num_hidden_layers": 28, "intermediate_size": 3072,
                   "vocab_size": 151936, "num_attention_heads": 16, "num_key_value_heads": 8,
                   "head_dim": 128, "tie_word_embeddings": True},
    "qwen3-1.7b": {"hidden_size": 2048, "num_hidden_layers": 28, "intermediate_size": 6144,
                   "vocab_size": 151936, "num_attention_heads": 16, "num_key_value_heads": 8,
                   "head_dim": 128, "tie_word_embeddings": True},
    "qwen3-4b": {"hidden_size": 2560, "num_hidden_layers": 36, "intermediate_size": 9728,
                 "vocab_size": 151936, "num_attention_heads": 32, "num_key_value_heads": 8,
                 "head_dim": 128, "tie_word_embeddings": True},
    "qwen3-8b": {"hidden_size": 4096, "num_hidden_layers": 36, "intermediate_size": 12288,
                 "vocab_size": 151936, "num_attention_heads": 32, "num_key_value_heads": 8,
                 "head_dim": 128, "tie_word_embeddings": False},
    "qwen3-14b": {"hidden_size": 5120, "num_hidden_layers": 40, "intermediate_size": 17408,
                  "vocab_size": 151936, "num_attention_heads": 40, "num_key_value_heads": 8,
                  "head_dim": 128, "tie_word_embeddings": False},
    "qwen2.5-7b-instruct": {"hidden_size": 3584, "num_hidden_layers": 28, "intermediate_size": 18944,
                            "vocab_size": 152064, "num_attention_heads": 28, "num_key_value_heads": 4,
                            "tie_word_embeddings": False},
    "llama-3.1-8b-instruct": {"hidden_size": 4096, "num_hidden_layers": 32, "intermediate_size": 14336,
                              "vocab_size": 128256, "num_attention_heads": 32, "num_key_value_heads": 8,
                              "tie_word_embeddings": False},
}  # fmt: skip


class ModelShape(BaseModel):
    """The parts of a decoder-only transformer's `config.json` that set its memory."""

    hidden_size: int = Field(gt=0)
    num_hidden_layers: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    tie_word_embeddings: bool = False
    source: str = ""  # where the numbers came from

    @classmethod
    def from_config(cls, config: dict[str, Any], source: str = "") -> ModelShape:
        """From a `config.json` mapping (a missing `num_key_value_heads`/`head_dim` takes its default)."""
        heads = int(config["num_attention_heads"])
        return cls(
            hidden_size=config["hidden_size"],
            num_hidden_layers=config["num_hidden_layers"],
            intermediate_size=config["intermediate_size"],
            vocab_size=config["vocab_size"],
            num_attention_heads=heads,
            num_key_value_heads=config.get("num_key_value_heads") or heads,
            head_dim=config.get("head_dim") or int(config["hidden_size"]) // heads,
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            source=source,
        )

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each projection of one layer, by the module names LoRA targets."""
        h, q, kv, i = (
            self.hidden_size,
            self.num_attention_heads * self.head_dim,
            self.num_key_value_heads * self.head_dim,
            self.intermediate_size,
        )
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    @property
    def parameters(self) -> int:
        """The number of weights (embeddings, LM head unless tied, layers, norms)."""
        per_layer = sum(a * b for a, b in self.linear_shapes().values()) + 2 * self.hidden_size
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return embeddings + self.num_hidden_layers * per_layer + self.hidden_size

    def lora_parameters(self, r: int, target_modules: list[str]) -> int:
        """Adapter weights of rank `r` on `target_modules` in every layer."""
        shapes = self.linear_shapes()
        per_layer = sum(r * (a + b) for name, (a, b) in shapes.items() if name in target_modules)
        return self.num_hidden_layers * per_layer


def model_shape(folder: Path) -> ModelShape | None:
    """The shape from `folder/config.json`, else a known architecture named like the folder, else None."""
    config_file = folder / "config.json"
    if config_file.is_file():
        return ModelShape.from_config(json.loads(config_file.read_text()), source=str(config_file))
    known = KNOWN_MODELS.get(folder.name.lower())
    if known is not None:
        return ModelShape.from_config(
            known, source=f"known architecture {folder.name} ({config_file} absent)"
        )
    return None


class MemoryPlan(BaseModel):
    """The estimate for one plan, in GB (10^9 bytes), and whether it fits the budget."""

    mode: str  # "full" or "lora"
    parameters: int
    processes: int = 1  # GPUs the plan runs on (the numbers are per GPU)
    sharded: bool = False  # FSDP FULL_SHARD over the processes
    gathered_gb: float = 0.0  # bf16 units an FSDP rank gathers to compute
    trained_parameters: int
    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    reference_gb: float
    activations_gb: float
    budget_gb: float

    @property
    def total_gb(self) -> float:
        return (
            self.weights_gb
            + self.gradients_gb
            + self.optimizer_gb
            + self.reference_gb
            + self.gathered_gb
            + self.activations_gb
        )

    @property
    def fits(self) -> bool:
        return self.total_gb <= self.budget_gb

    def describe(self) -> str:
        """One line with every term, e.g. for `arena config check`."""
        where = ""
        if self.processes > 1:
            how = f"FSDP full-shard over {self.processes} GPUs" if self.sharded else f"{self.processes} GPUs"
            where = f" ({how}, per GPU)"
        gathered = f"gathered layers {self.gathered_gb:.1f} GB + " if self.sharded else ""
        return (
            f"{self.mode} fine-tune of {self.parameters / 1e9:.2f}B weights "
            f"({self.trained_parameters / 1e6:,.1f}M trained){where}: weights {self.weights_gb:.1f} GB + "
            f"gradients {self.gradients_gb:.1f} GB + AdamW moments {self.optimizer_gb:.1f} GB + "
            f"KL reference {self.reference_gb:.1f} GB + {gathered}activations {self.activations_gb:.1f} GB = "
            f"{self.total_gb:.1f} GB of {self.budget_gb:.0f} GB"
        )


def estimate(
    shape: ModelShape,
    *,
    lora_r: int | None,
    lora_targets: list[str],
    micro_batch: int,
    sequence_tokens: int,
    trained_tokens: int,
    gradient_checkpointing: bool,
    kl_reference: bool,
    budget_gb: float,
    processes: int = 1,
    sharded: bool = False,
) -> MemoryPlan:
    """The memory of training `shape` (LoRA of rank `lora_r`, or full when None) on each of
    `processes` GPUs, sharded by FSDP (FULL_SHARD) or replicated."""
    n = shape.parameters
    if lora_r is None:
        trained = n
        weights = n * (4 + 2)  # fp32 master + the bf16 copies autocast makes
        reference = n * 4 if kl_reference else 0
    else:
        trained = shape.lora_parameters(lora_r, lora_targets)
        weights = n * 2 + trained * (4 + 2)  # frozen bf16 base; fp32 adapters
        reference = 0  # the reference is the base with the adapters switched off
    h, layers = shape.hidden_size, shape.num_hidden_layers
    tokens = micro_batch * sequence_tokens
    one_layer = tokens * (4 * h + 3 * shape.intermediate_size) * 2  # projections and MLP, bf16
    kept = tokens * h * 2 * layers if gradient_checkpointing else one_layer * layers
    head = micro_batch * min(trained_tokens, sequence_tokens) * shape.vocab_size * 8
    shards = processes if sharded else 1
    gathered = 0
    if sharded:
        layer = sum(a * b for a, b in shape.linear_shapes().values()) + 2 * h
        root = shape.vocab_size * h * (1 if shape.tie_word_embeddings else 2)
        gathered = (root + 2 * layer) * 2  # bf16
    return MemoryPlan(
        mode="full" if lora_r is None else "lora",
        parameters=n,
        trained_parameters=trained,
        processes=processes,
        sharded=sharded,
        weights_gb=weights / shards / GB,
        gradients_gb=trained * 4 / shards / GB,
        optimizer_gb=trained * 8 / shards / GB,
        reference_gb=reference / shards / GB,
        gathered_gb=gathered / GB,
        activations_gb=(kept + one_layer + head) / GB,
        budget_gb=budget_gb,
    )


def plan_for(shape: ModelShape, config: Any, budget_gb: float) -> MemoryPlan:
    """The estimate for a `trainer.config.TrainerConfig` on `shape`."""
    episode = config.episode
    return estimate(
        shape,
        lora_r=config.lora.r if config.lora.enabled else None,
        lora_targets=list(config.lora.target_modules),
        micro_batch=config.micro_batch,
        sequence_tokens=episode.max_total_tokens,
        trained_tokens=episode.max_turns * episode.max_tokens_per_turn,
        gradient_checkpointing=config.gradient_checkpointing,
        kl_reference=config.beta > 0,
        budget_gb=budget_gb,
        processes=config.processes,
        sharded=config.sharding == "fsdp",
    )


class PlanTooLarge(RuntimeError):
    """The training plan does not fit the GPU memory it may use."""


def check_plan(plan: MemoryPlan) -> str | None:
    """Raise `PlanTooLarge` naming the numbers when the weights and optimizer state alone exceed the
    budget (certain to run out of memory); a warning when only the worst-case activations do (the
    episodes would have to reach their token caps), else None.
    """
    static = plan.total_gb - plan.activations_gb
    if static > plan.budget_gb:
        advice = (
            "LoRA adapters (trainer.lora.enabled = true) or FSDP over more GPUs (trainer.processes, "
            "trainer.sharding = 'fsdp')"
            if plan.mode == "full"
            else "a smaller model"
        )
        raise PlanTooLarge(f"the trainer cannot fit the GPU: {plan.describe()}; use {advice}")
    if not plan.fits:
        return f"the trainer may run out of GPU memory on episodes near their token caps: {plan.describe()}"
    return None
