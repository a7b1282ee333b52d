"""Helpers shared by the phases: the environment registry and environment categories."""

from __future__ import annotations

from typing import Any

from ops.phases.base import PhaseContext


def registry(ctx: PhaseContext) -> Any:
    """The environment registry (bundled + ARENA_ENV_PATH + `data.env_path`), with metric labels declared."""
    from arena.env.registry import Registry

    reg = Registry(ctx.config.data.env_path)
    envs = reg.load_all()
    ctx.metrics.set_known(envs, {top_category(env) for env in envs.values()})
    return reg


def top_category(env: Any) -> str:
    """An environment's top-level category."""
    return env.category[0] if getattr(env, "category", None) else "Uncategorized"
