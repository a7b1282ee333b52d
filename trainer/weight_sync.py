"""How each GRPO update reaches an HTTP rollout server (vLLM, or `arena serve-model --allow-reload`).

A full-weights round saves a checkpoint and has the server reload it: the model's size per step
(16 GB for an 8B model in bf16). A LoRA round (`config.weight_sync = "adapter"`) sends the adapter
alone, a few megabytes, which the server applies on top of the round's full weights
(`HttpWeightPublisher.publish_adapter`); full checkpoints are then written only every
`save_every` steps. Each publication's bytes and seconds go to the step's metrics.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread

from trainer.checkpoints import ADAPTER_DIR, is_peft
from trainer.config import TrainerConfig
from trainer.publish import WeightPublisher, WeightSync


def adapter_sync(publisher: WeightPublisher, config: TrainerConfig) -> bool:
    """Whether a LoRA round's updates go to the server as adapters (it can take them, config says so)."""
    return config.lora.enabled and config.weight_sync == "adapter" and hasattr(publisher, "publish_adapter")


async def sync_step(
    publisher: WeightPublisher,
    config: TrainerConfig,
    model: Any,
    *,
    round_id: int,
    step: int,
    staging: Path,
    checkpoint: Callable[[], Path],
) -> WeightSync | None:
    """Publish step `step`'s weights: the adapter from `staging` (written here, then removed), or
    the full checkpoint `checkpoint()` saves (or has saved). Returns how it went, when known."""
    if adapter_sync(publisher, config) and is_peft(model):
        # The training adapter alone (a KL anchor is a second adapter, not part of the policy).
        await anyio.to_thread.run_sync(
            lambda: model.save_pretrained(str(staging), selected_adapters=["default"])
        )
        try:
            return await publisher.publish_adapter(staging, round_id=round_id, step=step)  # type: ignore[attr-defined, no-any-return]
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # the server reads its own copy
    path = await anyio.to_thread.run_sync(checkpoint)
    return await publisher.publish(path, round_id=round_id, step=step)


async def publish_start(
    publisher: WeightPublisher,
    config: TrainerConfig,
    policy_dir: Path,
    start_dir: Path,
    *,
    round_id: int,
    step: int,
) -> None:
    """Put the weights a `train_round` call starts from on the server.

    The server may hold other weights (the base model before a warm-up, a later step before a
    crash): the first rollouts must come from these. With adapter sync the full weights are the
    round's own start (each of the round's adapters is relative to them), plus the resumed
    checkpoint's adapter when the round goes on from one.
    """
    if not adapter_sync(publisher, config):
        await publisher.publish(start_dir, round_id=round_id, step=step)
        return
    await publisher.publish(policy_dir, round_id=round_id, step=0)
    resumed = start_dir / ADAPTER_DIR
    if start_dir != policy_dir and resumed.is_dir():
        await publisher.publish_adapter(resumed, round_id=round_id, step=step)  # type: ignore[attr-defined]
