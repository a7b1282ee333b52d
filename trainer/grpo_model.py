"""The model a GRPO round trains: loaded at the round's start or resumed, saved merged.

A resumed round must train the same thing a fresh one would: the same KL reference (the policy the
round started from) and, with LoRA, the same adapter continued on the same base weights.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import structlog

from trainer.checkpoints import ADAPTER_DIR, is_peft, latest_checkpoint, load_policy
from trainer.config import TrainerConfig
from trainer.metrics import CheckpointInfo, TrainResult
from trainer.precision import train_dtype

log = structlog.get_logger(__name__)


def resume_point(out_dir: Path, policy_dir: Path, round_id: int) -> tuple[int, Path, float]:
    """(step, folder, training seconds so far) a round goes on from: its newest checkpoint in
    `out_dir`, else step 0 from `policy_dir`."""
    latest = latest_checkpoint(out_dir)
    if latest is None or latest[1].phase != "grpo" or latest[1].round_id != round_id:
        return 0, policy_dir, 0.0
    log.info("grpo.resume", round=round_id, step=latest[1].step, checkpoint=str(latest[0]))
    return latest[1].step, latest[0], latest[1].train_seconds


def finished_round(out_dir: Path, round_id: int, started: float) -> TrainResult:
    """The result of a call on a round whose steps are all done already (nothing is trained again)."""
    latest = latest_checkpoint(out_dir)
    assert latest is not None
    path, lineage = latest
    return TrainResult(
        round_id=round_id,
        phase="grpo",
        policy_dir=path,
        steps=0,
        resumed_from_step=lineage.step,
        total_steps=lineage.step,
        seconds=time.perf_counter() - started,
        prior_seconds=lineage.train_seconds,
        checkpoints=[CheckpointInfo(path=path, step=lineage.step, reward_mean=lineage.reward_mean)],
    )


def savable(model: Any, base_dir: Path) -> Any:
    """A full model to save: a peft model's adapter is merged in fp32 (`trainer.lora_export`, on the
    round's base weights from `base_dir`); the training model keeps its adapter."""
    if is_peft(model):
        from trainer.lora_export import merged_model

        return merged_model(model, base_dir)
    return model


def load_start(policy_dir: Path, start_dir: Path, config: TrainerConfig, device: str) -> tuple[Any, Any]:
    """The model to train (blocking): the round's start, or the checkpoint a resumed round continues.

    A resumed LoRA round loads the round's starting weights with the checkpoint's adapter rather
    than the merged checkpoint: the adapter goes on training where it stopped, and the KL
    reference (the weights without it) stays the policy the round started from.
    """
    adapter = start_dir / ADAPTER_DIR
    # fp32 weights wherever the optimizer steps them (see `trainer.precision`).
    dtype = train_dtype(device, lora=config.lora.enabled)
    if not (config.lora.enabled and start_dir != policy_dir and adapter.is_dir()):
        model, tokenizer = load_policy(start_dir, device=device, dtype=dtype)
    else:
        from peft import PeftModel

        # peft loads the adapter in fp32 over the bfloat16 base (`autocast_adapter_dtype`).
        base, tokenizer = load_policy(policy_dir, device=device, dtype=dtype)
        model = PeftModel.from_pretrained(base, str(adapter), is_trainable=True)
    # TRL builds a full KL reference (beta > 0) from the folder the model says it came from. After
    # a resume that is the mid-round checkpoint, which would move the anchor to it: point it back
    # at the policy the round started from.
    model.config._name_or_path = str(policy_dir)
    return model, tokenizer


def anchor_reference_adapter(model: Any) -> None:
    """Make TRL's "ref" adapter (a copy of a loaded adapter, beta > 0) the identity.

    Handed a model that already has an adapter, TRL copies it as the KL reference; for a resumed
    round that copy is the mid-round policy. Zeroing its B matrices leaves the starting weights,
    the reference a fresh round has.
    """
    for name, param in model.named_parameters():
        if ".ref." in name and "lora_B" in name:
            param.data.zero_()
