"""The arena: K held-out environments per top-level category, disjoint from training (Agent-World).

Per category with n environments, k = min(K, n // 2) go to the arena, so every category with two or
more environments keeps at least one for training; a category with a single environment trains
unless `evaluate_singletons` is set. The draw is seeded and re-drawn every `redraw_every` rounds;
each draw is recorded by the caller (the daemon stores it with the round).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from pydantic import BaseModel, Field


class StratifyConfig(BaseModel):
    """How the arena is drawn."""

    per_category: int = Field(default=1, ge=1, description="K arena environments per top-level category")
    redraw_every: int = Field(default=0, ge=0, description="re-draw every N rounds; 0 never re-draws")
    evaluate_singletons: bool = False


class ArenaDraw(BaseModel):
    """One draw: which environments are held out for evaluation, which train."""

    round: int
    seed: int
    arena: list[str]
    training: list[str]
    by_category: dict[str, list[str]]


def draw_round(round_id: int, config: StratifyConfig) -> int:
    """The round whose draw is in force at `round_id` (draws happen at 1, 1+N, 1+2N, ...)."""
    if config.redraw_every <= 0:
        return 1
    return 1 + ((max(round_id, 1) - 1) // config.redraw_every) * config.redraw_every


def draw_arena(env_categories: dict[str, str], round_id: int, config: StratifyConfig, seed: int) -> ArenaDraw:
    """Draw the arena for `round_id` from environment → top-level category.

    Deterministic in (environments, the draw round, seed): rounds between re-draws get the same split.
    """
    at = draw_round(round_id, config)
    rng = np.random.default_rng([seed, at])
    by_category: dict[str, list[str]] = defaultdict(list)
    for env, category in sorted(env_categories.items()):
        by_category[category].append(env)
    arena: list[str] = []
    chosen: dict[str, list[str]] = {}
    for category in sorted(by_category):
        envs = by_category[category]
        k = min(config.per_category, len(envs) // 2)
        if len(envs) == 1 and config.evaluate_singletons:
            k = 1
        picked = sorted(rng.choice(envs, size=k, replace=False).tolist()) if k else []
        chosen[category] = picked
        arena.extend(picked)
    training = sorted(set(env_categories) - set(arena))
    return ArenaDraw(round=at, seed=seed, arena=sorted(arena), training=training, by_category=chosen)
