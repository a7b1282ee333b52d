"""Helpers shared by the phases: the environment registry and environment categories."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ops.config import ArenaConfig
    from ops.metrics import Metrics


def registry(config: ArenaConfig, metrics: Metrics) -> Any:
    """The environment registry (bundled + ARENA_ENV_PATH + `data.env_path`), with metric labels declared."""
    from arena.env.registry import Registry

    reg = Registry(config.data.env_path)
    envs = reg.load_all()
    metrics.set_known(envs, {top_category(env) for env in envs.values()})
    return reg


def top_category(env: Any) -> str:
    """An environment's top-level category."""
    return env.category[0] if getattr(env, "category", None) else "Uncategorized"
