"""Checkpoints: safetensors folders with the tokenizer and a lineage file; retention and resume.

A checkpoint is `<out_dir>/checkpoints/step-NNNNNN/` holding what `save_pretrained` writes
(`model.safetensors`, `config.json`, generation config), the tokenizer (with the tool-aware chat
template) and `lineage.json`: the parent policy, the round, the phase, the step and the reward
statistics of the rollouts that led to it. A LoRA run's checkpoint also keeps its adapter alone in
`adapter/`, so a resumed round continues the adapter on the weights the round started from; its
merged weights are fp32 (`trainer.lora_export`).
Folders are written under a temporary name and renamed into place, so a crash never leaves a
half-written checkpoint that resume would pick up.

Retention keeps the last `keep_last` checkpoints and (optionally) the one with the best reward.
Resume reads the newest complete checkpoint of an output folder and continues after its step; the
optimizer state is not saved (it would triple the disk use) and starts fresh on resume.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, Field

log = structlog.get_logger(__name__)

LINEAGE_FILE = "lineage.json"
ADAPTER_DIR = "adapter"  # a LoRA run's adapter, beside the merged weights
_PREFIX = "step-"


class Lineage(BaseModel):
    """Where a checkpoint comes from and how good its rollouts were."""

    parent: str | None  # the policy folder training started from
    round_id: int
    phase: Literal["grpo", "sft"]
    step: int
    total_steps: int
    reward_mean: float | None = None
    reward_std: float | None = None
    pass_rate: float | None = None
    episodes: int = 0
    # Training time of the round up to this checkpoint, across resumes (a resumed round goes on
    # counting from here), so a round's cost is known even when a crash split it.
    train_seconds: float = 0.0
    created_at: float = Field(default_factory=time.time)
    extra: dict[str, Any] = Field(default_factory=dict)


class CheckpointError(RuntimeError):
    """A folder is not a usable checkpoint (missing weights, tokenizer or lineage)."""


def checkpoints_dir(out_dir: Path) -> Path:
    """Where an output folder keeps its checkpoints."""
    return out_dir / "checkpoints"


def is_peft(model: Any) -> bool:
    """Whether `model` carries peft adapters (LoRA)."""
    return hasattr(model, "merge_and_unload")


def save_checkpoint(
    model: Any, tokenizer: Any, out_dir: Path, lineage: Lineage, *, adapter: Any = None
) -> Path:
    """Write a checkpoint of `model` atomically and return its folder.

    `adapter`: the peft model whose trained adapter (named "default") is kept in `adapter/` too.
    `model` is a full model: a peft model's adapter is merged first (`trainer.lora_export`, in fp32).
    """
    if is_peft(model):
        raise ValueError("save_checkpoint takes a full model: merge the adapter first (trainer.lora_export)")
    root = checkpoints_dir(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{_PREFIX}{lineage.step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    try:
        # Every checkpoint is a full model that vLLM and the local backend load alike.
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        if adapter is not None:
            adapter.save_pretrained(str(tmp / ADAPTER_DIR), selected_adapters=["default"])
        (tmp / LINEAGE_FILE).write_text(lineage.model_dump_json(indent=2))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info(
        "checkpoint.saved",
        path=str(target),
        round=lineage.round_id,
        step=lineage.step,
        reward_mean=lineage.reward_mean,
    )
    return target


def read_lineage(folder: Path) -> Lineage:
    """The lineage of a checkpoint folder; `CheckpointError` when it is not one."""
    path = folder / LINEAGE_FILE
    if not path.is_file():
        raise CheckpointError(f"{folder} has no {LINEAGE_FILE}: not an Arena checkpoint")
    try:
        return Lineage.model_validate_json(path.read_text())
    except ValueError as exc:
        raise CheckpointError(f"{path} is not a valid lineage file: {exc}") from exc


def list_checkpoints(out_dir: Path) -> list[tuple[Path, Lineage]]:
    """Complete checkpoints of an output folder, oldest step first (temporary folders ignored)."""
    root = checkpoints_dir(out_dir)
    if not root.is_dir():
        return []
    found: list[tuple[Path, Lineage]] = []
    for folder in root.iterdir():
        if not folder.is_dir() or not folder.name.startswith(_PREFIX):
            continue
        if not any(folder.glob("*.safetensors")):
            continue
        try:
            found.append((folder, read_lineage(folder)))
        except CheckpointError:
            continue
    return sorted(found, key=lambda item: item[1].step)


def latest_checkpoint(out_dir: Path) -> tuple[Path, Lineage] | None:
    """The newest complete checkpoint, where a resumed run continues."""
    found = list_checkpoints(out_dir)
    return found[-1] if found else None


def prune_checkpoints(out_dir: Path, *, keep_last: int, keep_best: bool) -> list[Path]:
    """Delete old checkpoints, keeping the last `keep_last` and the best by reward; returns the deleted."""
    found = list_checkpoints(out_dir)
    keep = {path for path, _ in found[-keep_last:]}
    if keep_best:
        rated = [(lin.reward_mean, lin.step, path) for path, lin in found if lin.reward_mean is not None]
        if rated:
            keep.add(max(rated)[2])
    deleted = []
    for path, _ in found:
        if path not in keep:
            shutil.rmtree(path, ignore_errors=True)
            deleted.append(path)
    return deleted


def best_checkpoint(out_dir: Path) -> tuple[Path, Lineage] | None:
    """The checkpoint with the highest rollout reward (ties: the later one)."""
    rated = [
        (lin.reward_mean, lin.step, path, lin)
        for path, lin in list_checkpoints(out_dir)
        if lin.reward_mean is not None
    ]
    if not rated:
        return None
    _, _, path, lin = max(rated, key=lambda r: (r[0], r[1]))
    return path, lin


def lineage_chain(folder: Path, *, limit: int = 100) -> list[Lineage]:
    """The lineage of a checkpoint and of its ancestors that are still on disk, newest first."""
    chain: list[Lineage] = []
    current: Path | None = folder
    while current is not None and len(chain) < limit:
        try:
            lin = read_lineage(current)
        except CheckpointError:
            break
        chain.append(lin)
        current = Path(lin.parent) if lin.parent else None
    return chain


def load_policy(folder: Path, *, device: str = "cpu", dtype: Any = None) -> tuple[Any, Any]:
    """Load a model folder (checkpoint or base model) and its tokenizer (blocking).

    The weights are fp32 on CPU and bfloat16 on GPU (for inference), unless `dtype` (a torch dtype)
    says otherwise: training passes `trainer.precision.train_dtype` (fp32 master weights), evaluation
    `TrainerConfig.rollout_dtype`.
    """
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{folder} is not a model folder (no config.json)")
    import torch
    from transformers import AutoModelForCausalLM

    if dtype is None:
        dtype = torch.float32 if device == "cpu" else torch.bfloat16
    tokenizer = load_tokenizer(folder)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).to(device)
    return model, tokenizer


def load_tokenizer(folder: Path) -> Any:
    """A model folder's tokenizer as training uses it: a pad token, and a chat template with tools."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(tokenizer, "chat_template", None) is None:
        from simulate.embedded import tool_chat_template

        tokenizer.chat_template = tool_chat_template()
    return tokenizer


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (rename over the old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)
