"""The checks a configuration passes before the daemon starts, made alike by `arena run` and `arena config check`.

`load_config` refuses what the settings models refuse (a bad value, an unknown key); `check_startup`
adds what needs the whole configuration and more than the models: an admin API exposed without a
token (`ops.admin.check_exposure`) and a GPU plan whose weights and optimizer state cannot fit
`trainer.gpu_memory_gb` (`trainer.gpu_memory`). Both commands load through `load_checked_config`,
so a file `check` refuses `run` refuses too (`tests/ops/test_preflight.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ops.admin import AdminExposureError, check_exposure
from ops.config import ArenaConfig, ConfigError, load_config


def load_checked_config(
    path: Path | str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[ArenaConfig, list[str]]:
    """The effective configuration and `check_startup`'s notes; raise `ConfigError` for what the daemon refuses."""
    config = load_config(path, environ)
    return config, check_startup(config)


def check_startup(config: ArenaConfig) -> list[str]:
    """Raise `ConfigError` for a configuration the daemon must not start with; return notes worth showing
    (the GPU memory estimate, and a line starting with "warning: " for what may still not fit)."""
    try:
        check_exposure(config.admin)
    except AdminExposureError as exc:
        raise ConfigError(str(exc)) from None
    return gpu_memory_notes(config)


def gpu_memory_notes(config: ArenaConfig) -> list[str]:
    """The trainer's GPU memory estimate for a GPU plan (an http policy server and its base model);
    `ConfigError` for one whose weights and optimizer state cannot fit `trainer.gpu_memory_gb` (per
    GPU: with `trainer.sharding = "fsdp"` they are split over `trainer.processes` GPUs)."""
    if config.trainer.base_model is None or config.models.policy.backend != "http":
        return []  # the CPU recipe: the embedded model trains in host memory
    from ops.phases.runtime import trainer_config
    from trainer.gpu_memory import PlanTooLarge, check_plan, model_shape, plan_for

    # The trainer settings the daemon derives for round 0 (sequence length, micro-batch, LoRA,
    # processes and sharding): a batch that does not split over the processes is refused here.
    try:
        tconf = trainer_config(config, 0)
    except ValueError as exc:
        raise ConfigError(f"trainer: {exc}") from None
    shape = model_shape(config.trainer.base_model)
    if shape is None:
        return [f"GPU memory: not estimated ({config.trainer.base_model}/config.json not found)"]
    plan = plan_for(shape, tconf, config.trainer.gpu_memory_gb)
    try:
        warning = check_plan(plan)
    except PlanTooLarge as exc:
        raise ConfigError(str(exc)) from None
    notes = [f"GPU memory estimate ({shape.source}): {plan.describe()}"]
    return notes + ([f"warning: {warning}"] if warning else [])
