"""Which way a step's update reaches the policy server: `trainer.weight_sync` and what can take it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ops.config import load_config
from ops.phases.runtime import trainer_config
from trainer.config import LoraConfig, TrainerConfig
from trainer.publish import HttpWeightPublisher, LocalWeightPublisher
from trainer.weight_sync import adapter_sync


def test_only_a_lora_round_to_an_http_server_set_to_adapters_syncs_adapters(tmp_path: Path) -> None:
    http = HttpWeightPublisher("http://127.0.0.1:9/v1", tmp_path)
    local = LocalWeightPublisher(target=None)  # type: ignore[arg-type]
    lora = TrainerConfig(lora=LoraConfig(enabled=True))
    assert adapter_sync(http, lora)
    assert not adapter_sync(http, lora.model_copy(update={"weight_sync": "full"}))
    assert not adapter_sync(http, TrainerConfig())  # full fine-tuning has no adapter to send
    assert not adapter_sync(local, lora)  # an in-process model loads checkpoints


def test_the_daemon_setting_reaches_the_trainer(phase_context: Any, tmp_path: Path) -> None:
    base = {"ARENA_DATA_DIR": str(tmp_path), "ARENA_TRAINER__LORA__ENABLED": "true"}
    assert trainer_config(load_config(environ=base), 0).weight_sync == "adapter"
    full = load_config(environ={**base, "ARENA_TRAINER__WEIGHT_SYNC": "full"})
    assert trainer_config(full, 0).weight_sync == "full"
